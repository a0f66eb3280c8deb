"""The faust agent through ``agent.test_context()`` on the in-memory table store: it projects
batches, acknowledges records only after their batch is written, retries a failing store
without acknowledging, and dead-letters poison without stopping."""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from adapters.settings import StreamOptions, load_settings
from adapters.streaming.projector import list_dead_letters
from adapters.streaming.worker import create_app, publish_lag
from adapters.tables.memory import InMemoryTableStore
from tests.unit.test_stream_projector import TOPIC, Log, assert_equal_to_fold, story

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
                         kw.pop("options", OPTIONS), store_factory=lambda: store, **kw)
        app.flow_control.resume()
        async with app.letterlog_agent.test_context() as agent:
            await scenario(app, agent)
            if agent._crash_reason:
                raise agent._crash_reason

    with tempfile.TemporaryDirectory(prefix="letterlog-worker-") as data:
        asyncio.run(main(data))
        assert (Path(data) / "faust").is_dir()  # faust's files stay in the data directory


async def send(agent: Any, records: list[Any]) -> list[Any]:
    return [await agent.put(r.value, key=r.key, partition=r.partition, wait=False)
            for r in records]


def all_acked(events: list[Any]) -> Callable[[], bool]:
    return lambda: all(e.message.acked for e in events)


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
        seen.append((result.records, [e.message.acked for e in events]))

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
                acked_during_failures.extend(e.message.acked for e in events[-10:])
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
        events.append(await agent.put(b"\x00garbage", key=b"k" * 16, partition=0, wait=False))
        events.extend(await send(agent, records[10:]))
        await until(all_acked(events))

    run_agent(store, scenario)
    [letter] = list_dead_letters(store)
    assert letter.topic == TOPIC and letter.value == b"\x00garbage"
    assert "not a letterlog event" in letter.error
    assert_equal_to_fold(store, history)


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
