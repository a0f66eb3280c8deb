"""The stream projector on the in-memory table store: Kafka-shaped batches of real event
records, in any partitioning and batching, with duplicates and poison, give the tables a fold
of the log gives."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any
from unittest.mock import ANY

import msgpack
import pytest

from adapters.readside.verification import verify_tables
from adapters.streaming.batchstore import BatchStore
from adapters.streaming.projector import (
    Record,
    StreamProjector,
    discard_dead_letter,
    list_dead_letters,
)
from adapters.streaming.redrive import redrive
from adapters.tables.memory import InMemoryTableStore
from projections import names as n
from projections.registry import ALL
from projections.runner import identity
from projections.tablestore import DeleteColumn, Put, TableSpec
from tests.stream_support import (
    TOPIC,
    Log,
    assert_equal_to_fold,
    failing_at,
    messages_event,
    poison,
    story,
)


@pytest.fixture
def history() -> Log:
    h = Log()
    story(h.mail)
    return h


def fresh(**kw: Any) -> tuple[InMemoryTableStore, StreamProjector]:
    store = InMemoryTableStore()
    projector = StreamProjector(store, [TOPIC], sleep=lambda s: None, **kw)
    projector.create_tables()
    return store, projector




def batches(records: list[Record], size: int) -> list[list[Record]]:
    return [records[i:i + size] for i in range(0, len(records), size)]




# -- applying ---------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 7, 1000])
def test_any_batching_gives_the_tables_of_a_fold(history, size):
    store, projector = fresh()
    for batch in batches(history.records(), size):
        projector.apply(batch)
    assert_equal_to_fold(store, history)


def test_batches_decoded_ahead_give_the_same_tables_and_a_mismatched_decode_is_ignored(
        history):
    """The worker decodes a batch while the one before it is written: ``apply(records,
    decode(records))`` is ``apply(records)``; a ``Decoded`` of other records is not used."""
    store, projector = fresh()
    records = history.records()
    records.insert(7, poison(10**6))
    chunks = batches(records, 25)
    ahead = projector.decode(chunks[0])
    for i, chunk in enumerate(chunks):
        result = projector.apply(chunk, ahead)
        assert result.records == len(chunk)
        ahead = projector.decode(chunks[i + 1]) if i + 1 < len(chunks) else None
    assert_equal_to_fold(store, history)
    assert len(list_dead_letters(store)) == 1
    result = projector.apply(chunks[1], projector.decode(chunks[0]))  # not chunks[1]'s
    last = {f"{r.topic}/{r.partition}": r.offset for r in chunks[1]}
    assert result.offsets == last and result.duplicates == len(chunks[1])


def test_partitions_are_tracked_apart_so_a_lagging_one_is_not_skipped(history):
    records = history.records()
    store, projector = fresh()
    ahead = [r for r in records if r.partition != 0]
    behind = [r for r in records if r.partition == 0]
    assert ahead and behind
    projector.apply(ahead)  # partitions 1, 2 reach high positions first
    result = projector.apply(behind)  # partition 0's lower positions still count
    assert result.applied == len(behind) and result.duplicates == 0
    assert_equal_to_fold(store, history)
    rows = {row.decode() for row, _ in store.scan(n.TRACKING)}
    assert f"counters@{TOPIC}/0" in rows and f"messages@{TOPIC}/2" in rows


def test_republished_records_are_skipped_and_change_nothing(history):
    records = history.records()
    store, projector = fresh()
    half = len(records) // 2
    projector.apply(records[:half])
    # the relay crashed before recording its position: the same events again, later offsets
    again = [Record(r.topic, r.partition, r.offset + 10_000, r.value, r.key) for r in records]
    projector.apply(again[half // 2:])
    result = projector.apply(again[:half // 2] + records[half:])
    assert result.duplicates >= half // 2
    assert_equal_to_fold(store, history)


def test_a_worker_that_dies_before_acking_gets_the_batch_again_and_tables_stay_exact(history):
    records = history.records()
    store, projector = fresh()
    projector.apply(records[:20])

    def killed(result):
        raise SystemExit("SIGKILL")

    projector.after_write = killed  # cells written; tracking and offsets not
    with pytest.raises(SystemExit):
        projector.apply(records[20:45])
    restarted = StreamProjector(store, [TOPIC])  # a new worker: runners read tracking again
    restarted.apply(records[20:45])
    restarted.apply(records[45:])
    assert_equal_to_fold(store, history)


def test_tracking_is_written_after_the_data_of_the_batch(history):
    store, projector = fresh()
    seen_tracking_at_hook = []
    projector.after_write = lambda result: seen_tracking_at_hook.append(
        list(store.scan(n.TRACKING)))
    projector.apply(history.records()[:30])
    assert seen_tracking_at_hook == [[]]  # data written, tracking not yet
    assert list(store.scan(n.TRACKING))  # and then it is


class Torn(InMemoryTableStore):
    """An HBase through Thrift1: each version of a batch is its own call. ``tear_at``: the
    n-th apply that holds counters writes only its lowest version, then the process dies."""

    def __init__(self, tear_at: int | None = None) -> None:
        super().__init__()
        self.tear_at = tear_at
        self.counters_applies = 0
        # (thread, table, versions) per apply, in order: one append each, so that entries of
        # concurrent threads cannot be paired with each other's thread
        self.log: list[tuple[int, str, int]] = []

    def apply(self, mutations):
        mutations = list(mutations)
        tables = {m.table for m in mutations}
        for t in sorted(tables):
            self.log.append((threading.get_ident(), t,
                             len({m.version for m in mutations if m.table == t})))
        if n.COUNTERS in tables:
            self.counters_applies += 1
            if self.counters_applies == self.tear_at:
                lowest = min(m.version for m in mutations if m.table == n.COUNTERS)
                super().apply([m for m in mutations if m.version == lowest])
                raise SystemExit("SIGKILL between two Thrift calls")
        super().apply(mutations)


def test_counters_rows_of_several_versions_are_written_through_a_redo_record(history):
    store = Torn()
    projector = StreamProjector(store, [TOPIC])
    projector.create_tables()
    for batch in batches(history.records(), 500):
        projector.apply(batch)
    # partitions are applied by concurrent threads: the order holds within each thread
    multi = 0
    for thread in {t for t, _, _ in store.log}:
        log = [(table, versions) for t, table, versions in store.log if t == thread]
        order = [table for table, _ in log]
        for i, (table, versions) in enumerate(log):
            if table == n.COUNTERS and versions > 1:
                multi += 1  # the redo record goes first, and is deleted right after
                assert order[i - 1] == "stream_redo" and order[i + 1] == "stream_redo"
    assert multi  # batches fold several events into one counters row
    assert list(store.scan("stream_redo")) == []
    assert_equal_to_fold(store, history)


@pytest.mark.parametrize("tear_at", [1, 2, 3])
def test_a_counters_row_torn_by_a_crash_is_completed_by_the_next_worker(history, tear_at):
    records = history.records()
    store = Torn(tear_at)
    projector = StreamProjector(store, [TOPIC], threads=1)
    projector.create_tables()
    with pytest.raises(SystemExit):
        for batch in batches(records, 60):
            projector.apply(batch)
    assert list(store.scan("stream_redo"))  # left behind by the crash
    restarted = StreamProjector(store, [TOPIC], threads=1)  # redelivered from the start
    store.tear_at = None
    for batch in batches(records, 60):
        restarted.apply(batch)
    assert list(store.scan("stream_redo")) == []
    assert_equal_to_fold(store, history)


def test_the_batch_cache_keeps_read_rows_current_with_hbase_semantics():
    store = InMemoryTableStore()
    store.create_table(TableSpec("counters", ("c",), split_by_salt=False))
    cached = BatchStore(store, "tracking", frozenset({"counters"}), "stream_redo")
    store.create_table(TableSpec("stream_redo", ("r",), split_by_salt=False))
    store.apply([Put("counters", b"r", b"c:a", b"1", 5)])
    assert cached.get_cells("counters", b"r") == {b"c:a": (b"1", 5)}
    cached.apply([Put("counters", b"r", b"c:a", b"2", 7), Put("counters", b"r", b"c:b", b"x", 7),
                  DeleteColumn("counters", b"r", b"c:b", 8), Put("counters", b"r", b"c:b", b"y", 8),
                  Put("counters", b"r", b"c:a", b"0", 6)])
    assert cached.get_cells("counters", b"r") == store.get_cells("counters", b"r") == {
        b"c:a": (b"2", 7)}


# -- poison -----------------------------------------------------------------------------------


def test_poison_records_become_dead_letters_and_the_rest_goes_on(history):
    records = history.records()
    store, projector = fresh(attempts=3)
    p0 = [r for r in records if r.partition == 0]
    others = [r for r in records if r.partition != 0]
    bad = [
        poison(p0[-1].offset + 1),  # not msgpack of a record
        poison(p0[-1].offset + 2, msgpack.packb({"p": 10**6, "id": b"\0" * 16, "v": 1,
                                                  "t": "domain.nowhere:Gone", "s": b""})),
        Record("someone-elses-topic", 0, 3, records[0].value, b"k"),
    ]
    result = projector.apply(p0[:5] + bad[:1] + p0[5:] + bad[1:] + others)
    assert result.dead_letters == 3
    assert_equal_to_fold(store, history)
    letters = list_dead_letters(store)
    assert [(d.topic, d.partition, d.offset) for d in letters] == [
        (TOPIC, 0, p0[-1].offset + 1), (TOPIC, 0, p0[-1].offset + 2),
        ("someone-elses-topic", 0, 3)]
    assert "not a letterlog event" in letters[0].error
    assert "domain.nowhere:Gone" in letters[1].error
    assert "someone-elses-topic" in letters[2].error
    assert letters[0].value == bad[0].value and letters[0].times == 1 and letters[0].first_seen






def test_a_projector_failing_on_an_event_is_retried_then_dead_lettered(history):
    records = history.records()
    attempts = []
    target = messages_event(history)
    projections = failing_at(target)
    failing = next(p for p in projections if p.name == "messages").project

    def counting(event, at, read):
        if at == target:
            attempts.append(at)
        return failing(event, at, read)

    projections = tuple(replace(p, project=counting) if p.name == "messages" else p
                        for p in projections)
    store = InMemoryTableStore()
    projector = StreamProjector(store, [TOPIC], projections, attempts=4, sleep=lambda s: None)
    projector.create_tables()
    result = projector.apply(records)
    assert result.dead_letters == 1 and len(attempts) == 1 + 4  # the batch, then 4 tries
    [letter] = list_dead_letters(store)
    assert letter.position == target and "malformed event" in letter.error
    # the other projections applied it (counters too): at most the messages table lacks it
    reports = verify_tables(store, identity, history.events, ALL, history.head)
    assert {r.table for r in reports if not r.identical} <= {"messages"}


def test_redrive_applies_dead_letters_again_and_removes_those_that_succeed(history):
    records = history.records()
    store = InMemoryTableStore()
    target = messages_event(history)
    projector = StreamProjector(store, [TOPIC], failing_at(target), sleep=lambda s: None)
    projector.create_tables()
    projector.apply(records + [poison(10**6)])
    assert len(list_dead_letters(store)) == 2
    assert redrive(store, projections=failing_at(target)) == {
        "redriven": 0, "failed": 2, "details": ANY}
    report = redrive(store)  # the projector is fixed
    assert (report["redriven"], report["failed"]) == (1, 1)
    [left] = list_dead_letters(store)
    # dead-lettered once, then two redrives that failed it again: each one counts
    assert left.offset == 10**6 and left.times == 3
    assert_equal_to_fold(store, history)


def test_a_dead_letter_can_be_discarded(history):
    store, projector = fresh()
    projector.apply([poison(0)])
    discard_dead_letter(store, TOPIC, 0, 0)
    assert list_dead_letters(store) == []


def test_a_record_dead_lettered_twice_keeps_its_first_seen_time():
    clock = iter([1000.0, 2000.0]).__next__
    store = InMemoryTableStore()
    projector = StreamProjector(store, [TOPIC], clock=clock)
    projector.create_tables()
    projector.apply([poison(7)])
    projector.apply([poison(7)])
    [letter] = list_dead_letters(store)
    assert letter.times == 2 and letter.first_seen < letter.last_seen


def test_store_errors_are_not_poison_and_nothing_is_tracked():
    class Down(InMemoryTableStore):
        def apply(self, mutations):
            raise OSError("hbase is down")

    h = Log()
    story(h.mail, rounds=1)
    store = Down()
    projector = StreamProjector(store, [TOPIC])
    projector.create_tables()  # no apply needed
    with pytest.raises(OSError, match="hbase is down"):
        projector.apply(h.records())
    assert list(store.scan(n.TRACKING)) == [] and list_dead_letters(store) == []


# -- lag --------------------------------------------------------------------------------------


def test_lag_in_events_and_seconds(history):
    records = [r for r in history.records() if r.partition == 0]
    store, projector = fresh(clock=lambda: 1e10)
    projector.apply(records[:5])
    last_event_time = history.mail.app.mapper.to_domain_event(
        next(iter(history.app.recorder.select_notifications(
            start=msgpack.unpackb(records[4].value)["p"], limit=1)))).timestamp.timestamp()
    lag = projector.lag({(TOPIC, 0): len(records), (TOPIC, 1): 9}, committed={(TOPIC, 1): 9})
    assert lag["partitions"][f"{TOPIC}/0"]["events"] == len(records) - 5
    assert lag["partitions"][f"{TOPIC}/1"] == {"highwater": 9, "next_offset": 9, "events": 0,
                                               "seconds": 0.0}
    assert lag["events"] == len(records) - 5
    assert lag["seconds"] == pytest.approx(1e10 - last_event_time, abs=0.01)
    projector.apply(records[5:])
    assert projector.lag({(TOPIC, 0): len(records)}) == {
        "events": 0, "seconds": 0.0, "partitions": {f"{TOPIC}/0": {
            "highwater": len(records), "next_offset": len(records), "events": 0,
            "seconds": 0.0}}}
