"""The read-side queries: what they return and how much of a table they read to return it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from typing import Any
from uuid import UUID

import pytest

from adapters.tables.memory import InMemoryTableStore
from projections import keys
from projections import names as n
from projections import queries as q
from projections.codec import decode_summary, encode_json
from projections.tablestore import DeleteColumn, Put
from projections.usage import mailbox_usage
from tests.history import History, project

ADA = "ada@example.org"


class RowCountingStore(InMemoryTableStore):
    """An in-memory table store that counts the rows its scans hand out."""

    def __init__(self) -> None:
        super().__init__()
        self.rows_read = 0
        self.scans: list[int | None] = []

    def scan(self, table: str, *, limit: int | None = None,
             columns: Sequence[bytes] | None = None, **kw: Any
             ) -> Iterator[tuple[bytes, dict[bytes, bytes]]]:
        self.scans.append(limit)
        for found in super().scan(table, limit=limit, columns=columns, **kw):
            self.rows_read += 1
            yield found

    def forget(self) -> None:
        self.rows_read, self.scans = 0, []


def inbox_of(messages: int, deleted: Sequence[int] = ()) -> tuple[History, RowCountingStore]:
    """ADA's INBOX with UIDs 1..``messages``; the UIDs in ``deleted`` soft-deleted."""
    h = History()
    ids = [h.deliver(ADA, size=10) for _ in range(messages)]
    for uid in deleted:
        h.delete(ids[uid - 1])
    store = project(h, RowCountingStore())
    store.forget()
    return h, store


def uids(listing: list[q.MessageSummary]) -> list[int]:
    return [m.uid for m in listing]


def test_a_listing_scans_only_the_rows_it_returns() -> None:
    h, store = inbox_of(120)
    listing = q.mailbox_messages(store, h.mailbox_id(ADA, "INBOX"), limit=50)
    assert uids(listing) == list(range(120, 70, -1))
    assert (store.scans, store.rows_read) == ([50], 50)


def test_a_listing_scans_on_past_soft_deleted_messages() -> None:
    h, store = inbox_of(120, deleted=[118, 110, 100, 99, 98])
    inbox = h.mailbox_id(ADA, "INBOX")
    listing = q.mailbox_messages(store, inbox, limit=50)
    expected = [u for u in range(120, 0, -1) if u not in (118, 110, 100, 99, 98)][:50]
    assert uids(listing) == expected
    assert len(store.scans) == 2 and store.rows_read <= 60
    assert [m.state for m in q.mailbox_messages(store, inbox, limit=3, include_deleted=True)
            ] == ["active", "active", "deleted"]  # UIDs 120, 119, 118


def test_pages_follow_one_another_to_the_oldest_message() -> None:
    h, store = inbox_of(30, deleted=[5, 6])
    inbox = h.mailbox_id(ADA, "INBOX")
    seen: list[int] = []
    page = q.mailbox_messages(store, inbox, limit=8)
    while page:
        seen += uids(page)
        page = q.mailbox_messages(store, inbox, limit=8, before_uid=page[-1].uid)
    assert seen == [u for u in range(30, 0, -1) if u not in (5, 6)]


def test_an_empty_listing_reads_nothing() -> None:
    h, store = inbox_of(3)
    inbox = h.mailbox_id(ADA, "INBOX")
    assert q.mailbox_messages(store, inbox, limit=0) == []
    assert q.mailbox_messages(store, inbox, before_uid=1) == []
    assert store.rows_read == 0


def test_a_counters_read_touches_the_counts_not_the_soft_delete_markers() -> None:
    h, store = inbox_of(10, deleted=[2, 4, 6])
    account = h.account(ADA).id
    row = store.get(n.COUNTERS, keys.account_row(account))
    markers = [c for c in row if c.startswith(n.CT_DELETED)]
    assert len(markers) == 3 and all(c.startswith(b"d:") for c in markers)
    counts = store.get(n.COUNTERS, keys.account_row(account), [n.CT_COUNTS])
    assert counts.keys() == row.keys() - set(markers)
    boxes, _ = q.counters(store, account)
    assert boxes[h.mailbox_id(ADA, "INBOX")] == q.Counts(7, 7, 70)


def test_a_listed_summary_equals_one_built_by_the_dataclass_from_the_same_cells() -> None:
    h, store = inbox_of(3, deleted=[2])
    mailbox = h.mailbox_id(ADA, "INBOX")
    listing = q.mailbox_messages(store, mailbox, limit=50, include_deleted=True)
    rows = dict(store.scan(n.MESSAGES, prefix=keys.messages_prefix(mailbox)))
    assert len(listing) == 3
    for summary in listing:
        cells = rows[keys.message_row(mailbox, summary.uid)]
        fields = q.data_fields(cells[n.DATA_FIELDS], cells[n.DATA_SUMMARY])
        expected = q.MessageSummary(
            message_id=UUID(bytes=cells[n.DATA_MESSAGE]), mailbox_id=mailbox, uid=summary.uid,
            modseq=int(cells[n.META_MODSEQ]), state=cells[n.META_STATE].decode(),
            flags=json.loads(cells[n.META_FLAGS]), labels=json.loads(cells[n.META_LABELS]),
            size=fields["size"], internal_date=fields["internal_date"],
            sha256=fields["sha256"], thread_id=UUID(bytes=cells[n.META_THREAD]),
            subject=fields["envelope"]["subject"], sender=fields["envelope"]["from"])
        assert summary == expected and summary.as_dict() == expected.as_dict()
        assert vars(summary).keys() == {f.name for f in dataclasses.fields(q.MessageSummary)}
    assert [m.state for m in listing] == ["active", "deleted", "active"]


def written_before_adr_0028(store: InMemoryTableStore, mailbox: UUID) -> None:
    """Rewrite a mailbox's rows as tables written before ADR 0028 held them: everything in
    ``data:fields`` (the whole envelope too), no ``data:summary``."""
    for row, cells in list(store.scan_cells(n.MESSAGES, prefix=keys.messages_prefix(mailbox))):
        (fields, version), (summary, _) = cells[n.DATA_FIELDS], cells[n.DATA_SUMMARY]
        whole = q.data_fields(fields, summary)
        store.apply([DeleteColumn(n.MESSAGES, row, n.DATA_SUMMARY, version + 1),
                     Put(n.MESSAGES, row, n.DATA_FIELDS, encode_json(whole), version + 1)])


def test_rows_written_before_the_summary_cell_list_and_count_the_same() -> None:
    h = History()
    ids = [h.deliver(ADA, subject=f"m{i}", size=100 + i, labels=["work"]) for i in range(5)]
    h.delete(ids[1])
    store = project(h, RowCountingStore())
    inbox, account = h.mailbox_id(ADA, "INBOX"), h.account(ADA).id
    listed = q.mailbox_messages(store, inbox, include_deleted=True)
    labelled = q.label_messages(store, account, "work")
    usage = mailbox_usage(store, inbox)
    written_before_adr_0028(store, inbox)
    assert all(n.DATA_SUMMARY not in c for _, c in store.scan(n.MESSAGES))
    assert q.mailbox_messages(store, inbox, include_deleted=True) == listed
    assert q.label_messages(store, account, "work") == labelled
    assert mailbox_usage(store, inbox) == usage
    assert [m.subject for m in listed] == ["m4", "m3", "m2", "m1", "m0"]
    assert [m.size for m in listed] == [104, 103, 102, 101, 100]


def test_the_whole_data_of_a_row_reads_back_the_same_from_either_format() -> None:
    h = History()
    h.deliver(ADA, subject="Budget")
    store = project(h)
    inbox = h.mailbox_id(ADA, "INBOX")
    (_, cells), = store.scan(n.MESSAGES, prefix=keys.messages_prefix(inbox))
    whole = q.data_fields(cells[n.DATA_FIELDS], cells[n.DATA_SUMMARY])
    assert whole["envelope"]["subject"] == "Budget" and whole["size"] == 100
    written_before_adr_0028(store, inbox)
    (_, old), = store.scan(n.MESSAGES, prefix=keys.messages_prefix(inbox))
    assert q.data_fields(old[n.DATA_FIELDS], old.get(n.DATA_SUMMARY)) == whole


def test_a_summary_cell_that_is_not_six_items_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="data:summary"):
        decode_summary(b'[1, "2026-01-01"]')
