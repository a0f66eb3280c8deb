"""Two application hosts, one mail store: nothing that matters lives on one host's disk.

Hosts A and B are network namespaces of their own (``tests/services/hosts.py``), each with an
empty data directory of its own, against the same PostgreSQL (the log and the key store),
Kafka and HBase, which listen on the bridge's address only. At once: Postfix on host A
delivers through pipe(8) to ``letterlog lda``; ``letterlog lmtp`` on host B takes mail over
LMTP; the embedded API delivers on both; all to the same accounts. Then every message is
listed, extracted byte-exact and erased from either host, and ``verify --all`` agrees.

Host loss: host A's processes are killed and its data directory deleted mid-run, as a dead
disk would; host B still reads and extracts every message A acknowledged, and a new host A'
with an empty directory serves them too.

Every ``letterlog`` here runs inside its host's namespace as the system user
``letterlog-mta`` (Postfix's pipe user), so each host's data directory is that user's.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import pwd
import secrets
import shutil
import smtplib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devtools.devservers import HBaseServer, KafkaServer, PostfixServer, PostgresServer
from devtools.devservers._common import port_open, terminate, wait_for
from devtools.devservers.dovecot import ensure_system_user
from devtools.devservers.keycluster import KeyClusterServer
from devtools.devservers.postfix import LDA_MACROS, SYSTEM_USER, grant_letterlog_to
from tests.erasure_support import every_file, files_holding_any_form
from tests.factories import make_mail, until
from tests.key_cluster_support import checkpoint, files_with, keks, server_files
from tests.services.hosts import ApplicationHosts, Host
from tests.services.servers import _unavailable

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "bob@example.org"
SECOND = "carol@example.org"
BIG = 200_000  # over the inline limit: the body is a payload of its own


# ------------------------------------------------------------------------------ the network


@pytest.fixture(scope="module")
def network() -> Iterator[ApplicationHosts]:
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("setpriv") is None:
        _unavailable("two application hosts need root, ip(8) and setpriv(1)")
    hosts = ApplicationHosts(("a", "b", "c"))
    try:
        hosts.start()
    except subprocess.CalledProcessError as error:
        _unavailable(f"network namespaces: {error.stderr!r}")
    try:
        yield hosts
    finally:
        hosts.stop()


@dataclass
class Servers:
    pg: PostgresServer
    keys: KeyClusterServer
    kafka: KafkaServer
    hbase: HBaseServer


@pytest.fixture(scope="module")
def servers(network: ApplicationHosts) -> Iterator[Servers]:
    """PostgreSQL (the log), the key cluster (a PostgreSQL of its own), Kafka and HBase of
    this deployment, on the bridge's address only."""
    ip = network.server_ip
    started: list[Any] = []
    try:
        for server in (PostgresServer(host=ip), KeyClusterServer(host=ip), KafkaServer(host=ip),
                       HBaseServer(thrift_host=ip)):
            server.start()
            started.append(server)
    except Exception as error:  # noqa: BLE001 - reported as the shared fixtures do
        for server in reversed(started):
            server.stop()
        _unavailable(f"servers on {ip}: {type(error).__name__}: {error}")
    try:
        yield Servers(*started)
    finally:
        for server in reversed(started):
            server.stop()


# ------------------------------------------------------------------------------ the hosts


class AppHost:
    """An application host: its namespace, its own data directory, the deployment's
    settings, and ``letterlog`` run there as ``letterlog-mta``."""

    def __init__(self, host: Host, data: Path, env: dict[str, str]) -> None:
        self.host, self.data, self.env = host, data, env
        mta = pwd.getpwnam(SYSTEM_USER)
        self._as = ["setpriv", f"--reuid={mta.pw_uid}", f"--regid={mta.pw_gid}",
                    "--clear-groups", "--"]
        data.mkdir(mode=0o700)
        os.chown(data, mta.pw_uid, mta.pw_gid)

    def argv(self, *args: str) -> list[str]:
        return [*self._as, sys.executable, "-m", "adapters.cli", "--data", str(self.data),
                *args]

    def environ(self) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT),
                "HOME": "/tmp", "LANG": "C.UTF-8", **self.env,
                "LETTERLOG_DATA": str(self.data)}

    def letterlog(self, *args: str, stdin: bytes | None = None,
                  codes: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[bytes]:
        p = self.host.run(self.argv(*args), input=stdin, capture_output=True, timeout=300,
                          cwd=str(ROOT), env=self.environ())
        assert p.returncode in codes, (self.host.name, args, p.returncode,
                                       p.stderr.decode(errors="replace")[-3000:])
        return p

    def json(self, *args: str, codes: tuple[int, ...] = (0,)) -> list[dict[str, Any]]:
        out = self.letterlog("--json", *args, codes=codes).stdout.decode()
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def listed(self, account: str) -> dict[str, dict[str, Any]]:
        return {m["message_id"]: m for m in self.json("list", account, "--limit", "10000")}

    def extract(self, message_id: str) -> bytes:
        return self.letterlog("extract", message_id).stdout

    def api_deliver(self, account: str, messages: list[bytes]) -> list[str]:
        """Each message delivered through the embedded API, in one process on this host;
        the ids it acknowledged."""
        script = (
            "import json, sys\n"
            "from adapters.embedded import Letterlog\n"
            "raws = json.load(sys.stdin)\n"
            "store = Letterlog.open()\n"
            "try:\n"
            "    for raw in raws:\n"
            "        d = store.deliver(account=sys.argv[1], raw=raw.encode('latin-1'))\n"
            "        print(d.message_id, flush=True)\n"
            "finally:\n"
            "    store.close()\n")
        p = self.host.run([*self._as, sys.executable, "-c", script, account],
                          input=json.dumps([m.decode("latin-1") for m in messages]).encode(),
                          capture_output=True, timeout=600, cwd=str(ROOT), env=self.environ())
        assert p.returncode == 0, p.stderr.decode(errors="replace")[-3000:]
        return p.stdout.decode().split()


@dataclass
class Deployment:
    network: ApplicationHosts
    servers: Servers
    env: dict[str, str]
    root: Path

    def host(self, name: str, directory: str | None = None) -> AppHost:
        return AppHost(self.network[name], self.root / (directory or name), self.env)

    def on_servers_host(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        """``letterlog --json ARGS`` on the servers' host (outside the namespaces), where
        HBase's own tools run: its data directory ``ops``, made on first use."""
        env = {**os.environ, **self.env, "LETTERLOG_DATA": str(self.root / "ops"),
               "LETTERLOG_HBASE_COMPACTOR": self.servers.hbase.compactor_command(),
               "LETTERLOG_HBASE_THRIFT2_PORT": str(self.servers.hbase.thrift2_port),
               "LETTERLOG_ERASE_COMPLETE_WAIT_SECONDS": "300"}
        for argv in (["init"], ["--json", *args]):
            if argv == ["init"] and (self.root / "ops").exists():
                continue
            p = subprocess.run([sys.executable, "-m", "adapters.cli", *argv], cwd=str(ROOT),
                               env=env, capture_output=True, timeout=900)
            assert p.returncode == 0, (argv, p.returncode,
                                       p.stderr.decode(errors="replace")[-3000:])
        return p


@pytest.fixture
def deployment(network: ApplicationHosts, servers: Servers) -> Iterator[Deployment]:
    ensure_system_user(SYSTEM_USER)
    grant_letterlog_to(SYSTEM_USER)
    tag = secrets.token_hex(3)
    root = Path(f"/tmp/llmh-{tag}")  # short: the stream processes' sockets live in it
    root.mkdir(mode=0o711)
    ip = network.server_ip
    env = {"LETTERLOG_EVENT_STORE": "postgres", "LETTERLOG_POSTGRES_DSN": servers.pg.dsn,
           "LETTERLOG_KEY_STORE_DSN": servers.keys.dsn,
           "LETTERLOG_TABLE_STORE": "hbase", "LETTERLOG_HBASE_HOST": ip,
           "LETTERLOG_HBASE_PORT": str(servers.hbase.thrift_port),
           "LETTERLOG_HBASE_TABLE_PREFIX": f"mh{tag}",
           "LETTERLOG_KAFKA_BOOTSTRAP": servers.kafka.bootstrap,
           "LETTERLOG_KAFKA_TOPIC": f"mh-{tag}", "LETTERLOG_STREAM_GROUP": f"mh-{tag}",
           "LETTERLOG_STREAM_WITHIN": "0.2"}
    d = Deployment(network, servers, env, root)
    stream = d.host("c", "stream")  # the relay and a worker run on a third host
    try:
        stream.letterlog("processes", "start", "--workers", "1")
        yield d
    finally:
        stream.letterlog("processes", "stop", codes=(0, 1, 2, 3))
        for name in ("a", "b"):
            network.kill_processes(name)
        shutil.rmtree(root, ignore_errors=True)


def caught_up(host: AppHost) -> bool:
    """The read side has every event; none set aside (a worker that cannot open an event,
    its key on another host's disk, sets it aside as a dead letter)."""
    [lag] = host.json("lag", codes=(0, 3))  # 3: behind, which the caller waits out
    assert lag["dead_letters"] == 0, lag["verdict"]
    return str(lag["verdict"]).startswith("caught up")


class LmtpOn:
    """``letterlog lmtp`` on ``host``'s own address (other hosts reach it over the bridge)."""

    def __init__(self, host: AppHost) -> None:
        self.address = (host.host.ip, 2424)
        self.log = host.data.parent / f"lmtp-{host.host.name}.log"
        with open(self.log, "wb") as out:
            self.proc = host.host.popen(host.argv("lmtp", "--listen",
                                                  f"{self.address[0]}:{self.address[1]}"),
                                        stdout=out, stderr=subprocess.STDOUT, cwd=str(ROOT),
                                        env=host.environ(), start_new_session=True)
        wait_for(lambda: port_open(*self.address), what="letterlog lmtp on host B",
                 timeout=120, log_paths=[self.log], procs=[self.proc])

    def deliver(self, account: str, raw: bytes) -> None:
        with smtplib.LMTP(*self.address, timeout=120) as lmtp:
            refused = lmtp.sendmail("ada@example.net", [account], raw)
        assert not refused, refused

    def stop(self) -> None:
        terminate(self.proc)


def postfix_on(host: AppHost) -> PostfixServer:
    """A real Postfix on ``host`` (its smtpd on the host's address), delivering through
    pipe(8) to ``letterlog lda`` there, the deployment's settings in its environment."""
    server = PostfixServer(host=host.host.ip, netns=host.host.netns)
    server.start()
    environment = [f"{k}={v}" for k, v in host.environ().items() if k != "HOME"]
    server.use_pipe(host.data, argv=["/usr/bin/env", *environment, sys.executable, "-m",
                                     "adapters.cli", f"--data={host.data}", "lda",
                                     *LDA_MACROS])
    return server


def mail(tag: str, i: int, *, big: bool = False) -> bytes:
    lines = BIG // 40 if big else 1
    body = "".join(f"{tag} {i}, line {n} of the body\r\n" for n in range(lines))
    return make_mail(f"{tag} {i}", body=body, message_id=f"<{tag}-{i}@multihost.test>")


# ------------------------------------------------------------------------------ the stories


@pytest.mark.timeout(1800)  # 70 deliveries on 2 cores, then a major compaction
def test_two_hosts_deliver_to_the_same_accounts_and_either_serves_every_message(deployment):
    a, b = deployment.host("a"), deployment.host("b")
    for h in (a, b):
        h.letterlog("init")
    postfix = postfix_on(a)
    lmtp = LmtpOn(b)
    try:
        batches = {
            "api-a": [mail("api-a", i, big=i % 5 == 0) for i in range(20)],
            "api-b": [mail("api-b", i, big=i % 5 == 1) for i in range(20)],
            "lmtp-b": [mail("lmtp-b", i, big=i % 5 == 2) for i in range(15)],
            "postfix-a": [mail("postfix-a", i, big=i % 5 == 3) for i in range(15)],
        }
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            jobs = [pool.submit(a.api_deliver, ACCOUNT, batches["api-a"]),
                    pool.submit(b.api_deliver, ACCOUNT, batches["api-b"]),
                    pool.submit(lambda: [lmtp.deliver(ACCOUNT, m) for m in batches["lmtp-b"]]),
                    pool.submit(lambda: [postfix.send("ada@example.net", [ACCOUNT], m)
                                         for m in batches["postfix-a"]])]
            for job in jobs:
                job.result()
        postfix.wait_queue_empty(timeout=300)
    finally:
        lmtp.stop()
        postfix.stop()
    sent = {f"{tag} {i}": raw for tag, batch in batches.items() for i, raw in enumerate(batch)}
    until(lambda: caught_up(b), timeout=300, what="the stream caught up with both hosts")
    seen = {name: h.listed(ACCOUNT) for name, h in (("a", a), ("b", b))}
    assert seen["a"].keys() == seen["b"].keys()
    assert len(seen["a"]) == 70
    uids = sorted(m["uid"] for m in seen["a"].values())
    assert uids == list(range(uids[0], uids[0] + 70)), "UIDs unique and without gaps"
    # byte-exact from either host, whichever host delivered it (Postfix adds Received:)
    for message_id, listed in seen["a"].items():
        stored_a, stored_b = a.extract(message_id), b.extract(message_id)
        assert stored_a == stored_b
        raw = sent[listed["subject"]]
        assert stored_a.replace(b"\r\n", b"\n").endswith(raw.replace(b"\r\n", b"\n"))
    # erasable from either host: one erased on A, one on B; both gone everywhere
    doomed = sorted(seen["a"])[:2]
    keks_before = keks(deployment.servers.keys.dsn)
    for host, message_id in ((a, doomed[0]), (b, doomed[1])):
        # exit 3: erased (keys destroyed), finished by `erase complete` once the workers have
        # it and HBase is compacted
        host.letterlog("erase-message", message_id, codes=(0, 3))
    until(lambda: caught_up(a), timeout=300, what="the stream caught up with the erasures")
    # `erase complete` on a host with HBase's tools (the compactor): here, the servers' host
    done = deployment.on_servers_host("erase", "complete")
    scale = json.loads(done.stdout)["scale_out"]
    # both erasures' records (one row when neither had a payload of its own: they share it)
    assert scale["complete"] and scale["pending_cleared"] == scale["pending"] >= 1, scale
    for h in (a, b):  # and either host sees nothing owed any more
        [status] = h.json("erase", "status")
        assert status["scale_out"]["pending"] == [], status
    # no host's disk holds a byte of them (the hosts keep nothing of a message: ADR 0072-0074,
    # 0084), in any form (plain, base64, inside a compressed frame)
    markers = [sent[seen["a"][m]["subject"]].split(b"Message-ID: ")[1].split(b"\r\n")[0]
               for m in doomed]
    for root in (a.data, b.data, deployment.root / "stream", deployment.root / "ops"):
        assert files_holding_any_form(root, markers) == {}, root
    # nor any server's, but sealed: the log's PostgreSQL (heap, pg_wal), Kafka's segments, the
    # key cluster; HBase's live store files (its WALs and archive go by its own schedules,
    # docs/lifecycle.md); and no KEK the erasures rotated away is left in any file
    servers = deployment.servers
    for sql_server in (servers.pg, servers.keys):
        checkpoint(sql_server)
    for server_root in (Path(servers.pg.workdir), Path(servers.kafka.workdir),
                        Path(servers.keys.workdir)):
        assert files_holding_any_form(server_root, markers) == {}, server_root
    left = files_holding_any_form(Path(servers.hbase.workdir) / "data" / "hbase", markers)
    assert {f for f in left if not f.startswith(("WALs/", "oldWALs/", "archive/"))} == set()
    gone = [v for k, v in keks_before.items() if k not in keks(servers.keys.dsn)]
    assert gone, "the erasures rotated KEKs away"
    everywhere = [*server_files(servers.keys), *server_files(servers.pg),
                  *every_file(Path(servers.kafka.workdir)), *every_file(a.data),
                  *every_file(b.data)]
    assert files_with(everywhere, gone) == [], "an erased KEK is left in a file"
    for h in (a, b):
        assert not set(doomed) & h.listed(ACCOUNT).keys()
        for message_id in doomed:
            assert h.letterlog("extract", message_id, codes=(1, 2, 3, 4)).returncode != 0
    verified = [h.letterlog("verify", "--all").stdout for h in (a, b)]
    assert verified[0] == verified[1]


def test_a_host_that_loses_its_disk_loses_no_acknowledged_message(deployment):
    a, b = deployment.host("a"), deployment.host("b")
    for h in (a, b):
        h.letterlog("init")
    acknowledged = a.api_deliver(SECOND, [mail("lost-a", i, big=i % 2 == 0)
                                          for i in range(12)])
    # host A dies: its processes killed, its disk gone; host B goes on delivering
    deployment.network.kill_processes("a")
    shutil.rmtree(a.data)
    b.api_deliver(SECOND, [mail("after-a", i) for i in range(5)])
    until(lambda: caught_up(b), timeout=300, what="the stream caught up")
    on_b = b.listed(SECOND)
    assert set(acknowledged) <= on_b.keys()
    for message_id in acknowledged:
        assert b"lost-a" in b.extract(message_id)
    # a new host A' with an empty directory serves them too
    a2 = deployment.host("a", "a-new")
    a2.letterlog("init")
    assert a2.listed(SECOND).keys() == on_b.keys()
    for message_id in acknowledged:
        assert a2.extract(message_id) == b.extract(message_id)
