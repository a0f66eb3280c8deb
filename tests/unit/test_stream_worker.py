"""The faust agent through ``agent.test_context()`` on the in-memory table store, fed batches
of consumer messages as ``BatchConsumer`` hands them over: it projects batches, acknowledges
records only after their batch is written (and only then can faust commit their offsets),
retries a failing store without acknowledging, dead-letters poison without stopping, and
drops batches fetched before a rebalance."""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from adapters import bootstrap
from adapters.settings import StreamOptions, load_settings
from adapters.streaming.projector import list_dead_letters
from adapters.streaming.worker import create_app, publish_lag
from adapters.tables.memory import InMemoryTableStore
from tests.stream_support import TOPIC, Log, assert_equal_to_fold, story

OPTIONS = StreamOptions(batch=10, within=0.02, retry_delay=0.01)


@pytest.fixture(scope="module")
def history() -> Log:
    h = Log()
    story(h.mail, rounds=1)
    return h


async def until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(0.01)


def run_agent(store: Any, scenario: Callable[[Any, Any], Awaitable[None]],
              **kw: Any) -> None:
    """Builds the app inside the running loop (faust binds to it) and runs ``scenario``."""

    async def main(data: str) -> None:
        app = create_app(load_settings(kafka_topic=TOPIC, data=data),
                         kw.pop("options", OPTIONS), parts=bootstrap,
                         store_factory=lambda: store, **kw)
        app.flow_control.resume()
        async with app.letterlog_agent.test_context() as agent:
            await scenario(app, agent)
            if agent._crash_reason:
                raise agent._crash_reason

    with tempfile.TemporaryDirectory(prefix="letterlog-worker-") as data:
        asyncio.run(main(data))
        assert (Path(data) / "faust").is_dir()  # faust's files stay in the data directory


def message(app: Any, r: Any, generation: int | None = None) -> Any:
    """A record as faust's consumer makes it (``Consumer._to_message``)."""
    from faust.types import TP
    from faust.types.tuples import ConsumerMessage

    return ConsumerMessage(r.topic, r.partition, r.offset, r.timestamp or 0.0, 0, [], r.key,
                           r.value, None, tp=TP(r.topic, r.partition),
                           generation_id=app.consumer_generation_id if generation is None
                           else generation)


async def send(agent: Any, records: list[Any], app: Any = None) -> list[Any]:
    """``records`` as faust messages, handed to the agent in batches of ``OPTIONS.batch``
    (what ``BatchFeed.send`` does)."""
    app = app or agent.app
    messages = [message(app, r) for r in records]
    for i in range(0, len(messages), OPTIONS.batch):
        await agent.put(messages[i:i + OPTIONS.batch], wait=False)
    return messages


def all_acked(messages: list[Any]) -> Callable[[], bool]:
    return lambda: all(m.acked for m in messages)


def test_the_agent_projects_batches_into_the_table_store(history):
    store = InMemoryTableStore()
    records = history.records()

    sizes: list[int] = []

    async def scenario(app, agent):
        await until(all_acked(await send(agent, records)))
        # each batch's result is yielded once the next batch comes (pipelining)
        assert sum(r["records"] for r in agent.results.values()) == len(records) - sizes[-1]

    run_agent(store, scenario, after_write=lambda result: sizes.append(result.records))
    assert sum(sizes) == len(records) and max(sizes) <= OPTIONS.batch
    assert len(sizes) >= len(records) // OPTIONS.batch
    assert_equal_to_fold(store, history)


def test_records_are_acknowledged_only_after_their_batch_is_written(history):
    store = InMemoryTableStore()
    records = history.records()[:25]
    events: list[Any] = []
    seen: list[tuple[int, list[bool]]] = []

    def after_write(result):  # the batch's cells are in the store; tracking comes next
        seen.append((result.records, [m.acked for m in events]))

    async def scenario(app, agent):
        events.extend(await send(agent, records))
        await until(all_acked(events))

    run_agent(store, scenario, after_write=after_write)
    assert len(seen) >= 3
    before = 0
    for size, acked in seen:  # earlier batches acknowledged; this one and later ones not
        assert acked == [True] * before + [False] * (len(records) - before)
        before += size
    assert before == len(records)


def test_a_failing_store_is_retried_and_nothing_is_acknowledged_meanwhile(history):
    records = history.records()
    failures = {"left": 3}
    events: list[Any] = []
    acked_during_failures: list[bool] = []

    class Flaky(InMemoryTableStore):
        def apply(self, mutations):
            mutations = list(mutations)
            if failures["left"] and any(m.table == "messages" for m in mutations):
                failures["left"] -= 1
                acked_during_failures.extend(m.acked for m in events[-10:])
                raise OSError("hbase thrift: connection refused")
            super().apply(mutations)

    store = Flaky()

    async def scenario(app, agent):
        events.extend(await send(agent, records[:10]))  # exactly one batch
        await until(all_acked(events))
        events.extend(await send(agent, records[10:]))
        await until(all_acked(events))

    run_agent(store, scenario)
    assert failures["left"] == 0 and acked_during_failures and not any(acked_during_failures)
    assert_equal_to_fold(store, history)


def test_a_poison_record_is_dead_lettered_and_the_stream_goes_on(history):
    store = InMemoryTableStore()
    records = history.records()
    events: list[Any] = []

    async def scenario(app, agent):
        events.extend(await send(agent, records[:10]))
        garbage = replace(records[0], value=b"\x00garbage", key=b"k" * 16, offset=10**6)
        events.extend(await send(agent, [garbage]))
        events.extend(await send(agent, records[10:]))
        await until(all_acked(events))

    run_agent(store, scenario)
    [letter] = list_dead_letters(store)
    assert letter.topic == TOPIC and letter.value == b"\x00garbage"
    assert "not a letterlog event" in letter.error
    assert_equal_to_fold(store, history)


def test_the_app_opens_its_table_store_before_its_consumer_starts():
    """``App.on_start`` runs before the app's services (its Kafka consumer among them) are
    started: the tables exist and the projector is open before the worker joins the group."""
    store = InMemoryTableStore()
    opened: list[bool] = []

    def factory() -> InMemoryTableStore:
        opened.append(True)
        return store

    async def main(data: str) -> None:
        app = create_app(load_settings(kafka_topic=TOPIC, data=data), OPTIONS, parts=bootstrap,
                         store_factory=factory)
        assert app.letterlog.projector is None and not store.list_tables()
        await app.on_start()
        assert opened == [True] and app.letterlog.projector is not None
        assert {"messages", "catalog", "tracking"} <= set(store.list_tables())
        assert not app.consumer._started.is_set()  # nothing joined yet
        # no warm-up left among the tasks that run once the app has started (and joined)
        assert not [t for t in app._app_tasks if "warm" in getattr(t, "__name__", "")]

    with tempfile.TemporaryDirectory(prefix="letterlog-worker-") as data:
        asyncio.run(main(data))


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


def test_offsets_become_committable_only_once_their_batch_is_written(history):
    """What faust commits is what ``Consumer.ack`` recorded: nothing of a batch before its
    cells are written, the whole batch right after."""
    store = InMemoryTableStore()
    records = history.records()[:30]
    committable: list[dict[int, int | None]] = []
    apps: list[Any] = []

    def offsets() -> dict[int, int | None]:
        from faust.types import TP

        consumer = apps[0].consumer
        return {p: consumer._new_offset(TP(TOPIC, p)) for p in {r.partition for r in records}}

    def after_write(result):
        committable.append(offsets())

    async def scenario(app, agent):
        apps.append(app)
        app.topics._acking_topics.add(TOPIC)  # as once subscribed (Conductor._update_indices)
        messages = await send(agent, records)
        await until(all_acked(messages))
        committable.append(offsets())

    run_agent(store, scenario, after_write=after_write)
    # after each write only what earlier batches acknowledged (_new_offset consumes it)
    first = committable[0]
    assert all(v is None for v in first.values())
    last = {p: max(r.offset for r in records if r.partition == p) + 1 for p in first}
    reached: dict[int, int] = {}
    for snapshot in committable:
        reached.update({p: v for p, v in snapshot.items() if v is not None})
    assert reached == last


def test_a_batch_fetched_before_a_rebalance_is_neither_applied_nor_acknowledged(history):
    store = InMemoryTableStore()
    records = history.records()
    applied: list[int] = []

    async def scenario(app, agent):
        stale = [message(app, r, generation=app.consumer_generation_id - 1)
                 for r in records[:10]]
        await agent.put(stale, wait=False)
        fresh = await send(agent, records)
        await until(all_acked(fresh))
        assert not any(m.acked for m in stale)

    run_agent(store, scenario, after_write=lambda result: applied.append(result.records))
    assert sum(applied) == len(records)
    assert_equal_to_fold(store, history)


def test_the_consumer_hands_fetched_records_over_in_tracked_batches(history):
    """``BatchConsumer._drain_messages`` on canned fetches: records in order, in batches of at
    most ``batch``, each tracked when handed over; records read already are dropped."""
    from aiokafka.structs import ConsumerRecord
    from faust.types import TP

    from adapters.streaming.worker import BatchConsumer, BatchFeed

    records = [r for r in history.records() if r.partition == 0][:25]
    tp = TP(TOPIC, 0)

    def fetched(rs):
        return {tp: [ConsumerRecord(TOPIC, 0, r.offset, 0, 0, r.key, r.value, None, 0, 0, [])
                     for r in rs]}

    async def main(data: str) -> None:
        app = create_app(load_settings(kafka_topic=TOPIC, data=data), OPTIONS, parts=bootstrap,
                         store_factory=InMemoryTableStore)
        consumer = app.consumer
        assert isinstance(consumer, BatchConsumer)
        handed: list[list[Any]] = []

        class Channel:
            subscriber_count = 1

            async def send(self, value):
                assert all(m in consumer.unacked for m in value)  # tracked first
                handed.append(value)

        app.letterlog_feed = BatchFeed(Channel(), [TOPIC], OPTIONS.batch, OPTIONS.within)
        fetches = [fetched(records[:13]), fetched(records[5:25]), {}]

        class Fetcher:
            _stopped = asyncio.Event()

        async def next_records(timeout):
            if not fetches:
                Fetcher._stopped.set()
                return {}, None
            return fetches.pop(0), None

        consumer._wait_next_records = next_records
        consumer.highwater = lambda tp: records[-1].offset + 1
        await consumer._drain_messages(Fetcher())
        assert [len(b) for b in handed] and max(len(b) for b in handed) <= OPTIONS.batch
        offsets = [m.offset for b in handed for m in b]
        # the second fetch repeats offsets 5..12: those below the read offset are dropped
        # (faust keeps the one equal to it, as its own fetch loop does)
        expected = [r.offset for r in records[:13]] + [r.offset for r in records[12:25]]
        assert offsets == expected
        assert consumer._read_offset[tp] == records[-1].offset

    with tempfile.TemporaryDirectory(prefix="letterlog-worker-") as data:
        asyncio.run(main(data))
