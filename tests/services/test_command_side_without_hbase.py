"""The command side needs only the log (PostgreSQL) and the payload store: with
``LETTERLOG_TABLE_STORE=hbase`` and the Thrift gateway frozen (SIGSTOP: connections hang, the
worst case) or gone (nothing listens), ``letterlog deliver`` and ``letterlog import`` are
acknowledged, no worker and no relay running; once the gateway is back, the relay and a worker
bring HBase up to date and ``letterlog list`` shows every message."""

from __future__ import annotations

import json
import mailbox
import os
import secrets
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.bootstrap.scaleout import relay as make_relay
from adapters.embedded import Letterlog
from adapters.streaming.worker import kafka_lag
from devtools.devservers._common import free_port
from tests.factories import make_mail, scale_out_env, until
from tests.services.support import Worker, drop_tables

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "ada@example.org"


def cli(env: dict[str, str], *args: str, timeout: float = 120) -> tuple[list[Any], float]:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "adapters.cli", "--json", *args], cwd=ROOT,
                       env={**os.environ, **env}, capture_output=True, timeout=timeout)
    seconds = time.monotonic() - t0
    assert p.returncode == 0, p.stderr.decode()
    return [json.loads(line) for line in p.stdout.decode().splitlines() if line.strip()], seconds


@pytest.fixture
def world(tmp_path: Path, pg_dsn: str, hbase_server: Any,
          kafka_server: Any) -> Iterator[dict[str, str]]:
    dsn = pg_dsn
    tag = secrets.token_hex(4)
    env = scale_out_env(tmp_path / "data", dsn=dsn, hbase=hbase_server,
                        kafka_bootstrap=kafka_server.bootstrap, prefix=f"cmd{tag}",
                        topic=f"cmd-{tag}", durability="normal", stream_group=f"cmd-{tag}",
                        stream_session_timeout="6")
    try:
        yield env
    finally:
        drop_tables(hbase_server, env["LETTERLOG_HBASE_TABLE_PREFIX"])


def deliver_while_down(env: dict[str, str], tmp_path: Path) -> dict[str, float]:
    """Deliveries and an import through the CLI, then single deliveries in process: all
    acknowledged, timed."""
    files = []
    for i in range(3):
        f = tmp_path / f"m{i}.eml"
        f.write_bytes(make_mail(f"while HBase is down {i}", message_id=f"<down{i}@x>"))
        files.append(str(f))
    cli(env, "init")  # only init makes a store
    delivered, cli_seconds = cli(env, "deliver", "--account", ACCOUNT, *files)
    assert len(delivered) == 3 and all(d["uid"] for d in delivered)
    box = mailbox.mbox(tmp_path / "in.mbox")
    for i in range(20):
        box.add(make_mail(f"imported {i}", message_id=f"<imp{i}@x>"))
    box.flush()
    box.close()
    [report], import_seconds = cli(env, "import", "mbox", str(tmp_path / "in.mbox"),
                                   "--account", ACCOUNT)
    assert report["imported"] == 20
    settings = {k.removeprefix("LETTERLOG_").lower(): v for k, v in env.items()
                if k.startswith("LETTERLOG_") and not k.startswith("LETTERLOG_STREAM_")}
    t0 = time.monotonic()
    with Letterlog.open(**settings) as store:
        opened = time.monotonic() - t0
        latencies = []
        for i in range(20):
            t = time.monotonic()
            store.deliver(account=ACCOUNT, raw=make_mail(f"single {i}", message_id=f"<s{i}@x>"))
            latencies.append(time.monotonic() - t)
        assert store.max_position() > 0
    return {"cli_deliver_3_s": round(cli_seconds, 2), "cli_import_20_s": round(import_seconds, 2),
            "open_s": round(opened, 3),
            "deliver_median_ms": round(statistics.median(latencies) * 1000, 2),
            "deliver_max_ms": round(max(latencies) * 1000, 2)}


def test_deliveries_are_acknowledged_with_the_gateway_frozen_and_hbase_catches_up(
        world, tmp_path, hbase_server):
    gateway = hbase_server._thrift.pid
    os.kill(gateway, signal.SIGSTOP)
    try:
        timings = deliver_while_down(world, tmp_path)
    finally:
        os.kill(gateway, signal.SIGCONT)
    print(f"\nThrift1 gateway frozen: {timings}")
    # the read side catches up: relay -> Kafka -> a worker -> HBase
    settings = {k.removeprefix("LETTERLOG_").lower(): v for k, v in world.items()
                if k.startswith("LETTERLOG_") and not k.startswith("LETTERLOG_STREAM_")}
    with Letterlog.open(**{**settings, "table_store": "embedded",
                           "data": str(tmp_path / "relay")}) as store:
        head = store.max_position()
        with make_relay(store.settings, log=store, partitions=2) as relay:
            assert relay.run_once() == head
    worker = Worker({**world, "LETTERLOG_DATA": str(tmp_path / "worker")},
                    tmp_path / "worker.log").start()
    try:
        until(lambda: kafka_lag(world["LETTERLOG_KAFKA_BOOTSTRAP"],
                                world["LETTERLOG_KAFKA_TOPIC"],
                                world["LETTERLOG_STREAM_GROUP"])["events"] == 0
              and worker.alive(), timeout=300, what="the worker to catch up",
              explain=worker.tail)
    finally:
        worker.stop()
    listed, _ = cli(world, "list", ACCOUNT, "--limit", "100")
    assert len(listed) == 3 + 20 + 20


def test_deliveries_are_acknowledged_with_nothing_listening_on_the_gateway_port(
        world, tmp_path):
    env = {**world, "LETTERLOG_HBASE_PORT": str(free_port())}
    timings = deliver_while_down(env, tmp_path)
    print(f"\nnothing on the gateway port: {timings}")
