"""The event rules' dispatcher through an HBase outage, as a user runs it (``letterlog
processes start --dispatcher``: the relay, one worker and the dispatcher under supervisord,
on this session's PostgreSQL, Kafka and HBase): with HBase's Thrift gateways frozen
(SIGSTOP: calls hang, the worst case) the dispatcher keeps its pid (it neither exits nor is
restarted), says once that HBase is not answering and once that it answers again, and hands
over the rule events raised during the outage once HBase is back (ADR 0048, ADR 0070)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.factories import make_mail, scale_out_env, until
from tests.services.support import drop_tables
from tests.webhook_endpoint import Endpoint

pytestmark = [pytest.mark.services, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "ada@example.org"
OUTAGE = 20.0  # seconds: several of the dispatcher's passes, each bounded by the timeout


def cli(env: dict[str, str], *args: str, codes: tuple[int, ...] = (0,)) -> list[Any]:
    p = subprocess.run([sys.executable, "-m", "adapters.cli", "--json", *args], cwd=ROOT,
                       env={**os.environ, **env}, capture_output=True, timeout=300)
    assert p.returncode in codes, (p.returncode, p.stderr.decode()[-3000:])
    return [json.loads(line) for line in p.stdout.decode().splitlines() if line.strip()]


@pytest.fixture
def env(pg_dsn: str, hbase_server: Any, kafka_server: Any) -> Iterator[dict[str, str]]:
    tag = secrets.token_hex(4)
    data = Path(f"/tmp/ll-dsp-{tag}")  # short: supervisord's unix socket lives in it
    env = scale_out_env(data, dsn=pg_dsn, hbase=hbase_server,
                        kafka_bootstrap=kafka_server.bootstrap, prefix=f"dsp{tag}",
                        topic=f"dsp-{tag}", stream_group=f"dsp-{tag}", durability="normal",
                        stream_batch="40", stream_within="0.2", stream_commit_interval="0.5",
                        hbase_timeout="3", dispatch_interval_seconds="1")
    cli(env, "init")
    try:
        yield env
    finally:
        subprocess.run([sys.executable, "-m", "adapters.cli", "processes", "stop"], cwd=ROOT,
                       env={**os.environ, **env}, capture_output=True, timeout=300)
        try:
            drop_tables(hbase_server, f"dsp{tag}")
        finally:
            shutil.rmtree(data, ignore_errors=True)


def test_the_dispatcher_waits_out_an_hbase_outage_and_dispatches_after_it(
        env: dict[str, str], hbase_server: Any, tmp_path: Path) -> None:
    data = Path(env["LETTERLOG_DATA"])

    def log() -> str:
        path = data / "supervisor" / "dispatcher.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def pid() -> Any:
        rows = {r["name"]: r for r in cli(env, "processes", "status", codes=(0, 3))}
        return rows["dispatcher"]["state"], rows["dispatcher"]["pid"]

    def deliver(tag: str, count: int) -> None:
        for i in range(count):
            f = tmp_path / f"{tag}-{i}.eml"
            f.write_bytes(make_mail(f"{tag} {i}", message_id=f"<{tag}{i}@dsp>"))
            cli(env, "deliver", "--account", ACCOUNT, str(f))

    with Endpoint() as hook:
        cli(env, "rule", "create", "all", "--webhook", hook.url)
        started = {r["name"]: r for r in cli(env, "processes", "start", "--workers", "1",
                                                "--no-purger", "--dispatcher")}
        assert started["dispatcher"]["state"] == "RUNNING", started
        before = started["dispatcher"]["pid"]
        deliver("before", 1)
        until(lambda: len(hook.accepted) == 1, timeout=180, what="the first rule event",
              explain=lambda: log()[-3000:])

        gateways = [p.pid for p in (hbase_server._thrift, hbase_server._thrift2)
                    if p is not None]
        t0 = time.monotonic()
        for gateway in gateways:
            os.kill(gateway, signal.SIGSTOP)
        try:
            deliver("during", 2)  # the command side needs no HBase
            # said within the timeout (3 s) and the Stall's 5 s, with a margin
            until(lambda: "hbase not answering" in log() or pid() != ("RUNNING", before),
                  timeout=60, what="the dispatcher to say HBase is not answering",
                  explain=lambda: log()[-3000:])
            time.sleep(max(0.0, OUTAGE - (time.monotonic() - t0)))  # the outage itself
            assert pid() == ("RUNNING", before), ("the dispatcher exited", log()[-3000:])
        finally:
            for gateway in gateways:
                os.kill(gateway, signal.SIGCONT)

        until(lambda: len(hook.accepted) == 3, timeout=180,
              what="the rule events raised during the outage, dispatched after it",
              explain=lambda: log()[-3000:])
        until(lambda: "hbase answering again" in log(), timeout=60,
              what="the dispatcher to say HBase answers again", explain=lambda: log()[-3000:])
    text = log()
    print(f"\ndispatcher's log through the outage:\n{text[-2000:]}")
    assert pid() == ("RUNNING", before), "the dispatcher exited or was restarted"
    assert text.count("hbase not answering") == 1, text[-3000:]
    assert text.count("hbase answering again") == 1, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert all(n == 1 for n in hook.accepted.values()), hook.accepted
