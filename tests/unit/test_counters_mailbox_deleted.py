"""``counters`` on ``Mailbox.Deleted``: a deleted mailbox leaves no cell behind, whether the
log holds the delete after its expunges (as the command appends it now) or before them (as
logs written earlier hold it); a live projection, a projection batch by batch and a fold give
the same table."""

from __future__ import annotations

import pytest

from adapters.tables.memory import InMemoryTableStore
from projections import names as n
from projections.keys import account_row, mailbox_counter_column
from projections.runner import ProjectionRunner
from projections.tablestore import table_digest
from tests.history import History, project

ADA = "ada@example.org"


def _history(deleted_first: bool) -> tuple[History, object, object]:
    h = History()
    archive = h.create_mailbox(ADA, "Archive")
    kept = h.create_mailbox(ADA, "Kept")
    ids = [h.deliver(ADA, "Archive", labels=["work"]) for _ in range(3)]
    h.flag(ids[0], ["\\Seen"])
    h.delete(ids[1])  # soft-deleted: its marker goes with the expunge
    h.deliver(ADA, "Kept")
    h.delete_mailbox(ADA, "Archive", deleted_first=deleted_first)
    return h, archive, kept


@pytest.mark.parametrize("deleted_first", [False, True])
def test_a_deleted_mailbox_has_no_counters_cell(deleted_first: bool) -> None:
    h, archive, kept = _history(deleted_first)
    account = h.account(ADA).id
    row = project(h).get(n.COUNTERS, account_row(account))
    assert mailbox_counter_column(archive) not in row  # type: ignore[arg-type]
    assert row[mailbox_counter_column(kept)].startswith(b"1,")  # type: ignore[arg-type]
    assert row[n.CT_LABEL + b"work"] == b"0,0,0"  # labels are the account's: they stay
    assert not [c for c in row if c.startswith(n.CT_DELETED)]


@pytest.mark.parametrize("deleted_first", [False, True])
@pytest.mark.parametrize("batch_size", [1, 3, 2000])
def test_live_batches_and_a_fold_agree_after_a_mailbox_delete(deleted_first: bool,
                                                              batch_size: int) -> None:
    h, _, _ = _history(deleted_first)
    h.deliver(ADA, "Kept", flags=["\\Seen"])  # the row changes again after the delete
    live = project(h, batch_size=batch_size)
    for cap in (1, 4_000_000):
        rebuilt = InMemoryTableStore()
        runner = ProjectionRunner(rebuilt, fold_max_cells=cap)
        runner.create_tables()
        runner.apply_events(h.events, fold=True)
        assert table_digest(rebuilt, n.COUNTERS) == table_digest(live, n.COUNTERS), cap


def test_a_mailbox_deleted_empty_and_re_applied_changes_nothing() -> None:
    h = History()
    h.create_mailbox(ADA, "Empty")
    h.delete_mailbox(ADA, "Empty")
    store = project(h)
    before = table_digest(store, n.COUNTERS)
    runner = ProjectionRunner(store)
    runner.rewind(0)
    runner.apply_events(h.events)  # every event again: c:pos guards the row
    assert table_digest(store, n.COUNTERS) == before
