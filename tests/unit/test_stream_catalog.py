"""Stream workers follow the catalog: after a blue/green rebuild switched tables in, the next
batch writes the new tables (a running worker and one started after the switch alike), and a
partition that applied events to the old tables past the rebuild's position stops with
``HandoverGap`` until a later rebuild covers them, or, given the log to replay from (what the
workers pass), replays those events into the new tables itself, once even if a crash
interrupts it. On the in-memory table store here; the same scenarios run on real HBase in
tests/services/test_stream_catalog_hbase.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from adapters.tables.memory import InMemoryTableStore
from projections import names as n
from projections.tablestore import TableStore
from tests.stream_support import (
    Log,
    follows_a_switch,
    repairs_a_handover_gap,
    stops_at_a_handover_gap,
    story,
    worker,
)

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
