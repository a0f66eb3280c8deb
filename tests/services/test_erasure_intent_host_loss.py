"""A host that vanishes while it holds an erasure intent (ADR 0084): no FIN, no RST, its link
simply gone. The holder runs in a network namespace of its own, connected to a PostgreSQL
that listens beyond loopback through a veth pair; the namespace's end of the pair is then
set down. The server's TCP keepalives on the holding session (``KEEPALIVE_*``) end the
session, its advisory lock with it, within ``RELEASE_BOUND`` seconds of the holder's last
packet; then another host takes the intent over (``abandoned``). Needs root (``ip netns``).
Measured here: 22.4 s from the link going down after 3 s idle (10 s idle, then 3 probes
5 s apart, from the last packet)."""

from __future__ import annotations

import contextlib
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from adapters.lifecycle.sharedintents import LOCK_CLASS, RELEASE_BOUND, SharedIntents
from devtools.devservers.postgres import PostgresServer
from tests.factories import until
from tests.services.servers import in_ci
from tests.spark.netns import can_make_namespaces

pytestmark = [pytest.mark.services, pytest.mark.slow]

HOLD = """
import sys, time
from adapters.lifecycle.sharedintents import SharedIntents
intent = SharedIntents(sys.argv[1], sys.argv[2]).begin("erase", 0, messages=[])
print(intent.id, flush=True)
time.sleep(600)
"""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def far_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A PostgreSQL reachable from a network namespace (its DSN from there, and from here)."""
    reason = can_make_namespaces()
    if reason is not None:
        if in_ci():
            pytest.fail(f"the host-loss test cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    tag = secrets.token_hex(3)
    octet = int(tag[:2], 16)
    ns, here_if, there_if = f"llint-{tag}", f"lli{tag}", f"llj{tag}"
    here, there = f"10.234.{octet}.1", f"10.234.{octet}.2"
    server = PostgresServer()  # a workdir of its own (the postgres account reads it)
    server.host = "0.0.0.0"  # noqa: S104 - beyond loopback: the namespace's side reaches it
    try:
        server.start()
        local = f"postgresql://{server.user}:{server.password}@127.0.0.1:{server.port}/{server.dbname}"
        admin = (f"postgresql://postgres:{server.admin_password}@127.0.0.1:{server.port}/"
                 "postgres")
        with psycopg.connect(admin, autocommit=True) as conn:
            (hba,) = conn.execute("SHOW hba_file").fetchone()  # type: ignore[misc]
            with open(hba, "a") as f:
                f.write(f"host all all {there}/32 scram-sha-256\n")
            conn.execute("SELECT pg_reload_conf()")
        _ip("netns", "add", ns)
        _ip("link", "add", here_if, "type", "veth", "peer", "name", there_if)
        _ip("link", "set", there_if, "netns", ns)
        _ip("addr", "add", f"{here}/30", "dev", here_if)
        _ip("link", "set", here_if, "up")
        _ip("netns", "exec", ns, "ip", "addr", "add", f"{there}/30", "dev", there_if)
        _ip("netns", "exec", ns, "ip", "link", "set", there_if, "up")
        yield {"ns": ns, "if": there_if, "local": local, "data": tmp_path_factory.mktemp("h"),
               "remote": f"postgresql://{server.user}:{server.password}@{here}:"
                         f"{server.port}/{server.dbname}"}
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("netns", "del", ns)
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("link", "del", here_if)
        server.stop()


def held(dsn: str, intent_id: int) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return bool(conn.execute(
            "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND "
            "objid = %s AND objsubid = 2 AND granted", (LOCK_CLASS, intent_id)).fetchone())


@pytest.mark.wallclock
def test_a_vanished_hosts_intent_is_taken_over_within_the_keepalive_bound(
        far_host: dict[str, Any]) -> None:
    holder = subprocess.Popen(
        ["ip", "netns", "exec", far_host["ns"], sys.executable, "-c", HOLD,
         far_host["remote"], str(far_host["data"])], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None
        intent_id = int(holder.stdout.readline())
        assert held(far_host["local"], intent_id)
        here = SharedIntents(far_host["local"], far_host["data"])
        assert here.abandoned() == []  # a live holder's: not taken
        assert [r["running"] for r in here.listing()] == [True]
        gone = time.monotonic()
        _ip("netns", "exec", far_host["ns"], "ip", "link", "set", far_host["if"], "down")
        until(lambda: not held(far_host["local"], intent_id), timeout=RELEASE_BOUND + 30,
              what="the vanished host's session to end")
        assert time.monotonic() - gone <= RELEASE_BOUND + 2  # 25 s from its last packet
        assert holder.poll() is None  # the holder itself never let go: its host "vanished"
        [taken] = here.abandoned()
        assert taken.kind == "erase"
        taken.finish()
        assert not here.any()
    finally:
        holder.kill()
        holder.wait()
