"""The read models, one story per behaviour: events from ``History`` through the runner into
an in-memory table store, then read back the way a client would."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest

from adapters.tables.memory import InMemoryTableStore
from domain.errors import CorruptEvent
from domain.message import Message
from projections import keys
from projections import names as n
from projections.codec import (
    data_fields,
    decode_counters,
    decode_datetime,
    decode_names,
    decode_ref,
)
from projections.registry import TABLE_SPECS
from projections.runner import ProjectionRunner
from projections.tablestore import table_digest
from tests.history import History, project

ADA = "ada@example.org"
BOB = "bob@example.org"


def body_at(h: History, fields: dict[str, Any]) -> bytes:
    """An inline body where the row says it is: in the event at ``body_event``."""
    body: bytes = dict(h.events)[fields["body_event"]].personal["body"]
    return body


def listing(store: InMemoryTableStore, mailbox_id: UUID) -> list[int]:
    rows = store.scan(n.MESSAGES, prefix=keys.messages_prefix(mailbox_id))
    return [keys.message_row_parts(row)[1] for row, _ in rows]


def message_row(store: InMemoryTableStore, h: History, message_id: UUID) -> dict[bytes, bytes]:
    m = h.messages[message_id]
    return store.get(n.MESSAGES, keys.message_row(m.mailbox, m.uid))


def counts(store: InMemoryTableStore, h: History, address: str) -> Any:
    row = store.get(n.COUNTERS, keys.account_row(h.account(address).id))
    return decode_counters(row)


def labelled(store: InMemoryTableStore, h: History, address: str, label: str) -> list[UUID]:
    prefix = keys.label_prefix(h.account(address).id, label)
    return [keys.label_row_message(row) for row, _ in store.scan(n.LABEL_INDEX, prefix=prefix)]


# -- messages ---------------------------------------------------------------------------------


def test_a_mailbox_lists_newest_first() -> None:
    h = History()
    ids = [h.deliver(ADA, subject=f"m{i}") for i in range(3)]
    store = project(h)
    assert listing(store, h.mailbox_id(ADA, "INBOX")) == [3, 2, 1]
    row = message_row(store, h, ids[0])
    assert row[n.DATA_MESSAGE] == ids[0].bytes
    assert row[n.META_STATE] == b"active"
    fields = data_fields(row[n.DATA_FIELDS], row[n.DATA_SUMMARY])
    assert body_at(h, fields).startswith(b"Subject: m0\r\n")
    assert fields["envelope"]["subject"] == "m0"
    assert fields["account"] == str(h.account(ADA).id) and fields["inline"] is True
    assert set(row) == {n.META_FLAGS, n.META_LABELS, n.META_MODSEQ, n.META_STATE, n.META_THREAD,
                        n.META_POLICY, n.META_EXTRACTS, n.DATA_MESSAGE, n.DATA_SUMMARY,
                        n.DATA_FIELDS}


def test_a_message_row_holds_what_a_listing_shows_in_one_small_cell_and_nothing_twice() -> None:
    h = History()
    m = h.deliver(ADA, subject="Quarterly figures", size=1234)
    row = message_row(project(h), h, m)
    size, internal_date, sha256, subject, sender, truncated = json.loads(row[n.DATA_SUMMARY])
    sent = h.messages[m]
    assert (size, subject, truncated) == (1234, "Quarterly figures", [])
    assert sender == dict(h.events)[fields_of(row)["body_event"]].personal["envelope"]["from"]
    assert decode_datetime(internal_date.encode()) == sent.internal_date and len(sha256) == 64
    rest = json.loads(row[n.DATA_FIELDS])  # what the summary holds is not stored again
    assert not {"size", "internal_date", "sha256"} & rest.keys()
    assert not {"subject", "from"} & rest["envelope"].keys() and "sent_at" in rest["envelope"]
    assert len(row[n.DATA_SUMMARY]) < 200


def fields_of(row: dict[bytes, bytes]) -> dict[str, Any]:
    return data_fields(row[n.DATA_FIELDS], row[n.DATA_SUMMARY])


def test_a_flag_change_updates_meta_and_modseq_and_leaves_data_alone() -> None:
    h = History()
    m = h.deliver(ADA)
    h.flag(m, ["\\Seen"])
    store = project(h)
    cells = store.get_cells(n.MESSAGES, keys.message_row(h.mailbox_id(ADA, "INBOX"), 1))
    last = len(h.events)
    assert decode_names(cells[n.META_FLAGS][0]) == ["\\Seen"]
    assert cells[n.META_MODSEQ] == (str(last).encode(), last)
    assert cells[n.DATA_FIELDS][1] < last  # written at delivery, never again


def test_a_soft_deleted_message_keeps_its_row_and_an_expunged_one_loses_it() -> None:
    h = History()
    kept, gone = h.deliver(ADA), h.deliver(ADA)
    h.delete(kept)
    h.expunge(gone)
    store = project(h)
    assert message_row(store, h, kept)[n.META_STATE] == b"deleted"
    assert message_row(store, h, gone) == {}
    assert listing(store, h.mailbox_id(ADA, "INBOX")) == [1]


def test_a_move_rewrites_the_row_under_the_new_mailbox_and_uid() -> None:
    h = History()
    h.create_mailbox(ADA, "Archive")
    m = h.deliver(ADA, flags=["\\Seen"], labels=["work"])
    h.move(m, "Archive")
    store = project(h)
    assert listing(store, h.mailbox_id(ADA, "INBOX")) == []
    assert listing(store, h.mailbox_id(ADA, "Archive")) == [1]
    row = message_row(store, h, m)
    fields = fields_of(row)
    assert fields["body_event"] == len(h.events)  # the move's own event carries the body
    assert body_at(h, fields).startswith(b"Subject: Hello")
    assert decode_names(row[n.META_LABELS]) == ["work"]
    internal_date = fields_of(row)["internal_date"]
    assert decode_datetime(internal_date.encode()) == h.messages[m].internal_date


def test_an_upload_has_no_row_until_it_completes() -> None:
    h = History()
    m = h.begin_upload(ADA)
    h.append_chunk(m, 70_000)
    store = project(h)
    assert listing(store, h.mailbox_id(ADA, "INBOX")) == []
    h.complete_upload(m)
    store = project(h)
    row = message_row(store, h, m)
    fields = fields_of(row)
    assert fields["inline"] is False and "body_event" not in fields
    assert fields["size"] == 70000


# -- mailboxes and names ----------------------------------------------------------------------


def test_a_mailbox_row_follows_uids_modseq_renames_and_deletion() -> None:
    h = History()
    box = h.create_mailbox(ADA, "Lists")
    h.deliver(ADA, "Lists")
    h.deliver(ADA, "Lists")
    touched = len(h.events)
    h.deliver(ADA)  # another mailbox: Lists' highest modseq stays
    store = project(h)
    row = store.get(n.MAILBOXES, keys.mailbox_row(box))
    assert row[n.MB_NAME] == b"Lists" and row[n.MB_UIDNEXT] == b"3"
    assert row[n.MB_HIGHESTMODSEQ] == str(touched).encode()
    assert row[n.MB_DELETED] == b"0" and row[n.MB_ACCOUNT] == h.account(ADA).id.bytes
    h.rename_mailbox(ADA, "Lists", "Lists/2026")
    h.delete_mailbox(ADA, "Lists/2026")
    row = project(h).get(n.MAILBOXES, keys.mailbox_row(box))
    assert row[n.MB_NAME] == b"Lists/2026" and row[n.MB_DELETED] == b"1"
    assert row[n.MB_UIDVALIDITY] == str(h.mailboxes[box].uidvalidity).encode()


def test_mailbox_names_follow_create_rename_and_delete() -> None:
    h = History()
    h.create_mailbox(ADA, "Drafts", "drafts")
    h.create_mailbox(ADA, "Old")
    h.rename_mailbox(ADA, "Old", "Older")
    h.delete_mailbox(ADA, "Drafts")
    store = project(h)
    prefix = keys.mailbox_names_prefix(h.account(ADA).id)
    names = {row[17:].decode(): UUID(bytes=cells[n.MN_MAILBOX])
             for row, cells in store.scan(n.MAILBOX_NAMES, prefix=prefix)}
    assert names == {"INBOX": h.mailbox_id(ADA, "INBOX"), "Older": h.mailbox_id(ADA, "Older")}


# -- label index, threads ---------------------------------------------------------------------


def test_the_label_index_lists_newest_first_and_follows_label_changes() -> None:
    h = History()
    a, b, c = (h.deliver(ADA, labels=["work"]) for _ in range(3))
    h.label(b, remove=["work"])
    h.label(a, add=["urgent"])
    store = project(h)
    assert labelled(store, h, ADA, "work") == [c, a]
    assert labelled(store, h, ADA, "urgent") == [a]


def test_the_label_index_drops_deleted_messages_and_takes_restored_ones_back() -> None:
    h = History()
    h.create_mailbox(ADA, "Archive")
    a, b = h.deliver(ADA, labels=["work"]), h.deliver(ADA, labels=["work"])
    h.delete(a)
    h.delete(b)
    h.restore(b)
    h.move(b, "Archive")
    store = project(h)
    assert labelled(store, h, ADA, "work") == [b]
    cells = store.get(n.LABEL_INDEX, keys.label_row(h.account(ADA).id, "work", b))
    assert decode_ref(cells[n.IX_REF]) == (h.mailbox_id(ADA, "Archive"), 1)


def test_a_reply_joins_its_thread_and_threads_list_newest_first() -> None:
    h = History()
    first = h.deliver(ADA)
    other = h.deliver(ADA)
    reply = h.deliver(ADA, reply_to=first)
    store = project(h)
    thread = h.messages[first].thread
    found = [keys.thread_row_message(r) for r, _ in store.scan(n.THREADS,
                                                                prefix=keys.thread_prefix(thread))]
    assert found == [reply, first]
    assert other not in found
    h.expunge(reply)
    store = project(h)
    assert [keys.thread_row_message(r) for r, _ in store.scan(
        n.THREADS, prefix=keys.thread_prefix(thread))] == [first]


# -- counters ---------------------------------------------------------------------------------


def test_counters_count_messages_unread_and_bytes_per_mailbox_and_label() -> None:
    h = History()
    h.deliver(ADA, size=100, labels=["work"])
    h.deliver(ADA, size=200, flags=["\\Seen"], labels=["work", "home"])
    boxes, labels = counts(project(h), h, ADA)
    assert boxes[h.mailbox_id(ADA, "INBOX")] == (2, 1, 300)
    assert labels == {"work": (2, 1, 300), "home": (1, 0, 200)}


def test_counters_follow_flags_moves_deletes_restores_and_expunges() -> None:
    h = History()
    h.create_mailbox(ADA, "Archive")
    inbox, archive = h.mailbox_id(ADA, "INBOX"), h.mailbox_id(ADA, "Archive")
    a = h.deliver(ADA, size=10, labels=["work"])
    b = h.deliver(ADA, size=20, labels=["work"])
    c = h.deliver(ADA, size=40)
    h.flag(a, ["\\Seen"])
    h.move(b, "Archive")
    h.delete(c)
    h.expunge(c)  # expunging a soft-deleted message does not count it twice
    boxes, labels = counts(project(h), h, ADA)
    assert boxes[inbox] == (1, 0, 10) and boxes[archive] == (1, 1, 20)
    assert labels["work"] == (2, 1, 30)
    h.delete(a)
    h.restore(a)
    h.flag(a, ["\\Seen"], mode="remove")
    h.label(a, remove=["work"])
    h.expunge(b)
    boxes, labels = counts(project(h), h, ADA)
    assert boxes[inbox] == (1, 1, 10) and boxes[archive] == (0, 0, 0)
    assert labels["work"] == (0, 0, 0)


def test_counters_are_exact_when_events_are_applied_again() -> None:
    h = History()
    for i in range(5):
        h.deliver(ADA, size=10, labels=["work"] if i % 2 else [])
    store = InMemoryTableStore()
    runner = ProjectionRunner(store)
    runner.create_tables()
    runner.apply_events(h.events)
    before = {t.name: table_digest(store, t.name) for t in TABLE_SPECS}
    runner.rewind(0)
    runner.apply_events(h.events)
    runner.rewind(3)
    runner.apply_events(h.events[5:] + h.events)
    assert {t.name: table_digest(store, t.name) for t in TABLE_SPECS} == before
    assert counts(store, h, ADA)[0][h.mailbox_id(ADA, "INBOX")] == (5, 5, 50)


def test_counters_see_their_own_pending_writes_within_a_batch() -> None:
    h = History()
    for _ in range(20):
        h.flag(h.deliver(ADA, size=1), ["\\Seen"])
    one_by_one = project(h, batch_size=1)
    in_one_batch = project(h, batch_size=10_000)
    assert counts(in_one_batch, h, ADA) == counts(one_by_one, h, ADA)
    assert table_digest(in_one_batch, n.COUNTERS) == table_digest(one_by_one, n.COUNTERS)


# -- subscriptions, accounts, payload refs ------------------------------------------------------


def test_subscriptions_hold_one_column_per_subscribed_name() -> None:
    h = History()
    for name in ("INBOX", "Lists", "Old"):
        h.subscribe(ADA, name)
    h.unsubscribe(ADA, "Old")
    row = project(h).get(n.SUBSCRIPTIONS, keys.account_row(h.account(ADA).id))
    assert sorted(row) == [keys.subscription_column("INBOX"), keys.subscription_column("Lists")]


def test_accounts_hold_the_address_and_label_attributes() -> None:
    h = History()
    h.deliver(ADA, labels=["work", "tmp"])
    h.set_label_attributes(ADA, "work", {"colour": "red"})
    h.remove_label(ADA, "tmp")
    row = project(h).get(n.ACCOUNTS, keys.account_row(h.account(ADA).id))
    assert row == {n.ACC_ADDRESS: ADA.encode(), keys.label_column("work"): b'{"colour":"red"}'}


def test_payload_refs_hold_one_column_per_message_sharing_a_large_payload() -> None:
    h = History()
    h.create_mailbox(ADA, "Copies")
    big = h.deliver(ADA, size=50_000, inline=False)
    copy = h.copy(big, "Copies")
    h.deliver(ADA, size=10)  # inline: no payload in the payload store
    store = project(h)
    rows = list(store.scan(n.PAYLOAD_REFS))
    assert len(rows) == 1
    row, cells = rows[0]
    assert row == h.messages[big].sha256.encode()
    assert sorted(cells) == sorted(keys.payload_ref_column(m) for m in (big, copy))


# -- purge queue -------------------------------------------------------------------------------


def queue(store: InMemoryTableStore, name: str) -> list[tuple[UUID, str, Any]]:
    out = []
    for shard in range(keys.PURGE_SHARDS):
        for row, cells in store.scan(n.PURGE_QUEUE, prefix=keys.purge_shard_prefix(name, shard)):
            q, s, bucket, message = keys.purge_row_parts(row)
            assert (q, s) == (name, shard) and cells[n.PQ_MESSAGE] == message.bytes
            since = decode_datetime(cells[n.PQ_SINCE])
            assert bucket == keys.minute_bucket(since)
            out.append((message, cells[n.PQ_REASON].decode(), since))
    return sorted(out)


def test_purge_queue_entries_count_from_when_each_message_became_purgeable() -> None:
    h = History()
    t0 = h.now
    deleted, expunged, counted, until = (h.deliver(ADA) for _ in range(4))
    h.delete(deleted)
    h.expunge(expunged)
    h.set_policy(counted, limit=1)
    h.set_policy(until, until=t0 + timedelta(days=3))
    h.tick(hours=1)
    h.extract(counted)
    upload = h.begin_upload(ADA)
    store = project(h)
    assert queue(store, n.QUEUE_DELETED) == sorted([
        (deleted, "deleted", t0), (expunged, "expunged", t0)])
    assert queue(store, n.QUEUE_EXPIRED) == [(counted, "limit", h.now)]
    assert queue(store, n.QUEUE_EXPIRING) == [(until, "until", t0 + timedelta(days=3))]
    assert queue(store, n.QUEUE_INCOMPLETE) == [(upload, "incomplete", h.now)]


def test_a_policy_that_has_already_passed_queues_the_message_as_expired() -> None:
    h = History()
    m = h.deliver(ADA)
    h.tick(days=1)
    h.set_policy(m, until=h.now - timedelta(hours=1))
    assert queue(project(h), n.QUEUE_EXPIRED) == [(m, "policy", h.now)]


# -- the runner --------------------------------------------------------------------------------


def test_the_runner_tracks_each_projection_in_the_same_write() -> None:
    h = History()
    h.deliver(ADA)
    store = project(h)
    runner = ProjectionRunner(store)
    assert runner.positions() == {p: len(h.events) for p in runner.positions()}
    assert runner.apply_events(h.events) == 0  # all seen: nothing applied


def test_a_foreign_event_is_corrupt_and_named() -> None:
    @dataclass
    class Stranger:
        originator_id: UUID
        originator_version: int

    h = History()
    h.deliver(ADA)
    stranger = Stranger(uuid4(), 7)
    store = InMemoryTableStore()
    runner = ProjectionRunner(store)
    runner.create_tables()
    with pytest.raises(CorruptEvent) as caught:
        runner.apply_events([*h.events, (len(h.events) + 1, stranger)])
    text = str(caught.value)
    assert f"position {len(h.events) + 1}" in text
    assert str(stranger.originator_id) in text and "version 7" in text
    assert runner.position() == len(h.events)  # what came before it was written


def test_a_malformed_event_is_corrupt_not_skipped() -> None:
    h = History()
    m = h.deliver(ADA)
    position, good = h.events[-1]
    fields = {f: getattr(good, f) for f in good.__dataclass_fields__}
    bad = Message.Delivered(**{**fields, "uid": "seven"})
    runner = ProjectionRunner(InMemoryTableStore())
    runner.create_tables()
    with pytest.raises(CorruptEvent, match=f"position {position}: aggregate {m} version 1"):
        runner.apply_events([*h.events[:-1], (position, bad)])
    assert runner.position() == position - 1


def test_physical_names_redirect_every_table() -> None:
    h = History()
    h.deliver(ADA, labels=["work"])
    store = InMemoryTableStore()
    runner = ProjectionRunner(store, physical=lambda name: f"{name}__green")
    runner.create_tables()
    runner.apply_events(h.events)
    assert store.list_tables() == sorted(f"{t.name}__green" for t in TABLE_SPECS)
    assert listing_rows(store, "messages__green") == 1
    assert ProjectionRunner(store, physical=lambda t: f"{t}__green").position() == len(h.events)


def listing_rows(store: InMemoryTableStore, table: str) -> int:
    return sum(1 for _ in store.scan(table))


def test_a_fold_rebuild_equals_the_live_tables() -> None:
    h = History()
    h.create_mailbox(ADA, "Archive")
    ids = [h.deliver(ADA if i % 3 else BOB, labels=["x"] if i % 2 else []) for i in range(12)]
    h.move(ids[1], "Archive")
    h.delete(ids[2])
    h.restore(ids[2])
    h.label(ids[4], remove=["x"], add=["y"])
    h.expunge(ids[5])
    h.subscribe(ADA, "Archive")
    h.unsubscribe(ADA, "Archive")
    live = project(h, batch_size=3)
    rebuilt = InMemoryTableStore()
    runner = ProjectionRunner(rebuilt)
    runner.create_tables()
    runner.apply_events(h.events, fold=True)
    for spec in TABLE_SPECS:
        assert table_digest(rebuilt, spec.name) == table_digest(live, spec.name), spec.name


@pytest.mark.parametrize("cap", [1, 7, 4_000_000])
def test_a_fold_keeps_counters_in_memory_with_the_cells_a_live_projection_writes(cap: int) -> None:
    """``counters`` runs through ``CounterFold`` in a fold: counts, guard and deleted markers
    (marked, unmarked, marked again, expunged while marked) as the live tables have them,
    whether the fold drains once at the end or after every few cells (``cap``)."""
    h = History()
    h.create_mailbox(ADA, "Archive")
    ids = [h.deliver(ADA, labels=["x"] if i % 2 else [], size=100 + i) for i in range(6)]
    h.flag(ids[0], ["\\Seen"])
    h.delete(ids[1])
    h.restore(ids[1])
    h.delete(ids[1])
    h.delete(ids[2])
    h.expunge(ids[2])
    h.move(ids[3], "Archive")
    h.label(ids[4], add=["y"])
    h.delete(ids[5])
    h.restore(ids[5])
    live = project(h, batch_size=2)
    rebuilt = InMemoryTableStore()
    runner = ProjectionRunner(rebuilt, fold_max_cells=cap)
    runner.create_tables()
    runner.apply_events(h.events, fold=True)
    assert table_digest(rebuilt, n.COUNTERS) == table_digest(live, n.COUNTERS)
    row = rebuilt.get(n.COUNTERS, h.account(ADA).id.bytes)
    assert keys.deleted_marker_column(ids[1]) in row  # deleted again: marked
    assert keys.deleted_marker_column(ids[5]) not in row  # restored
    last, restored = h.events[-1]
    assert type(restored) is Message.Restored
    assert int(row[n.CT_POS]) == last  # the guard: the last event that changed the row


def test_untracked_folds_of_disjoint_accounts_share_tables_and_record_no_position() -> None:
    """The Spark rebuild's tasks: one account's events each, one after another into the same
    fresh tables. A task must not skip its events because another task got further."""
    from adapters.eventlog.records import account_of

    h = History()
    h.create_mailbox(ADA, "Archive")
    ids = [h.deliver(ADA if i % 3 else BOB, labels=["x"] if i % 2 else []) for i in range(9)]
    h.move(ids[1], "Archive")
    h.flag(ids[3], ["\\Seen"])
    h.expunge(ids[4])
    live = project(h)
    shared = InMemoryTableStore()
    ProjectionRunner(shared).create_tables()
    for account in (h.account(BOB).id, h.account(ADA).id):  # BOB's part ends later in the log
        task = ProjectionRunner(shared, track=False)
        task.apply_events([(p, e) for p, e in h.events if account_of(e) == account], fold=True)
    for spec in TABLE_SPECS:
        if spec.name != n.TRACKING:
            assert table_digest(shared, spec.name) == table_digest(live, spec.name), spec.name
    assert ProjectionRunner(shared).position() == 0


def test_a_fold_into_green_tables_matches_the_live_blue_ones() -> None:
    h = History()
    a = h.deliver(ADA, labels=["x"])
    h.expunge(h.deliver(ADA))
    h.flag(a, ["\\Seen"])
    store = project(h)
    green = ProjectionRunner(store, physical=lambda name: f"{name}.green")
    green.create_tables()
    green.apply_events(h.events, fold=True)
    for spec in TABLE_SPECS:
        assert table_digest(store, f"{spec.name}.green") == table_digest(store, spec.name)


def test_a_fold_stops_just_before_a_corrupt_event() -> None:
    h = History()
    h.deliver(ADA)
    position, good = h.events[-1]
    fields = {f: getattr(good, f) for f in good.__dataclass_fields__}
    bad = Message.Delivered(**{**fields, "size": None})
    store = InMemoryTableStore()
    runner = ProjectionRunner(store)
    runner.create_tables()
    with pytest.raises(CorruptEvent, match=f"position {position}"):
        runner.apply_events([*h.events[:-1], (position, bad)], fold=True)
    assert runner.position() == position - 1
    assert ProjectionRunner(store).position() == position - 1  # tracked in the store


@pytest.mark.parametrize("fold", [False, True])
def test_apply_events_reports_progress_every_batch_and_at_the_end(fold: bool) -> None:
    h = History()
    for _ in range(4):
        h.deliver(ADA)
    store = InMemoryTableStore()
    runner = ProjectionRunner(store, batch_size=3)
    runner.create_tables()
    seen: list[int] = []
    runner.apply_events(h.events, fold=fold, progress=seen.append)
    total = len(h.events)
    assert total > 6 and seen == [*range(3, total + 1, 3), total]  # every 3, then the end
    assert runner.position() == h.events[-1][0]


def test_a_fold_never_gives_a_folder_an_event_another_projection_rejects() -> None:
    """A folder (``counters``) keeps an event's effect at once, so the runner calls it after
    the event's other projectors: an event one of them rejects as corrupt leaves no trace
    in the folder's tables, and what came before it is written."""
    from dataclasses import replace

    from projections.registry import ALL
    from projections.threads import project as threads_project

    h = History()
    h.deliver(ADA)
    h.deliver(ADA)
    bad_position = h.events[-1][0]

    def threads_failing_at_the_last(event: Any, position: int, read: Any) -> Any:
        if position == bad_position:
            raise ValueError("a projector rejecting the event")
        return threads_project(event, position, read)

    projections = tuple(replace(p, project=threads_failing_at_the_last)
                        if p.name == "threads" else p for p in ALL)
    assert [p.name for p in projections].index("counters") < [
        p.name for p in projections].index("threads")  # counters comes first in the list
    store = InMemoryTableStore()
    runner = ProjectionRunner(store, projections)
    runner.create_tables()
    with pytest.raises(CorruptEvent, match=f"position {bad_position}"):
        runner.apply_events(h.events, fold=True)
    row = store.get(n.COUNTERS, h.account(ADA).id.bytes)
    assert int(row[n.CT_POS]) < bad_position  # the rejected delivery was not counted
    messages, _, _ = (int(x) for x in row[keys.mailbox_counter_column(
        h.mailbox_id(ADA, "INBOX"))].split(b","))
    assert messages == 1  # the delivery before it was
