"""End to end on real servers: commands through the embedded API on PostgreSQL -> outbox
relay -> Kafka -> faust worker (a real subprocess) -> HBase. After every scenario, each HBase
table is identical, cell for cell, to a fold of the same log (``verify_tables``).

Faults injected, each followed by the same check: the worker SIGKILLed mid-batch (cells
written, tracking and offsets not) and restarted; the relay crashing after publishing but
before recording its position (every record of that batch twice in Kafka); poison records
produced into the topic (they land in ``dead_letters``, everything else is still equal).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

from adapters.bootstrap import relay as make_relay
from adapters.embedded import Letterlog
from adapters.readside.host import verify_tables
from adapters.streaming.projector import list_dead_letters
from adapters.streaming.relay import InjectedCrash, OutboxRelay
from adapters.streaming.worker import kafka_lag
from projections.registry import ALL
from projections.runner import identity
from tests.factories import database, scale_out_env, until
from tests.stream_support import story

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 4


# -- helpers ----------------------------------------------------------------------------------


class Worker:
    """``python -m adapters.cli.worker`` as a subprocess, its output in a log file."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env = env
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, **extra: str) -> Worker:
        env = {**os.environ, **self.env, **extra}
        out = open(self.log, "ab")  # noqa: SIM115 - the child owns it
        out.write(f"\n===== worker start {extra} =====\n".encode())
        out.flush()
        self.proc = subprocess.Popen([sys.executable, "-m", "adapters.cli.worker"],
                                     cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        return self

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self.proc = None

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
        self.proc = None

    def tail(self, n: int = 40) -> str:
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "worker log tail:\n" + "\n".join(lines[-n:])

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Pipeline:
    """One test's world: its database, topic, consumer group and HBase table prefix."""

    def __init__(self, root: Path, dsn: str, bootstrap: str, hbase: Any,
                 write_path: str = "thrift1") -> None:
        tag = secrets.token_hex(4)
        self.topic = f"stream-e2e-{tag}"
        self.group = f"stream-e2e-{tag}"
        self.prefix = f"e2e{tag}"
        self.bootstrap = bootstrap
        self.letterlog = Letterlog.open(root / "data", event_store="postgres", postgres_dsn=dsn,
                                        durability="normal", kafka_bootstrap=bootstrap,
                                        kafka_topic=self.topic)
        from adapters.tables.hbase import HBaseTableStore

        self.tables = HBaseTableStore(hbase.thrift_host, hbase.thrift_port,
                                      table_prefix=self.prefix)
        # the worker reads the log's settings too: the data keys are beside the log, their
        # key-encryption keys in the store's vault (every process opens the same one)
        self.worker = Worker(scale_out_env(
            root / "worker", dsn=dsn, hbase=hbase, kafka_bootstrap=bootstrap,
            key_vault=str(root / "data" / "vault.sqlite"),
            prefix=self.prefix, topic=self.topic, stream_group=self.group, stream_batch="40",
            stream_within="0.2", stream_commit_interval="0.5", stream_session_timeout="6",
        ), root / "worker.log")
        if write_path == "thrift2":  # the worker writes a timestamp per cell (putMultiple)
            assert getattr(hbase, "thrift2_port", None), "the HBase server has no Thrift2"
            self.worker.env["LETTERLOG_HBASE_THRIFT2_PORT"] = str(hbase.thrift2_port)

    def relay(self, **options: Any) -> OutboxRelay:
        return make_relay(self.letterlog.settings, log=self.letterlog,
                                         partitions=PARTITIONS, batch=100, **options)

    def publish(self) -> int:
        with self.relay() as relay:
            return relay.run_once()

    def lag(self) -> dict[str, Any]:
        return kafka_lag(self.bootstrap, self.topic, self.group)

    def caught_up(self) -> bool:
        if not self.worker.alive():
            raise AssertionError(f"the worker exited. {self.worker.tail()}")
        lag = self.lag()
        return bool(lag["partitions"]) and lag["events"] == 0 and all(
            p["committed"] is not None for p in lag["partitions"].values() if p["end"])

    def wait_caught_up(self, timeout: float = 180) -> None:
        until(self.caught_up, timeout=timeout, what="the worker to commit every record",
              explain=lambda: f"lag {self.lag()}; {self.worker.tail()}")

    def assert_tables_equal_the_fold(self) -> None:
        head = self.letterlog.max_position()
        reports = verify_tables(self.tables, identity, self.letterlog.events, ALL, head)
        differing = {r.table: r.differences for r in reports if not r.identical}
        assert differing == {}, differing
        assert sum(r.live_cells for r in reports) > 0

    def close(self) -> None:
        self.worker.stop()
        try:
            for table in self.tables.list_tables():
                self.tables.drop_table(table)
        finally:
            self.tables.close()
            self.letterlog.close()


@pytest.fixture
def pipeline(request: Any, tmp_path: Path, postgres_server: Any, hbase_server: Any,
             kafka_server: Any) -> Iterator[Pipeline]:
    """Workers write through Thrift1 unless the test asks for ``"thrift2"`` (indirect)."""
    with database(postgres_server) as dsn:
        p = Pipeline(tmp_path, dsn, kafka_server.bootstrap, hbase_server,
                     getattr(request, "param", "thrift1"))
        try:
            yield p
        finally:
            p.close()


def produce(bootstrap: str, topic: str, records: list[tuple[int, bytes, bytes]]) -> None:
    """(partition, key, value) records, straight into the topic."""
    from aiokafka import AIOKafkaProducer

    async def send() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await producer.start()
        try:
            for partition, key, value in records:
                await producer.send_and_wait(topic, value, key=key, partition=partition)
        finally:
            await producer.stop()

    asyncio.run(send())


# -- scenarios --------------------------------------------------------------------------------


BOTH_WRITE_PATHS = pytest.mark.parametrize("pipeline", ["thrift1", "thrift2"], indirect=True)


@BOTH_WRITE_PATHS
def test_commands_reach_hbase_through_kafka_identical_to_a_fold_of_the_log(pipeline):
    story(pipeline.letterlog, rounds=2)
    assert pipeline.publish() == pipeline.letterlog.max_position()
    pipeline.worker.start()
    pipeline.wait_caught_up()
    pipeline.assert_tables_equal_the_fold()
    # a live worker keeps up with what comes next
    story(pipeline.letterlog, rounds=1, first=2)
    pipeline.publish()
    pipeline.wait_caught_up()
    pipeline.assert_tables_equal_the_fold()
    assert list_dead_letters(pipeline.tables) == []


@BOTH_WRITE_PATHS
def test_a_worker_killed_mid_batch_and_restarted_leaves_the_tables_exact(pipeline, tmp_path):
    story(pipeline.letterlog, rounds=3)
    pipeline.publish()
    held = tmp_path / "held"
    # after the 3rd batch's cells are written -- before its tracking rows and its acks --
    # the worker announces it and hangs; we kill it there
    pipeline.worker.start(LETTERLOG_STREAM_TEST_HOLD=f"{held}:3")
    until(held.exists, timeout=180, what="the worker to hold after writing a batch",
          explain=pipeline.worker.tail)
    pipeline.worker.kill()
    lag = pipeline.lag()
    assert lag["events"] > 0, lag  # the held batch was not committed
    pipeline.worker.start()
    pipeline.wait_caught_up()
    pipeline.assert_tables_equal_the_fold()


def test_a_worker_killed_while_busy_and_restarted_leaves_the_tables_exact(pipeline):
    story(pipeline.letterlog, rounds=4)
    pipeline.publish()
    total = pipeline.lag()["events"]
    pipeline.worker.start()
    # kill as soon as some, not all, of the records are committed
    until(lambda: total - pipeline.lag()["events"] > 0, timeout=180,
          what="the first commits", explain=pipeline.worker.tail)
    pipeline.worker.kill()
    pipeline.worker.start()
    pipeline.wait_caught_up()
    pipeline.assert_tables_equal_the_fold()


def test_a_relay_crash_between_publish_and_record_duplicates_records_harmlessly(pipeline):
    story(pipeline.letterlog, rounds=1)
    pipeline.publish()
    story(pipeline.letterlog, rounds=2, first=1)  # more; the relay crashes after sending them
    with pipeline.relay(crash_after_publish=True) as crashing, pytest.raises(InjectedCrash):
        crashing.run_once()
    assert crashing.published > 0
    head = pipeline.letterlog.max_position()
    pipeline.publish()  # resumes from the recorded position: the crashed batch again
    ends = sum(p["end"] for p in pipeline.lag()["partitions"].values())
    assert ends == head + crashing.published  # the crashed batch is in Kafka twice
    pipeline.worker.start()
    pipeline.wait_caught_up()
    pipeline.assert_tables_equal_the_fold()


def test_poison_records_land_in_dead_letters_and_the_rest_is_still_exact(pipeline):
    story(pipeline.letterlog, rounds=1)
    pipeline.publish()
    unknown_class = msgpack.packb({"p": 10**9, "id": b"\x01" * 16, "v": 1,
                                   "t": "domain.nowhere:Gone", "s": b"\x80"}, use_bin_type=True)
    produce(pipeline.bootstrap, pipeline.topic, [
        (0, b"k" * 16, b"\xc1 not msgpack at all"),
        (1, b"k" * 16, unknown_class),
    ])
    story(pipeline.letterlog, rounds=1, first=1)
    pipeline.publish()  # real events after the poison, in the same partitions
    pipeline.worker.start()
    pipeline.wait_caught_up()
    pipeline.assert_tables_equal_the_fold()
    letters = list_dead_letters(pipeline.tables)
    assert sorted((d.partition, d.value) for d in letters) == [
        (0, b"\xc1 not msgpack at all"), (1, unknown_class)]
    assert all(d.topic == pipeline.topic and d.error and d.times >= 1 for d in letters)
