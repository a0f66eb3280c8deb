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
import json
import urllib.request
from pathlib import Path

import msgpack
import pytest

from adapters.streaming.projector import list_dead_letters
from adapters.streaming.relay import InjectedCrash
from tests.factories import until
from tests.stream_support import story

pytestmark = pytest.mark.services



# -- helpers ----------------------------------------------------------------------------------








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


def test_a_restarted_worker_s_lag_gauge_agrees_with_letterlog_lag(pipeline):
    """Issue 42, item 10: after a restart, before any new record, the worker's
    ``letterlog_stream_lag_events`` says what ``letterlog lag`` says (caught up: 0) from its
    first report on, not the whole of its partitions until the first new record."""
    data = Path(pipeline.worker.env["LETTERLOG_DATA"])

    def gauge() -> float | None:
        """The worker's lag gauge summed over its partitions (None: not reported yet)."""
        assert pipeline.worker.proc is not None
        ports = [entry["metrics_port"] for entry in (
            json.loads(f.read_text()) for f in (data / "run").glob("worker-*.json"))
            if entry["pid"] == pipeline.worker.proc.pid]
        if not ports:
            return None
        with urllib.request.urlopen(f"http://127.0.0.1:{ports[0]}/metrics", timeout=5) as r:
            lines = [line for line in r.read().decode().splitlines()
                     if line.startswith("letterlog_stream_lag_events{")]
        return sum(float(line.rsplit(" ", 1)[1]) for line in lines) if lines else None

    story(pipeline.letterlog, rounds=2)
    pipeline.publish()
    pipeline.worker.start(LETTERLOG_METRICS_PORT="0")
    pipeline.wait_caught_up()
    pipeline.worker.stop()
    pipeline.worker.start(LETTERLOG_METRICS_PORT="0")
    [first] = until(lambda: (g := gauge()) is not None and [g], timeout=120,
                    what="the restarted worker's first lag report",
                    explain=pipeline.worker.tail)
    assert (first, pipeline.lag()["events"]) == (0, 0), pipeline.worker.tail()
