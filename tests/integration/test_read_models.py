"""The embedded store's read models: current when a command returns, rebuildable, verifiable."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from adapters.embedded import Letterlog
from domain.errors import CorruptEvent, MailboxNotFound
from tests.factories import make_mail

ADA = "ada@example.org"


@pytest.fixture
def store(tmp_path):
    s = Letterlog.open(tmp_path / "data", durability="normal")
    yield s
    s.close()


def deliver(store, n, **kw):
    return [store.deliver(account=ADA, raw=make_mail(f"m{i}", message_id=f"<{i}@x>"), **kw)
            for i in range(n)]


def test_a_reader_sees_its_own_writes(store):
    [d] = deliver(store, 1)
    store.flag(d.message_id, ["\\Seen"])
    [row] = store.messages(ADA)
    assert row.flags == ["\\Seen"] and row.uid == d.uid
    assert store.counters(ADA)["mailboxes"]["INBOX"] == {"messages": 1, "unread": 0,
                                                          "bytes": d.size}


def test_listing_is_newest_first_and_pages_by_uid(store):
    deliver(store, 7)
    first = store.messages(ADA, limit=3)
    second = store.messages(ADA, limit=3, before_uid=first[-1].uid)
    assert [m.uid for m in first] == [7, 6, 5]
    assert [m.uid for m in second] == [4, 3, 2]


def test_soft_deleted_messages_leave_listing_and_counters_until_restored(store):
    a, b = deliver(store, 2)
    store.delete(a.message_id)
    assert [m.uid for m in store.messages(ADA)] == [b.uid]
    assert store.counters(ADA)["mailboxes"]["INBOX"]["messages"] == 1
    store.restore(a.message_id)
    assert [m.uid for m in store.messages(ADA)] == [b.uid, a.uid]


def test_move_updates_both_mailboxes_and_label_index(store):
    store.create_mailbox(ADA, "Archive", create_account=True)
    [d] = deliver(store, 1, labels=["work"])
    store.move(d.message_id, "Archive")
    assert store.messages(ADA) == []
    [moved] = store.messages(ADA, "Archive")
    [labelled] = store.label_messages(ADA, "work")
    assert labelled.mailbox_id == moved.mailbox_id and labelled.uid == moved.uid
    c = store.counters(ADA)["mailboxes"]
    assert c["Archive"]["messages"] == 1 and c["INBOX"]["messages"] == 0


def test_thread_groups_replies(store):
    root = store.deliver(account=ADA, raw=make_mail("Plan", message_id="<r@x>"))
    store.deliver(account=ADA, raw=make_mail("Re: Plan", message_id="<a@x>",
                                             in_reply_to="<r@x>", references="<r@x>"))
    store.deliver(account=ADA, raw=make_mail("Other", message_id="<o@x>"))
    tid = store.show(root.message_id)["thread_id"]
    from uuid import UUID
    subjects = [m.subject for m in store.thread(UUID(tid))]
    assert subjects == ["Re: Plan", "Plan"]


def test_mailbox_status_reports_uidnext_and_highest_modseq(store):
    a, b = deliver(store, 2)
    change = store.flag(a.message_id, ["\\Seen"])
    st = store.mailbox_status(ADA)
    assert (st["uidnext"], st["highestmodseq"], st["unseen"]) == (3, change.modseq, 1)


def test_subscriptions_and_purge_queue(store):
    store.create_mailbox(ADA, "Lists", create_account=True)
    store.subscribe(ADA, "Lists")
    assert store.subscriptions(ADA) == ["Lists"]
    [d] = deliver(store, 1)
    store.expunge([d.message_id])
    assert store.purge_due() == []  # due after the deleted-retention period
    entries = store.purge_due(datetime.now(UTC) + timedelta(days=31))
    assert [(e.queue, e.message_id) for e in entries] == [("deleted", d.message_id)]


def test_large_bodies_stream_from_the_payload_store_chunk_by_chunk(store):
    raw = make_mail(body="q" * 600_000 + "\r\n")
    d = store.deliver(account=ADA, raw=raw)
    chunks = list(store.body(ADA, "INBOX", d.uid))
    assert len(chunks) > 1 and b"".join(chunks) == raw


def test_small_bodies_come_from_the_message_row_in_one_chunk(store):
    raw = make_mail(body="short\r\n")
    d = store.deliver(account=ADA, raw=raw)
    assert list(store.body(ADA, "INBOX", d.uid)) == [raw]


def test_unknown_mailbox_is_a_named_error(store):
    deliver(store, 1)
    with pytest.raises(MailboxNotFound, match="Nope"):
        store.messages(ADA, "Nope")


def test_verify_reports_identical_tables_after_commands(store):
    ds = deliver(store, 5, labels=["x"])
    store.flag(ds[0].message_id, ["\\Seen"])
    store.delete(ds[1].message_id)
    reports = store.verify()
    assert reports and all(r.identical for r in reports)


def test_verify_notices_a_tampered_table(store):
    from projections import names as n
    from projections.tablestore import Put

    [d] = deliver(store, 1)
    host = store.projections
    row = next(iter(host.tables.scan(host.physical(n.MESSAGES))))[0]
    host.tables.apply([Put(host.physical(n.MESSAGES), row, n.META_FLAGS, b'["tampered"]',
                           10_000)])
    bad = [r for r in store.verify() if not r.identical]
    assert [r.table for r in bad] == ["messages"] and bad[0].differences


def test_rebuild_switches_readers_to_fresh_tables_with_the_same_content(store):
    deliver(store, 4, labels=["x"])
    before = {r.table: r.live_digest for r in store.verify()}
    result = store.rebuild()
    after = {r.table: r.live_digest for r in store.verify()}
    assert before == after and result["generation"] == 1
    assert all(name.startswith(t + "__g1") for t, name in result["tables"].items())
    deliver(store, 1)  # live projection continues into the new tables
    assert len(store.messages(ADA)) == 5


def test_readers_during_a_rebuild_never_see_a_half_built_table(store):
    deliver(store, 60)
    seen: list[int] = []
    errors: list[BaseException] = []
    reading, stop = threading.Event(), threading.Event()

    def read():
        reader = Letterlog.open(store.settings.data, durability="normal")
        try:
            while not stop.is_set():
                seen.append(len(reader.messages(ADA, limit=100)))
                reading.set()
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)
        finally:
            reading.set()
        reader.close()

    t = threading.Thread(target=read)
    t.start()
    reading.wait(30)  # the reader is reading before the rebuild starts (it takes milliseconds)
    store.rebuild(["messages"])
    stop.set()
    t.join()
    assert errors == []
    assert seen and set(seen) == {60}


def test_projection_survives_a_restart(tmp_path):
    s = Letterlog.open(tmp_path / "d", durability="normal")
    s.deliver(account=ADA, raw=make_mail())
    s.close()
    s = Letterlog.open(tmp_path / "d", durability="normal")
    s.deliver(account=ADA, raw=make_mail())
    assert [m.uid for m in s.messages(ADA)] == [2, 1]
    assert all(r.identical for r in s.verify())


def test_a_corrupt_event_stops_projection_loudly_with_its_position(tmp_path):
    s = Letterlog.open(tmp_path / "d", durability="normal")
    s.deliver(account=ADA, raw=make_mail())
    import sqlite3
    con = sqlite3.connect(tmp_path / "d" / "events.sqlite")
    con.execute("UPDATE stored_events SET state = x'c1c1c1' WHERE rowid = "
                "(SELECT max(rowid) FROM stored_events)")
    con.commit()
    con.close()
    with pytest.raises(CorruptEvent, match=r"position \d+ .*aggregate .*version"):
        s.verify()
    with pytest.raises(CorruptEvent, match=r"position \d+ .*aggregate .*version"):
        s.rebuild()
    assert s.messages(ADA)  # the live tables are untouched by the failed rebuild


def test_a_rebuild_by_another_store_is_followed_by_the_next_command(store):
    """The live runner skips re-reading catalog and tracking while no other connection has
    committed (``data_version``); a rebuild through another store object is such a commit."""
    deliver(store, 3)
    other = Letterlog.open(store.settings.data, durability="normal")
    try:
        result = other.rebuild(["messages"])
    finally:
        other.close()
    deliver(store, 1)
    assert len(store.messages(ADA)) == 4
    assert store.projections.physical("messages") == result["tables"]["messages"]
    assert all(r.identical for r in store.verify())


def test_deliveries_by_two_store_objects_keep_both_read_models_current(store):
    other = Letterlog.open(store.settings.data, durability="normal")
    try:
        for i in range(6):
            (store if i % 2 else other).deliver(account=ADA, raw=make_mail(f"s{i}"))
        assert len(store.messages(ADA)) == len(other.messages(ADA)) == 6
        assert store.counters(ADA) == other.counters(ADA)
    finally:
        other.close()
    assert all(r.identical for r in store.verify())
