"""The dev servers keep their data (`python -m devtools.devservers`, as an operator runs it).

`up --detach`, mail delivered through the scale-out path (PostgreSQL log, the relay, Kafka, a
worker, HBase), `down`, `up` again: the same services.env, no second initdb or Kafka format,
every listing and `verify --all` identical to before, and the relay's position and the
consumer group's offsets kept (`lag` says caught up with no process running). `down` stops
each server cleanly (PostgreSQL's control file says shut down, Kafka wrote its clean-shutdown
marker, HBase's master flushed and archived every write-ahead log) and keeps services.env;
so does a foreground `up` stopped with SIGTERM. A second `up` on live servers is refused and
touches nothing; a kept port held by another process is reported before anything starts;
`reset` refuses without --yes when it cannot ask, and with it stops the servers and deletes
the directory, saying what it deletes.

The servers run in a root of this test's own: never the session's servers, never another
checkout's. Times are printed (``-s``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from adapters.embedded import Letterlog
from adapters.operations.supervision import Supervisor
from devtools.devservers.supervised import status
from tests.factories import until
from tests.services.servers import in_ci
from tests.stream_support import PEOPLE, story

pytestmark = pytest.mark.services

CHECKOUT = Path(__file__).resolve().parents[2]
SERVERS = "pg,hbase,kafka"
DOWN_BOUND = 120.0  # seconds; measured 14 s for these three on this machine


def devservers(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "devtools.devservers", *args, "--root",
                           str(root)], cwd=CHECKOUT, capture_output=True, text=True,
                          timeout=900, stdin=subprocess.DEVNULL)


def letterlog(env: dict[str, str], *args: str, codes: tuple[int, ...] = (0,)) -> list[Any]:
    done = subprocess.run([sys.executable, "-m", "adapters.cli", "--json", *args], cwd=CHECKOUT,
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    assert done.returncode in codes, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def read_env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines()
                if line and not line.startswith("#"))


@pytest.fixture
def root() -> Iterator[Path]:
    # not under pytest's tmp_path: its parents are 0700, and PostgreSQL runs as its own
    # account when the tests run as root
    path = Path(tempfile.mkdtemp(prefix="ll-keep-"))
    os.chmod(path, 0o711)
    try:
        yield path
    finally:
        if Supervisor(path).alive():  # a failed test: stop them, ours alone
            devservers(path, "down")
        shutil.rmtree(path, ignore_errors=True)


def stopped_cleanly(root: Path) -> None:
    """What each server leaves behind when it shut down in order."""
    bindir = next(Path("/usr/lib/postgresql").glob("*/bin"))
    control = subprocess.run([str(bindir / "pg_controldata"), str(root / "pg" / "data")],
                             capture_output=True, text=True, check=True,
                             env={**os.environ, "LC_ALL": "C"}).stdout
    assert "Database cluster state:               shut down\n" in control, control
    assert (root / "kafka" / "data" / ".kafka_cleanshutdown").exists()
    hbase = root / "hbase" / "data" / "hbase"
    assert [p for p in (hbase / "WALs").rglob("*") if p.is_file()] == []  # all archived
    # the worker's cells were flushed into store files of the messages table
    assert [p for p in (hbase / "data" / "default" / "keep_messages").glob("*/*/*")
            if p.is_file() and p.parent.name not in ("recovered.edits", ".tmp")]


def test_down_and_up_keep_every_server_s_data(root: Path, tmp_path: Path) -> None:
    times: dict[str, float] = {}
    t0 = time.monotonic()
    up = devservers(root, "up", "--detach", "--only", SERVERS)
    if up.returncode != 0:
        message = f"the dev servers did not start:\n{up.stdout}\n{up.stderr}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    times["first up"] = time.monotonic() - t0
    assert up.stdout.count("starting on new data") == 3, up.stdout
    env_file = root / "services.env"
    env_text = env_file.read_text()
    env = {**read_env(env_file), "LETTERLOG_DATA": str(tmp_path / "data"),
           "LETTERLOG_HBASE_TABLE_PREFIX": "keep", "LETTERLOG_KAFKA_TOPIC": "keep",
           "LETTERLOG_STREAM_GROUP": "keep", "LETTERLOG_DURABILITY": "normal",
           "LETTERLOG_STREAM_WITHIN": "0.2", "LETTERLOG_STREAM_COMMIT_INTERVAL": "0.5"}

    # deliver through the scale-out path: the log in PostgreSQL; relay -> Kafka -> worker ->
    # HBase
    settings = {k.removeprefix("LETTERLOG_").lower(): v for k, v in env.items()
                if k.startswith("LETTERLOG_") and not k.startswith("LETTERLOG_STREAM_")}
    with Letterlog.open(**{**settings, "table_store": "embedded"}) as store:
        story(store, rounds=2)
        head = store.max_position()
    letterlog(env, "processes", "start", "--workers", "1", "--no-purger")
    try:
        until(lambda: letterlog(env, "lag", codes=(0, 1, 3))[0]["verdict"].startswith(
            "caught up"), timeout=300, what="the worker to catch up")
    finally:
        letterlog(env, "processes", "stop")
    verified = letterlog(env, "verify", "--all")
    assert verified and all(r["identical"] for r in verified), verified
    assert {r["table"]: r["rows"] for r in verified}["messages"] > 0
    listings = {p: letterlog(env, "list", p) for p in PEOPLE}
    assert all(listings.values())

    t0 = time.monotonic()
    down = devservers(root, "down")
    times["down"] = time.monotonic() - t0
    assert down.returncode == 0, down.stderr
    assert "hbase-master stopped in" in down.stdout and "(orderly stop)" in down.stdout
    assert times["down"] < DOWN_BOUND
    assert not Supervisor(root).alive()
    assert env_file.read_text() == env_text
    stopped_cleanly(root)

    # a kept port held by another process: said before anything starts
    pg_port = urlparse(env["LETTERLOG_POSTGRES_DSN"]).port
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past TIME_WAIT
        holder.bind(("127.0.0.1", pg_port))
        holder.listen()
        clash = devservers(root, "up", "--detach", "--only", SERVERS)
    assert clash.returncode == 1
    assert f"port {pg_port} (postgres) is in use by another process" in clash.stderr
    assert "Traceback" not in clash.stderr and not Supervisor(root).alive()

    # up again, in the foreground as `make services` runs it: the same servers, the same data
    out = tmp_path / "up.out"
    t0 = time.monotonic()
    with open(out, "w") as sink:
        foreground = subprocess.Popen(
            [sys.executable, "-m", "devtools.devservers", "up", "--only", SERVERS, "--root",
             str(root)], cwd=CHECKOUT, stdout=sink, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
    try:
        until(lambda: "Ctrl-C stops them all" in out.read_text() or foreground.poll(),
              timeout=600, what="the second up", explain=out.read_text)
        assert foreground.poll() is None, out.read_text()
        times["second up"] = time.monotonic() - t0
        assert out.read_text().count("starting on the data kept from the last start") == 3
        assert env_file.read_text() == env_text
        assert (root / "pg" / "initdb.log").read_text().count("$ ") == 1
        assert (root / "kafka" / "logs" / "format.log").read_text().count("$ ") == 1

        assert letterlog(env, "verify", "--all") == verified
        assert {p: letterlog(env, "list", p) for p in PEOPLE} == listings
        [lag] = letterlog(env, "lag")  # the relay's position and the group's offsets kept
        assert lag["verdict"].startswith("caught up") and lag["log_head"] == head, lag

        # another `up` on the live servers: refused, nothing touched
        before = {row["name"]: row["pid"] for row in status(root)}
        again = devservers(root, "up", "--detach", "--only", "pg")
        assert again.returncode == 1 and "already run under" in again.stderr, again.stderr
        assert "Traceback" not in again.stderr
        assert {row["name"]: row["pid"] for row in status(root)} == before
    finally:
        t0 = time.monotonic()
        foreground.send_signal(signal.SIGTERM)
        code = foreground.wait(timeout=300)
        times["foreground stop"] = time.monotonic() - t0
    assert code == 0, out.read_text()
    assert "(orderly stop)" in out.read_text() and not Supervisor(root).alive()
    assert env_file.read_text() == env_text
    stopped_cleanly(root)

    # reset: not without --yes when it cannot ask; with it, stops them first, says what goes
    unconfirmed = devservers(root, "reset")
    assert unconfirmed.returncode == 2 and "--yes" in unconfirmed.stderr
    assert (root / "pg" / "data" / "PG_VERSION").exists()
    # ... and on servers a foreground `up` runs: that `up` sees them go and ends, status 0
    third = tmp_path / "third.out"
    with open(third, "w") as sink:
        foreground = subprocess.Popen(
            [sys.executable, "-m", "devtools.devservers", "up", "--only", SERVERS, "--root",
             str(root)], cwd=CHECKOUT, stdout=sink, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
    until(lambda: "Ctrl-C stops them all" in third.read_text() or foreground.poll(),
          timeout=600, what="the third up", explain=third.read_text)
    t0 = time.monotonic()
    reset = devservers(root, "reset", "--yes")
    times["reset"] = time.monotonic() - t0
    assert reset.returncode == 0, reset.stderr
    for line in ("PostgreSQL: the event log and the wrapped data keys",
                 "HBase: the read-model tables", "Kafka: the event topics",
                 "stopping the servers first", "hbase-master stopped in", f"deleted {root}"):
        assert line in reset.stdout, reset.stdout
    assert not root.exists()
    assert foreground.wait(timeout=60) == 0, third.read_text()
    assert "supervisord stopped" in third.read_text()
    print(f"\ndev servers: { {k: round(v, 1) for k, v in times.items()} }")


def test_another_installation_s_live_servers_are_never_touched(root: Path) -> None:
    """A root whose servers another installation started: `up`, `down` and `reset` from
    this one refuse, name that installation, and leave its supervisord running."""
    from adapters.operations.supervision import write_config

    (root / "servers.json").write_text(json.dumps({"installation": "/srv/other-checkout"}))
    write_config(root, [], autostart=False)
    supervisor = Supervisor(root)
    supervisor.launch()
    try:
        pid = supervisor.pid()
        for args, said in ((("up", "--detach", "--only", "pg"), "already run under"),
                           (("down",), "belong to another installation"),
                           (("reset", "--yes"), "belong to another installation")):
            done = devservers(root, *args)
            assert done.returncode == 1, (args, done.stdout, done.stderr)
            assert said in done.stderr and "/srv/other-checkout" in done.stderr, done.stderr
            assert "Traceback" not in done.stderr
            assert supervisor.alive() and supervisor.pid() == pid
        assert (root / "servers.json").exists()
    finally:
        supervisor.shutdown()
