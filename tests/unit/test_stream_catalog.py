"""Stream workers follow the catalog: after a blue/green rebuild switched tables in, the next
batch writes the new tables (a running worker and one started after the switch alike), and a
partition that applied events to the old tables past the rebuild's position stops with
``HandoverGap`` until a later rebuild covers them, or, given the log to replay from (what the
workers pass), replays those events into the new tables itself, once even if a crash
interrupts it. On the in-memory table store here; the same scenarios run on real HBase in
tests/services/test_stream_catalog_hbase.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from adapters.readside.host import Catalog, ProjectionHost, verify_tables
from adapters.streaming.projector import HandoverGap, StreamProjector
from adapters.tables.memory import InMemoryTableStore
from projections import names as n
from projections.registry import ALL
from projections.tablestore import TableStore, table_digest
from tests.stream_support import TOPIC, Log, story


def worker(store: TableStore, replay: Any = None) -> StreamProjector:
    projector = StreamProjector(store, [TOPIC], sleep=lambda s: None, catalog=Catalog(store),
                                replay=replay)
    projector.create_tables()
    return projector


def rebuild(store: TableStore, history: Log, head: int | None = None) -> dict[str, Any]:
    """A blue/green rebuild of every projection (the HBase way: the host is not live) that
    sees the log only up to ``head`` (default: all of it), as if that were its head then."""
    cut = history.head if head is None else head

    def events(start: int = 1, stop: int | None = None) -> Iterator[tuple[int, Any]]:
        return history.events(start, cut if stop is None else min(stop, cut))

    host = ProjectionHost(store, events, None, lambda: cut, live=False)
    return host.rebuild(fold=host._fold)


def assert_switched_tables_equal_a_fold(store: TableStore, history: Log) -> None:
    catalog = Catalog(store)
    catalog.refresh()
    reports = verify_tables(store, catalog.physical, history.events, ALL, history.head)
    assert [r.table for r in reports if not r.identical] == [], [
        r.differences for r in reports if not r.identical]


def follows_a_switch(store: TableStore, restarted: bool) -> None:
    history = Log()
    story(history.mail)
    before = history.records()
    projector = worker(store)
    projector.apply(before)
    result = rebuild(store, history)
    assert result["position"] == history.head
    old = {t: table_digest(store, t).sha256 for t in (n.MESSAGES, n.COUNTERS)}
    story(history.mail, rounds=1, first=2)  # more mail after the switch
    after = history.records()[len(before):]
    if restarted:
        projector = worker(store)  # a worker started after the switch
    projector.apply(after)
    assert projector.physical(n.MESSAGES) == result["tables"][n.MESSAGES]
    assert_switched_tables_equal_a_fold(store, history)
    # the old tables got nothing more
    assert {t: table_digest(store, t).sha256 for t in old} == old


def stops_at_a_handover_gap(store: TableStore) -> None:
    history = Log()
    story(history.mail)
    cut = history.head - 12
    projector = worker(store)
    projector.apply(history.records())  # the old tables, up to the head
    rebuild(store, history, head=cut)  # its catch-up read the log before the last 12 events
    story(history.mail, rounds=1, first=2)
    with pytest.raises(HandoverGap) as caught:
        projector.apply(history.records())
    assert f"start from position {cut}" in str(caught.value)
    assert f"positions {cut + 1}.." in str(caught.value)
    rebuild(store, history)  # a later rebuild catches up past them
    projector.apply(history.records())
    assert_switched_tables_equal_a_fold(store, history)


class Interrupted(RuntimeError):
    pass


def repairs_a_handover_gap(store: TableStore) -> None:
    history = Log()
    story(history.mail)
    cut = history.head - 12
    replayed: list[tuple[int, int]] = []
    crash = {"after": 5}  # the first replay dies after 5 events (a killed worker)

    def replay(first: int, last: int) -> Iterator[tuple[int, Any]]:
        replayed.append((first, last))
        for i, item in enumerate(history.events(first, last)):
            if crash["after"] is not None and i == crash["after"]:
                crash["after"] = None
                raise Interrupted("killed mid-replay")
            yield item

    projector = worker(store, replay)
    projector.apply(history.records())  # the old tables, up to the head
    result = rebuild(store, history, head=cut)  # its catch-up missed the last 12 events
    story(history.mail, rounds=1, first=2)
    with pytest.raises(Interrupted):
        projector.apply(history.records())
    restarted = worker(store, replay)  # repairs it again, then dies before its tracking

    def die(result: Any) -> None:
        raise Interrupted("killed after the batch's data, before its tracking")

    restarted.after_write = die
    with pytest.raises(Interrupted):
        restarted.apply(history.records())
    assert len(replayed) >= 2 and all(r[0] == cut + 1 for r in replayed)  # once per gap
    repairs = len(replayed)
    worker(store, replay).apply(history.records())  # the repairs were recorded: none again
    assert len(replayed) == repairs
    assert_switched_tables_equal_a_fold(store, history)  # nothing lost, counters not doubled
    catalog = Catalog(store)
    catalog.refresh()
    stamps = {cells[n.TR_GENERATION] for row, cells in store.scan(catalog.physical(n.TRACKING))
              if b"@" in row}
    assert stamps == {b"%d" % result["generation"]}


StoreFactory = Callable[[], TableStore]


@pytest.mark.parametrize("restarted", [False, True], ids=["running", "restarted"])
def test_a_worker_writes_the_tables_a_rebuild_switched_in(restarted):
    follows_a_switch(InMemoryTableStore(), restarted)


def test_a_partition_that_applied_past_the_switch_position_stops_until_a_rebuild_covers_it():
    stops_at_a_handover_gap(InMemoryTableStore())


def test_a_worker_given_the_log_replays_a_handover_gap_once_even_across_a_crash():
    repairs_a_handover_gap(InMemoryTableStore())


def test_tracking_rows_carry_the_generation_they_were_written_in():
    store = InMemoryTableStore()
    history = Log()
    story(history.mail, rounds=1)
    projector = worker(store)
    projector.apply(history.records())
    rows = dict(store.scan(n.TRACKING))
    assert rows and all(cells[n.TR_GENERATION] == b"0" for cells in rows.values())
