"""The stream worker (``StreamWorker``) on the in-memory table store, fed by a stand-in for
aiokafka's consumer: it projects batches, commits a batch's offsets only after the batch is
written, retries a failing store without committing, dead-letters poison without stopping,
finishes and commits the batch being written before partitions are revoked, drops (and reads
again) what it fetched before a rebalance, and opens its tables before it joins the group."""

from __future__ import annotations

import asyncio
import json
import socket
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.structs import ConsumerRecord

from adapters.bootstrap import scaleout as bootstrap
from adapters.config.settings import StreamOptions, load_settings
from adapters.streaming.projector import Record, list_dead_letters
from adapters.streaming.worker import StreamWorker, create_worker, publish_lag
from adapters.tables.memory import InMemoryTableStore
from tests.stream_support import TOPIC, Log, assert_equal_to_fold, story

OPTIONS = StreamOptions(batch=10, within=0.02, retry_delay=0.01)


@pytest.fixture(scope="module")
def history() -> Log:
    h = Log()
    story(h.mail, rounds=1)
    return h


class FakeConsumer:
    """What the worker uses of ``AIOKafkaConsumer``, over records held in memory: positions,
    seeks, commits, and rebalances (``rebalance``) calling the listener as aiokafka does."""

    def __init__(self, partitions: int = 3, on_start: Callable[[], None] | None = None) -> None:
        self.tps = {TopicPartition(TOPIC, p) for p in range(partitions)}
        self.log: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] = {
            tp: [] for tp in self.tps}
        self.position = {tp: 0 for tp in self.tps}
        self.committed: dict[TopicPartition, int] = {}
        self.commits: list[dict[TopicPartition, int]] = []
        self.seeks: list[tuple[TopicPartition, int]] = []
        self.listener: Any = None
        self.started = False
        self.stopped = False
        self.on_start = on_start

    def feed(self, records: list[Record]) -> None:
        for r in records:
            self.log[TopicPartition(r.topic, r.partition)].append(ConsumerRecord(
                r.topic, r.partition, r.offset, int((r.timestamp or 0) * 1000), 0, r.key,
                r.value, None, 0, 0, []))

    def subscribe(self, topics: list[str], listener: Any) -> None:
        assert topics == [TOPIC]
        self.listener = listener

    async def start(self) -> None:
        if self.on_start:
            self.on_start()
        self.started = True
        await self.listener.on_partitions_assigned(set(self.tps))

    async def stop(self) -> None:
        self.stopped = True

    async def getmany(self, timeout_ms: int = 0, max_records: int | None = None
                      ) -> dict[TopicPartition, list[Any]]:
        out: dict[TopicPartition, list[Any]] = {}
        left = max_records or 10**9
        for tp in sorted(self.tps):
            got = [m for m in self.log[tp] if m.offset >= self.position[tp]][:left]
            if got:
                out[tp] = got
                left -= len(got)
                self.position[tp] = got[-1].offset + 1
        if not out:
            await asyncio.sleep(min(timeout_ms / 1000, 0.01))
        return out

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        assert set(offsets) <= self.tps
        self.commits.append(dict(offsets))
        self.committed.update(offsets)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append((tp, offset))
        self.position[tp] = offset

    def assignment(self) -> set[TopicPartition]:
        return set(self.tps)

    def highwater(self, tp: TopicPartition) -> int:
        return self.log[tp][-1].offset + 1 if self.log[tp] else 0

    async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.highwater(tp) for tp in tps}

    async def rebalance(self) -> None:
        """Every partition revoked and given back: positions start from the commits."""
        await self.listener.on_partitions_revoked(set(self.tps))
        self.position = {tp: self.committed.get(tp, 0) for tp in self.tps}
        await self.listener.on_partitions_assigned(set(self.tps))

    def done(self) -> bool:
        return all(self.committed.get(tp, 0) >= self.highwater(tp) for tp in self.tps)


async def until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(0.01)


def run_worker(store: Any, scenario: Callable[[StreamWorker, FakeConsumer], Awaitable[None]],
               consumer: FakeConsumer | None = None, **kw: Any) -> StreamWorker:
    """Runs a worker on ``consumer`` while ``scenario`` feeds it, then stops it."""
    consumer = consumer or FakeConsumer()

    async def main(data: str) -> StreamWorker:
        worker = create_worker(load_settings(kafka_topic=TOPIC, data=data),
                               kw.pop("options", OPTIONS), parts=bootstrap,
                               store_factory=kw.pop("store_factory", lambda: store),
                               consumer=consumer, **kw)
        stop = asyncio.Event()
        running = asyncio.ensure_future(worker.run(stop))
        try:
            await scenario(worker, consumer)
        finally:
            stop.set()
            await asyncio.wait_for(running, 30)
        return worker

    with tempfile.TemporaryDirectory(prefix="letterlog-worker-") as data:
        worker = asyncio.run(main(data))
    assert consumer.stopped
    return worker


def committed_count(consumer: FakeConsumer) -> int:
    """Records committed so far (offsets count from 0 in every partition)."""
    return sum(consumer.committed.values())


def test_the_worker_projects_batches_into_the_table_store(history):
    store = InMemoryTableStore()
    records = history.records()
    sizes: list[int] = []

    async def scenario(worker, consumer):
        consumer.feed(records)
        await until(consumer.done)

    worker = run_worker(store, scenario, after_write=lambda result: sizes.append(result.records))
    assert sum(sizes) == len(records) and max(sizes) <= OPTIONS.batch
    assert len(sizes) >= len(records) // OPTIONS.batch
    assert sum(r.records for r in worker.results) == len(records)
    assert_equal_to_fold(store, history)


def test_offsets_are_committed_only_after_their_batch_is_written(history):
    """When a batch's cells are written (``after_write``: tracking rows come next) none of its
    offsets, nor any later one, is committed; right after, all of them are."""
    store = InMemoryTableStore()
    records = history.records()[:35]
    consumer = FakeConsumer()
    seen: list[tuple[int, int]] = []

    def after_write(result):
        seen.append((result.records, committed_count(consumer)))

    async def scenario(worker, consumer):
        consumer.feed(records)
        await until(consumer.done)

    run_worker(store, scenario, consumer, after_write=after_write)
    assert len(seen) >= 4
    before = 0
    for size, committed in seen:
        assert committed == before
        before += size
    assert before == committed_count(consumer) == len(records)
    assert all(o > 0 for c in consumer.commits for o in c.values())


def test_the_next_batch_is_applied_while_the_plain_tables_are_written_behind(history):
    """A batch's plain tables (``messages``, ...) are written behind: while that write hangs
    the next batch is applied (its ``counters`` rows written), but neither batch's tracking
    rows nor offsets are written or committed, nor a third batch applied; once the write
    returns, both batches are tracked and committed, in order, and the tables equal a fold."""
    records = history.records()
    release = threading.Event()
    hung = threading.Event()
    written: list[str] = []  # the tables of each apply, in order

    class Slow(InMemoryTableStore):
        def apply(self, mutations):
            mutations = list(mutations)
            tables = {m.table for m in mutations}
            if "messages" in tables and not release.is_set():
                hung.set()
                release.wait(20)
            written.extend(sorted(tables))
            super().apply(mutations)

    store = Slow()
    consumer = FakeConsumer()

    async def scenario(worker, consumer):
        consumer.feed(records)
        await until(hung.is_set)
        await until(lambda: worker.applying is not None and worker.applying.done()
                    and worker.behind is not None)  # the second batch applied
        await asyncio.sleep(0.2)
        assert consumer.commits == [] and "tracking" not in written
        assert "counters" in written  # the second batch's rows, written meanwhile
        assert len(worker.results) == 0 and not worker.inflight.done()
        release.set()
        await until(consumer.done)

    worker = run_worker(store, scenario, consumer)
    for tp in consumer.tps:  # committed in order
        offsets = [c[tp] for c in consumer.commits if tp in c]
        assert offsets == sorted(offsets)
    assert committed_count(consumer) == len(records)
    assert sum(r.records for r in worker.results) == len(records)
    assert_equal_to_fold(store, history)


def test_a_hanging_write_behind_is_said_while_the_next_batch_writes_fine(history):
    """A batch's plain tables hang (a frozen HBase) while the next batch's ``counters`` write
    comes back: that answer does not hide the call still hanging. The store is said to be
    not answering once, counted from the hanging call's start, and answering again only
    when that call returns."""
    records = history.records()
    release = threading.Event()
    hung = threading.Event()

    class Slow(InMemoryTableStore):
        def apply(self, mutations):
            mutations = list(mutations)
            if any(m.table == "messages" for m in mutations) and not release.is_set():
                hung.set()
                release.wait(20)
            super().apply(mutations)

    class Said:
        def __init__(self) -> None:
            self.lines: list[str] = []

        def warning(self, event: str, **fields: Any) -> None:
            self.lines.append(event)

    said = Said()
    consumer = FakeConsumer()

    async def scenario(worker, consumer):
        stall = worker.state.store_stall
        stall.log, stall.after = said, 0.3
        consumer.feed(records)
        await until(hung.is_set)
        await until(lambda: worker.applying is not None and worker.applying.done()
                    and worker.behind is not None)  # the next batch's counters written
        assert said.lines == []
        await asyncio.sleep(0.4)
        worker.state.watch()  # what the worker does every few seconds
        assert said.lines == ["the table store not answering"]
        release.set()
        await until(consumer.done)
        assert said.lines == ["the table store not answering", "the table store answering again"]

    run_worker(Slow(), scenario, consumer)
    assert committed_count(consumer) == len(records)


def test_a_batch_whose_counters_write_fails_still_writes_its_plain_tables(history):
    """The plain runners fold a batch and move past its events before ``counters`` is
    written; when that write fails, the batch is applied again, the plain runners skip the
    events, and the folds the failed attempt kept are what the retry writes behind."""
    failures = {"left": 2}

    class Flaky(InMemoryTableStore):
        def apply(self, mutations):
            mutations = list(mutations)
            if failures["left"] and any(m.table == "counters" for m in mutations):
                failures["left"] -= 1
                raise OSError("hbase thrift: connection reset")
            super().apply(mutations)

    store = Flaky()
    records = history.records()

    async def scenario(worker, consumer):
        consumer.feed(records)
        await until(consumer.done)

    consumer = FakeConsumer()
    run_worker(store, scenario, consumer)
    assert failures["left"] == 0 and committed_count(consumer) == len(records)
    assert_equal_to_fold(store, history)


def test_a_failing_store_is_retried_and_nothing_is_committed_meanwhile(history):
    records = history.records()
    failures = {"left": 3}
    consumer = FakeConsumer()
    committed_during_failures: list[int] = []

    class Flaky(InMemoryTableStore):
        def apply(self, mutations):
            mutations = list(mutations)
            if failures["left"] and any(m.table == "messages" for m in mutations):
                failures["left"] -= 1
                committed_during_failures.append(committed_count(consumer))
                raise OSError("hbase thrift: connection refused")
            super().apply(mutations)

    store = Flaky()

    async def scenario(worker, consumer):
        consumer.feed(records)
        await until(consumer.done)

    run_worker(store, scenario, consumer)
    assert failures["left"] == 0 and committed_during_failures == [0, 0, 0]
    assert_equal_to_fold(store, history)


def test_a_poison_record_is_dead_lettered_and_the_stream_goes_on(history):
    store = InMemoryTableStore()
    records = history.records()

    async def scenario(worker, consumer):
        consumer.feed(records[:10])
        await until(consumer.done)
        consumer.feed([replace(records[0], value=b"\x00garbage", key=b"k" * 16,
                               partition=3, offset=0)])  # a partition of its own
        await until(consumer.done)
        consumer.feed(records[10:])
        await until(consumer.done)

    run_worker(store, scenario, FakeConsumer(partitions=4))
    [letter] = list_dead_letters(store)
    assert letter.topic == TOPIC and letter.value == b"\x00garbage"
    assert "not a letterlog event" in letter.error
    assert_equal_to_fold(store, history)


def test_the_worker_opens_its_table_store_before_it_joins_the_group():
    store = InMemoryTableStore()
    opened: list[bool] = []
    at_start: list[set[str]] = []

    def factory() -> InMemoryTableStore:
        opened.append(True)
        return store

    consumer = FakeConsumer(on_start=lambda: at_start.append(set(store.list_tables())))

    async def scenario(worker, consumer):
        await until(lambda: consumer.started)

    worker = run_worker(store, scenario, consumer, store_factory=factory)
    assert opened == [True] and worker.state.projector is not None
    assert {"messages", "catalog", "tracking"} <= at_start[0]


def test_a_rebalance_waits_for_the_batch_being_written_and_drops_what_was_fetched(history):
    """Partitions revoked while a batch is written: the revocation returns only once that
    batch (and the one applied after it while its plain tables were written behind, if any)
    is written and committed; the batch fetched meanwhile is not applied, and is read again
    from the committed offsets."""
    records = history.records()
    release = threading.Event()
    writing = threading.Event()
    applied: list[int] = []

    class Slow(InMemoryTableStore):
        def apply(self, mutations):
            mutations = list(mutations)
            if not release.is_set() and any(m.table == "messages" for m in mutations):
                writing.set()
                release.wait(20)
            super().apply(mutations)

    store = Slow()

    async def scenario(worker, consumer):
        consumer.feed(records)
        await until(writing.is_set)
        await until(lambda: consumer.position != {tp: 0 for tp in consumer.tps}
                    and sum(consumer.position.values()) > OPTIONS.batch)  # the next fetched
        revoking = asyncio.ensure_future(consumer.rebalance())
        await asyncio.sleep(0.2)
        assert not revoking.done() and consumer.commits == []  # waits for the write
        release.set()
        await asyncio.wait_for(revoking, 10)
        # the batches in flight (one, or two: the next applied while the first wrote behind)
        assert 1 <= len(applied) <= 2 and committed_count(consumer) == sum(applied)
        await until(consumer.done)

    worker = run_worker(store, scenario,
                        after_write=lambda result: applied.append(result.records))
    assert sum(applied) == len(records)  # the dropped batch applied once, after it
    assert sum(r.records for r in worker.results) == len(records)
    assert_equal_to_fold(store, history)


def test_stopping_finishes_and_commits_the_batch_being_written(history):
    records = history.records()[:10]
    release = threading.Event()
    writing = threading.Event()

    class Slow(InMemoryTableStore):
        def apply(self, mutations):
            mutations = list(mutations)
            if any(m.table not in ("tracking", "catalog") for m in mutations):
                writing.set()
                release.wait(20)
            super().apply(mutations)

    consumer = FakeConsumer()

    async def scenario(worker, consumer):
        consumer.feed(records)
        await until(writing.is_set)
        threading.Timer(0.2, release.set).start()

    run_worker(Slow(), scenario, consumer)
    assert consumer.done() and release.is_set()


def test_lag_and_metrics_are_served_on_the_web_port(history):
    records = history.records()[:20]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pages: dict[str, bytes] = {}

    async def get(path: str) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await writer.drain()
        answer = await reader.read()
        writer.close()
        return answer

    async def scenario(worker, consumer):
        consumer.feed(records)
        await until(consumer.done)
        pages["lag"] = await get("/lag/")
        pages["metrics"] = await get("/metrics/")

    run_worker(InMemoryTableStore(), scenario,
               options=OPTIONS.model_copy(update={"web_port": port}))
    head, _, body = pages["lag"].partition(b"\r\n\r\n")
    assert head.split()[1] == b"200" and json.loads(body)["events"] == 0
    assert b"letterlog_stream_events_applied" in pages["metrics"]


def test_lag_is_published_as_prometheus_gauges():
    from prometheus_client import REGISTRY

    publish_lag({"events": 7, "seconds": 2.5, "partitions": {
        "letterlog-events/3": {"highwater": 10, "next_offset": 3, "events": 7, "seconds": 2.5}}})
    labels = {"topic": "letterlog-events", "partition": "3"}
    assert REGISTRY.get_sample_value("letterlog_stream_lag_events", labels) == 7
    assert REGISTRY.get_sample_value("letterlog_stream_lag_seconds", labels) == 2.5


def test_options_come_from_letterlog_stream_variables(monkeypatch):
    for name, value in {"LETTERLOG_STREAM_BATCH": "500", "LETTERLOG_STREAM_GROUP": "g1",
                        "LETTERLOG_STREAM_WITHIN": "0.25"}.items():
        monkeypatch.setenv(name, value)
    options = load_settings(stream={"threads": 2}).stream
    assert (options.batch, options.group, options.within, options.threads) == (500, "g1", 0.25, 2)


def test_bad_stream_variables_name_the_variable(monkeypatch):
    from domain.errors import SettingsError

    monkeypatch.setenv("LETTERLOG_STREAM_BATCH", "many")
    with pytest.raises(SettingsError, match="LETTERLOG_STREAM_BATCH: 'many'"):
        load_settings()
    monkeypatch.delenv("LETTERLOG_STREAM_BATCH")
    monkeypatch.setenv("LETTERLOG_STREAM_THREADS", "0")
    with pytest.raises(SettingsError, match="LETTERLOG_STREAM_THREADS: must be at least 1"):
        load_settings()
