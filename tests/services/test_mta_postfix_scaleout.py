"""A real Postfix in front of the scale-out store: pipe(8) -> ``letterlog lda`` and LMTP ->
``letterlog lmtp``, the log in a PostgreSQL of this module's own and the key-encryption
keys in a key cluster of its own (both stopped and started again on their data by the
tests), as the MTA fault tests of ``test_mta_postfix`` do for the embedded store.

While the log's PostgreSQL or the key cluster does not answer, Postfix must keep every
message (deferred with a 4.x.x reason that says little, nothing bounced, no traceback in
the LMTP server's log); the LMTP server keeps running through the outage. Once the server
is back, ``postqueue -f`` stores each message exactly once, byte-exact.

The MTA paths append to the log only (ADR 0039): the tables are HBase's and nothing listens
there. What was stored is read back by a reader of the same log and key store whose tables
are its own (embedded), caught up from the log."""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import secrets
import shutil
import smtplib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.embedded import Letterlog
from devtools.devservers import PostfixServer, PostgresServer
from devtools.devservers._common import free_ports, terminate, wait_for
from devtools.devservers.keycluster import KeyClusterServer
from devtools.devservers.postfix import ADDED_HEADERS, LDA_MACROS, SYSTEM_USER
from tests.factories import until

pytestmark = [pytest.mark.services, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SENDER = "alice@sender.test"
ACCOUNT = "bob@example.org"
DEFER_TIMEOUT = 90  # the lda's or server's own PostgreSQL timeout, then Postfix's log line
RESUMED = 45  # seconds from the server's return until Postfix's retries are all stored
FAULT_PICKS = ("cpython__msg_01.eml", "rubymail__plain-basic_email.eml")


def lf(raw: bytes) -> bytes:
    text = re.sub(rb"\r\n|\r|\n", b"\n", raw)
    return text if text.endswith(b"\n") else text + b"\n"


def without_added(stored: bytes, names: tuple[str, ...]) -> bytes:
    """``stored`` without the header fields Postfix put in front (each must be there)."""
    rest = stored
    for name in names:
        assert rest.lower().startswith(name.lower().encode() + b":"), rest[:120]
        end = 0
        while True:
            end = rest.index(b"\n", end) + 1
            if rest[end:end + 1] not in (b" ", b"\t"):
                break
        rest = rest[end:]
    return rest


class Restartable:
    """A PostgreSQL of the test's own, stopped and started again on its data and port."""

    def __init__(self, kind: type[PostgresServer], workdir: Path) -> None:
        (port,) = free_ports(1)
        self.kind, self.args = kind, {"workdir": workdir, "keep_workdir": True, "port": port}
        self.server: PostgresServer | None = kind(**self.args).start()
        self.args.update(password=self.server.password,
                         admin_password=self.server.admin_password)
        self.dsn = self.server.dsn

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def start(self) -> None:
        if self.server is None:
            self.server = self.kind(**self.args).start()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = Path(f"/tmp/ll-mtaso-{secrets.token_hex(3)}")  # short: PostgreSQL's socket path
    log = keys = None
    try:
        log = Restartable(PostgresServer, root / "log")
        keys = Restartable(KeyClusterServer, root / "keys")
        yield {"log": log, "keys": keys}
    finally:
        for server in (log, keys):
            if server is not None:
                server.stop()
        shutil.rmtree(root, ignore_errors=True)


def as_mta() -> dict[str, Any]:
    user = pwd.getpwnam(SYSTEM_USER)
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


class ScaleOutRoute:
    """A store on the scale-out path behind ``server``, reached through ``path``."""

    def __init__(self, server: PostfixServer, path: str, dep: dict[str, Any]) -> None:
        self.server, self.path, self.dep = server, path, dep
        tag = secrets.token_hex(4)
        self.data = server.store_root / f"so-{path}-{tag}"
        self.data.mkdir()
        mta = pwd.getpwnam(SYSTEM_USER)
        os.chown(self.data, mta.pw_uid, mta.pw_gid)
        self.db = f"mta_{tag}"
        for srv in (dep["log"], dep["keys"]):
            self._create_database(srv)
        self.env = {
            "LETTERLOG_EVENT_STORE": "postgres",
            "LETTERLOG_POSTGRES_DSN": self._dsn(dep["log"]),
            "LETTERLOG_KEY_STORE_DSN": self._dsn(dep["keys"]),
            "LETTERLOG_TABLE_STORE": "hbase", "LETTERLOG_HBASE_HOST": "127.0.0.1",
            "LETTERLOG_HBASE_PORT": "9", "LETTERLOG_HBASE_TABLE_PREFIX": f"mta{tag}",
            "LETTERLOG_DURABILITY": "normal", "LETTERLOG_POSTGRES_TIMEOUT": "5",
        }
        self.lmtp: subprocess.Popen[bytes] | None = None
        self.lmtp_log = self.data.parent / f"{self.data.name}.lmtp.log"
        self.letterlog("init")
        if path == "pipe":
            environment = [f"{k}={v}" for k, v in self.environ().items() if k != "HOME"]
            server.use_pipe(self.data, argv=["/usr/bin/env", *environment, sys.executable,
                                             "-m", "adapters.cli", f"--data={self.data}",
                                             "lda", *LDA_MACROS])
        else:
            self.start_lmtp()
        self.mark = server.log_mark()

    def _create_database(self, restartable: Restartable) -> None:
        import psycopg
        from psycopg import sql

        srv = restartable.server
        assert srv is not None
        with psycopg.connect(srv.admin_dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(self.db), sql.Identifier(srv.user)))

    def _dsn(self, restartable: Restartable) -> str:
        return str(restartable.dsn).rsplit("/", 1)[0] + f"/{self.db}"

    def environ(self) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT),
                "HOME": "/tmp", "LANG": "C.UTF-8", **self.env}

    def letterlog(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        p = subprocess.run([sys.executable, "-m", "adapters.cli", "--data", str(self.data),
                            *args], capture_output=True, timeout=120, cwd=str(ROOT),
                           env=self.environ(), **as_mta())
        assert p.returncode == 0, p.stderr.decode(errors="replace")[-3000:]
        return p

    def start_lmtp(self) -> None:
        (port,) = free_ports(1)
        with open(self.lmtp_log, "ab") as log:
            self.lmtp = subprocess.Popen(
                [sys.executable, "-m", "adapters.cli", "--data", str(self.data), "lmtp",
                 "--listen", f"127.0.0.1:{port}", "--timeout", "10"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=str(ROOT), env=self.environ(), start_new_session=True, **as_mta())

        def lhlo() -> bool:
            with smtplib.LMTP("127.0.0.1", port, timeout=10) as lmtp:
                return lmtp.ehlo("probe")[0] == 250

        wait_for(lhlo, what="letterlog lmtp", timeout=60, log_paths=[self.lmtp_log],
                 procs=[self.lmtp], interval=0.1)
        self.server.use_lmtp(f"inet:127.0.0.1:{port}")

    def stored(self, reader_data: Path) -> list[bytes]:
        """Every message of the account, read by a reader with tables of its own."""
        settings = {k.removeprefix("LETTERLOG_").lower(): v for k, v in self.env.items()}
        settings.update(table_store="embedded", data=str(reader_data))
        for name in ("hbase_host", "hbase_port", "hbase_table_prefix"):
            settings.pop(name)
        with Letterlog.open(**settings) as store:
            found = store.messages(ACCOUNT, "INBOX", limit=1000)
            return [store.extract(m.message_id) for m in found]

    def close(self) -> None:
        terminate(self.lmtp, timeout=30)  # type: ignore[arg-type]
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.server.delete_all()


@pytest.fixture(params=["pipe", "lmtp"])
def route(request: pytest.FixtureRequest, postfix_server: PostfixServer,
          deployment: dict[str, Any]) -> Iterator[ScaleOutRoute]:
    r = ScaleOutRoute(postfix_server, str(request.param), deployment)
    try:
        yield r
    finally:
        deployment["log"].start()  # a failed test may have left one down
        deployment["keys"].start()
        r.close()


def says_little(text: str, route: ScaleOutRoute) -> None:
    """A DSN's text: an RFC 3463 code and a short reason, no path, no library error, no
    server address (ADR 0067)."""
    reason = text.split("said:")[-1]
    assert str(route.data) not in text and "/" not in reason, text
    for leak in ("Error", "psycopg", "postgres", "127.0.0.1", "Traceback", "init"):
        assert leak not in reason, text


@pytest.mark.parametrize("fault", ["log", "keys"])
def test_postfix_keeps_the_mail_while_a_scale_out_server_is_down_and_stores_it_once(
        route: ScaleOutRoute, deployment: dict[str, Any], corpus: Path, fault: str,
        tmp_path: Path, record_property: Callable[[str, object], None]) -> None:
    messages = [(corpus / name).read_bytes() for name in FAULT_PICKS]
    before = make_before(route)
    route.server.wait_queue_empty(timeout=60)
    # a running LMTP server holds a batch of data keys under a KEK the key cluster already
    # has (docs/operations.md): it goes on delivering while the key cluster is down; a new
    # lda process has no key yet and defers
    keeps_delivering = route.path == "lmtp" and fault == "keys"
    deployment[fault].stop()
    try:
        qids = []
        for raw in messages:  # one after the other: each arrives while the server is down
            qids.append(route.server.send(SENDER, [ACCOUNT], raw))
            if keeps_delivering:
                route.server.wait_queue_empty(timeout=60)
            else:
                route.server.wait_deferred(qids, timeout=DEFER_TIMEOUT)
        for qid in qids:
            statuses = route.server.statuses(qid, since=route.mark)
            wanted = ("sent", "2.") if keeps_delivering else ("deferred", "4.")
            assert statuses and all(s["status"] == wanted[0] and s["dsn"].startswith(
                wanted[1]) for s in statuses), statuses
            for s in statuses:
                says_little(s["text"], route)
        if route.lmtp is not None:
            assert route.lmtp.poll() is None, "the LMTP server rides out the outage"
    finally:
        deployment[fault].start()
    # the MTA's queue runner, sooner than its 600 s back-off: every deferred message tried
    # again while nothing is in flight, until the queue is empty
    back, flushed = time.monotonic(), [0.0]

    def retried() -> bool:
        queue = route.server.queue()
        if not queue:
            return True
        if all(e.get("queue_name") == "deferred" for e in queue) and (
                time.monotonic() - flushed[0] > 2):
            route.server.flush()
            flushed[0] = time.monotonic()
        return False

    until(retried, timeout=RESUMED + 60, what="every deferred message stored",
          explain=lambda: route.server.log_since(route.mark)[-4000:] + (
              route.lmtp_log.read_text(errors="replace")[-4000:] if route.lmtp else ""))
    resumed = time.monotonic() - back
    record_property("stored_after_return_s", round(resumed, 1))
    assert resumed < RESUMED, f"stored {resumed:.1f} s after the server's return"
    added = ADDED_HEADERS["pipe" if route.path == "pipe" else "lmtp"]
    stored = sorted(lf(without_added(raw, added)) for raw in route.stored(tmp_path / "r"))
    assert stored == sorted([lf(before), *(lf(m) for m in messages)])  # each exactly once
    log = route.server.log_since(route.mark)
    assert "status=bounced" not in log and "Traceback" not in log, log
    if route.lmtp is not None:
        assert route.lmtp.poll() is None
        assert "Traceback" not in route.lmtp_log.read_text(errors="replace")


def make_before(route: ScaleOutRoute) -> bytes:
    """A message delivered while every server answers: the path works to begin with (and
    the key pool of a running LMTP server holds a key when the key cluster goes)."""
    raw = (f"From: {SENDER}\r\nTo: {ACCOUNT}\r\nSubject: before the outage\r\n"
           f"Message-ID: <before-{secrets.token_hex(4)}@scaleout.test>\r\n\r\nhello\r\n"
           ).encode()
    qid = route.server.send(SENDER, [ACCOUNT], raw)
    wait_for(lambda: any(s["status"] == "sent" for s in route.server.statuses(
        qid, since=route.mark)), what="the first message delivered", timeout=120,
        log_paths=route.server.log_paths, interval=0.2)
    return raw
