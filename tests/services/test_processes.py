"""The relay and a worker as a user runs them (``letterlog processes start``, supervisord) on
real PostgreSQL, Kafka and HBase: they project what is delivered; ``letterlog lag`` says so;
each serves Prometheus metrics on the port ``processes status`` names and logs progress
lines; a worker killed with SIGKILL is restarted by supervisord and, with static group
membership, consumes again well before the session timeout; ``processes restart`` (SIGTERM)
likewise. Times are printed (``-s``)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.embedded import Letterlog
from adapters.streaming.worker import kafka_lag
from tests.factories import scale_out_env, until
from tests.services.support import drop_tables
from tests.stream_support import story

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[2]
SESSION_TIMEOUT = 45  # long on purpose: a restart that waited it out would show


def letterlog(env: dict[str, str], *args: str, codes: tuple[int, ...] = (0,)) -> list[Any]:
    p = subprocess.run([sys.executable, "-m", "adapters.cli", *args, "--json"], cwd=ROOT,
                       env={**os.environ, **env}, capture_output=True, timeout=300)
    assert p.returncode in codes, p.stderr.decode()
    return [json.loads(line) for line in p.stdout.decode().splitlines() if line.strip()]


class Stack:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        settings = {k.removeprefix("LETTERLOG_").lower(): v for k, v in env.items()
                    if k.startswith("LETTERLOG_") and not k.startswith("LETTERLOG_STREAM_")
                    and k != "LETTERLOG_METRICS_PORT"}
        self.store = Letterlog.open(**{**settings, "table_store": "embedded"})

    def status(self, *, starting: bool = False) -> dict[str, dict[str, Any]]:
        """Each process's status; ``starting``: one may not be RUNNING yet (exit 3)."""
        codes = (0, 3) if starting else (0,)
        return {r["name"]: r for r in letterlog(self.env, "processes", "status", codes=codes)}

    def lag(self) -> dict[str, Any]:
        return kafka_lag(self.env["LETTERLOG_KAFKA_BOOTSTRAP"], self.env["LETTERLOG_KAFKA_TOPIC"],
                         self.env["LETTERLOG_STREAM_GROUP"])

    def caught_up(self) -> bool:
        head = self.store.max_position()
        lag = self.lag()
        ends = sum(p["end"] for p in lag["partitions"].values())
        return bool(lag["partitions"]) and ends >= head and lag["events"] == 0

    def log(self, name: str) -> str:
        path = Path(self.env["LETTERLOG_DATA"]) / "supervisor" / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_caught_up(self, what: str) -> float:
        t0 = time.monotonic()
        until(self.caught_up, timeout=240, what=what,
              explain=lambda: f"lag {self.lag()}\n{self.log('worker-0')[-3000:]}")
        return time.monotonic() - t0


@pytest.fixture
def stack(tmp_path: Path, pg_dsn: str, hbase_server: Any,
          kafka_server: Any) -> Iterator[Stack]:
    dsn = pg_dsn
    tag = secrets.token_hex(4)
    data = Path(f"/tmp/ll-proc-{tag}")  # short: supervisord's unix socket lives in it
    env = scale_out_env(data, dsn=dsn, hbase=hbase_server, kafka_bootstrap=kafka_server.bootstrap,
                        prefix=f"pr{tag}", topic=f"proc-{tag}", durability="normal",
                        stream_group=f"proc-{tag}", stream_batch="40", stream_within="0.2",
                        stream_commit_interval="0.5",
                        stream_session_timeout=str(SESSION_TIMEOUT))
    s = Stack(env)
    try:
        yield s
    finally:
        subprocess.run([sys.executable, "-m", "adapters.cli", "processes", "stop"], cwd=ROOT,
                       env={**os.environ, **env}, capture_output=True, timeout=300)
        s.store.close()
        try:
            drop_tables(hbase_server, f"pr{tag}")
        finally:
            shutil.rmtree(data, ignore_errors=True)


def metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def test_relay_and_worker_under_supervision_restart_fast_and_report_lag(stack):
    times: dict[str, float] = {}
    story(stack.store, rounds=1)
    t0 = time.monotonic()
    started = {r["name"]: r for r in letterlog(stack.env, "processes", "start", "--workers", "1",
                                               "--no-purger")}
    times["start_to_running_s"] = time.monotonic() - t0
    assert {n: r["state"] for n, r in started.items()} == {"relay": "RUNNING",
                                                            "worker-0": "RUNNING"}
    times["start_to_caught_up_s"] = stack.wait_caught_up("the first catch-up") + times[
        "start_to_running_s"]

    [report] = letterlog(stack.env, "lag")
    assert report["verdict"].startswith("caught up"), report
    assert report["relay"]["position"] == report["log_head"] == stack.store.max_position()
    assert set(report["projections"]) >= {"messages", "counters"}

    # metrics from both, on the ports `status` names; progress lines in the logs
    until(lambda: all(r["metrics_port"] for r in stack.status().values()), timeout=60,
          what="both metrics ports")
    status = stack.status()
    assert "letterlog_relay_position" in metrics(status["relay"]["metrics_port"])
    assert "letterlog_stream_events_applied_total" in metrics(
        status["worker-0"]["metrics_port"])
    until(lambda: "progress" in stack.log("relay") and "progress" in stack.log("worker-0"),
          timeout=60, what="progress lines")

    # SIGKILL: supervisord restarts the worker, which resumes its partitions at once
    killed = status["worker-0"]["pid"]
    os.kill(killed, signal.SIGKILL)
    t0 = time.monotonic()
    story(stack.store, rounds=1, first=1)
    stack.wait_caught_up("the restarted worker to consume")
    times["sigkill_to_consuming_s"] = time.monotonic() - t0
    # a restarted worker consumes before supervisord counts it RUNNING (alive startsecs)
    until(lambda: stack.status(starting=True)["worker-0"]["state"] == "RUNNING", timeout=60,
          what="the restarted worker to count as running")
    assert stack.status()["worker-0"]["pid"] != killed
    assert times["sigkill_to_consuming_s"] < SESSION_TIMEOUT

    # SIGTERM through `processes restart`: the same
    t0 = time.monotonic()
    [done] = letterlog(stack.env, "processes", "restart", "worker-0")
    story(stack.store, rounds=1, first=2)
    stack.wait_caught_up("the worker restarted by SIGTERM to consume")
    times["restart_to_consuming_s"] = time.monotonic() - t0
    assert times["restart_to_consuming_s"] < SESSION_TIMEOUT
    print(f"\nprocesses: { {k: round(v, 1) for k, v in times.items()} }")


def free_ports(count: int) -> int:
    """A base port N such that N .. N+count-1 are free on 127.0.0.1 now, below the kernel's
    ephemeral range: a port in it can be taken at any moment as the local end of another
    test's connection (a CI run lost a worker's metrics port 40183 that way)."""
    import random
    import socket

    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(10_000, min(low, 60_000) - count)
        socks = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no free range of ports")


@pytest.mark.slow
def test_a_fixed_metrics_port_gives_each_process_its_own(stack):
    """Issue 42, item 12: ``LETTERLOG_METRICS_PORT=N`` is the relay's port, the dispatcher's
    N+1 and worker i's N+2+i (docs/operations.md); before, every process was given N and
    the relay and the workers crash-looped on "Address already in use"."""
    base = free_ports(4)
    env = {**stack.env, "LETTERLOG_METRICS_PORT": str(base)}
    story(stack.store, rounds=1)
    started = {r["name"]: r for r in letterlog(env, "processes", "start", "--workers", "2",
                                               "--no-purger", "--dispatcher")}
    assert {n: r["state"] for n, r in started.items()} == dict.fromkeys(
        ("relay", "dispatcher", "worker-0", "worker-1"), "RUNNING"), started
    expected = {"relay": base, "dispatcher": base + 1, "worker-0": base + 2,
                "worker-1": base + 3}
    until(lambda: {n: r["metrics_port"] for n, r in stack.status(starting=True).items()}
          == expected,
          timeout=60, what="each process on its own metrics port",
          explain=lambda: f"{stack.status(starting=True)}\n{stack.log('worker-1')[-2000:]}")
    pids = {n: r["pid"] for n, r in stack.status().items()}
    stack.wait_caught_up("the workers on their own ports")
    assert "letterlog_relay_position" in metrics(base)
    workers = [metrics(base + 2), metrics(base + 3)]  # both serve (a worker's own gauges
    assert all("process_cpu_seconds_total" in m for m in workers)  # come with its records)
    assert any("letterlog_stream_events_applied_total" in m for m in workers)
    assert {n: r["pid"] for n, r in stack.status().items()} == pids  # none restarted
    for name in expected:
        assert "Address already in use" not in stack.log(name), stack.log(name)[-2000:]
