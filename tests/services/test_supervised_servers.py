"""The dev servers under supervisord, as `make services` runs them: a Thrift1 gateway killed
with SIGKILL comes back on its port and answers a real round trip; the master, the Thrift2
gateway and Kafka keep their processes; the gateway's log keeps what it had; `status` and
`restart NAME` work from another process; stopping keeps the logs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.operations.supervision import Supervisor
from devtools.devservers.supervised import SupervisedServices, status
from tests.services.servers import in_ci

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[2]


def devservers(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "devtools.devservers", *args, "--root",
                           str(root)], cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def supervised() -> Iterator[SupervisedServices]:
    root = Path(tempfile.mkdtemp(prefix="ll-sup-"))  # short: it holds a unix socket
    services = SupervisedServices(["hbase", "kafka"], root)
    try:
        services.start()
    except Exception as error:  # noqa: BLE001 - reported as the fixtures do
        services.stop()
        message = f"supervised servers did not start: {error}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    print(f"\nsupervised start-up: {services.startup_seconds}")
    try:
        yield services
    finally:
        services.stop()
        shutil.rmtree(root, ignore_errors=True)


def pids(root: Path) -> dict[str, int]:
    return {row["name"]: row["pid"] for row in status(root)}


def test_a_killed_thrift1_gateway_comes_back_and_nothing_else_moves(supervised):
    root = supervised.root
    hbase = supervised.servers["hbase"]
    before = pids(root)
    assert set(before) == {"hbase-master", "hbase-thrift", "hbase-thrift2", "kafka"}
    log = root / "hbase" / "logs" / "thrift.log"
    kept = log.read_bytes()
    t0 = time.monotonic()
    os.kill(before["hbase-thrift"], signal.SIGKILL)
    # comes back: a new process, its port open, a create/put/get/delete round trip through
    # Thrift1 and Thrift2 (the fixtures' readiness probe)
    deadline = time.monotonic() + 180
    while pids(root)["hbase-thrift"] in (before["hbase-thrift"], None):
        assert time.monotonic() < deadline, status(root)
        time.sleep(0.2)
    hbase.await_gateways(timeout=180)
    seconds = time.monotonic() - t0
    print(f"\nThrift1 gateway: SIGKILL to a passing probe in {seconds:.1f} s")
    after = pids(root)
    assert after["hbase-thrift"] != before["hbase-thrift"]
    assert {k: v for k, v in after.items() if k != "hbase-thrift"} == {
        k: v for k, v in before.items() if k != "hbase-thrift"}
    # supervisord counts it started once alive `startsecs`, which can be after the probe
    assert all(row["state"] == "RUNNING" for row in Supervisor(root).await_running(60))
    assert log.read_bytes().startswith(kept) and len(log.read_bytes()) > len(kept)
    assert "exited: hbase-thrift (terminated by SIGKILL" in (
        root / "supervisord.log").read_text()


def test_status_and_restart_of_one_server_from_the_command_line(supervised):
    root = supervised.root
    Supervisor(root).await_running(60)  # whatever an earlier test restarted counts as started
    rows = [json.loads(line) for line in devservers(root, "status", "--json").stdout.splitlines()]
    assert {r["name"]: (r["state"], r["port"]) for r in rows}["hbase-thrift2"] == (
        "RUNNING", supervised.servers["hbase"].thrift2_port)
    assert all(r["uptime"] > 0 and r["pid"] for r in rows)
    before = pids(root)
    done = devservers(root, "restart", "hbase-thrift2")
    assert done.returncode == 0, done.stderr
    print(f"\n{done.stdout.strip()}")
    after = pids(root)
    assert after["hbase-thrift2"] != before["hbase-thrift2"]
    assert after["hbase-master"] == before["hbase-master"] and after["kafka"] == before["kafka"]
    supervised.servers["hbase"].await_gateways(timeout=180)
    unknown = devservers(root, "restart", "hbase-thirft")
    assert unknown.returncode == 1 and "BAD_NAME" in unknown.stderr
    assert "Traceback" not in unknown.stderr
