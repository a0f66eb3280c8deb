"""Rules and events of every command (domain.service.Mailstore), on every event store: in
memory, a SQLite file and PostgreSQL (``every_backend``; PostgreSQL's run is ``services``)."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

import pytest

from domain.errors import (
    ExtractionRefused,
    InvalidCommand,
    InvalidState,
    MailboxExists,
    MailboxNotFound,
    MessageNotFound,
    MessageRejected,
)
from domain.message import Message
from tests.factories import make_mail

ADA = "ada@example.org"

pytestmark = pytest.mark.every_backend


def test_the_backend_is_the_one_asked_for(log, backend):
    from eventsourcing.popo import POPOApplicationRecorder
    from eventsourcing.sqlite import SQLiteApplicationRecorder

    if backend == "postgres":
        from eventsourcing.postgres import PostgresApplicationRecorder

        assert isinstance(log.recorder, PostgresApplicationRecorder)
    else:
        expected = SQLiteApplicationRecorder if backend == "sqlite" else POPOApplicationRecorder
        assert isinstance(log.recorder, expected)


def positions(mail):
    return mail.app.recorder.max_notification_id() or 0


def events(mail, start=1):
    return [mail.app.mapper.to_domain_event(n)
            for n in mail.app.recorder.select_notifications(start=start, limit=100_000)]


def test_first_delivery_opens_the_account_with_an_inbox_and_uid_1(mail):
    d = mail.deliver(account="Ada@Example.org", raw=make_mail())
    assert (d.uid, d.uidvalidity) == (1, 1)
    assert mail.account(ADA).has_mailbox("INBOX")


def test_uids_strictly_increase_and_are_never_reused_after_expunge(mail):
    d1 = mail.deliver(account=ADA, raw=make_mail())
    d2 = mail.deliver(account=ADA, raw=make_mail())
    mail.expunge([d2.message_id])
    d3 = mail.deliver(account=ADA, raw=make_mail())
    assert (d1.uid, d2.uid, d3.uid) == (1, 2, 3)


def test_move_allocates_a_new_uid_in_the_target(mail):
    mail.create_mailbox(ADA, "Archive", create_account=True)
    mail.deliver(account=ADA, mailbox="Archive", raw=make_mail())
    d = mail.deliver(account=ADA, raw=make_mail())
    change = mail.move(d.message_id, "Archive")
    m = mail.message(d.message_id)
    assert change.extra["uid"] == 2 and m.uid == 2 and m.mailbox_id != d.mailbox_id


def test_rename_keeps_uidvalidity_and_recreate_gives_a_greater_one(mail):
    mail.create_mailbox(ADA, "Work", create_account=True)
    first = mail.account(ADA).mailbox("Work")
    mail.rename_mailbox(ADA, "Work", "Jobs")
    renamed = mail.account(ADA).mailbox("Jobs")
    mail.delete_mailbox(ADA, "Jobs")
    mail.create_mailbox(ADA, "Jobs", create_account=True)
    recreated = mail.account(ADA).mailbox("Jobs")
    assert renamed == first
    assert recreated[0] != renamed[0] and recreated[2] > renamed[2]


def test_imaptest_uidvalidity_rename(mail):
    """imaptest uidvalidity-rename: after A -> C and B -> A, A reports B's UIDVALIDITY."""
    mail.create_mailbox(ADA, "A", create_account=True)
    mail.create_mailbox(ADA, "B", create_account=True)
    a, b = mail.account(ADA).mailbox("A")[2], mail.account(ADA).mailbox("B")[2]
    mail.rename_mailbox(ADA, "A", "C")
    mail.rename_mailbox(ADA, "B", "A")
    assert mail.account(ADA).mailbox("A")[2] == b
    assert mail.account(ADA).mailbox("C")[2] == a
    mail.create_mailbox(ADA, "B", create_account=True)
    assert mail.account(ADA).mailbox("B")[2] > max(a, b)


def test_a_move_within_one_mailbox_assigns_a_new_uid_and_reports_both(mail):
    d = mail.deliver(account=ADA, raw=make_mail())
    change = mail.move(d.message_id, "INBOX")
    assert change.changed
    assert (change.extra["source_uid"], change.extra["uid"]) == (1, 2)
    assert change.extra["uidvalidity"] == d.uidvalidity
    assert mail.message(d.message_id).uid == 2


def test_a_copy_reports_the_source_and_the_new_uid(mail):
    mail.create_mailbox(ADA, "Archive", create_account=True)
    d = mail.deliver(account=ADA, raw=make_mail())
    c = mail.copy(d.message_id, "Archive")
    assert (c.source_uid, c.uid) == (1, 1) and c.message_id != d.message_id


def test_modseq_strictly_increases_per_mailbox(mail):
    d = mail.deliver(account=ADA, raw=make_mail())
    a = mail.flag(d.message_id, ["\\Seen"])
    b = mail.label(d.message_id, add=["work"])
    c = mail.flag(d.message_id, ["\\Seen"], "remove")
    assert d.modseq < a.modseq < b.modseq < c.modseq


def test_a_command_that_changes_nothing_emits_nothing(mail):
    d = mail.deliver(account=ADA, raw=make_mail(), flags=["\\Seen"], labels=["x"])
    before = positions(mail)
    assert not mail.flag(d.message_id, ["\\Seen"]).changed
    assert not mail.label(d.message_id, add=["x"]).changed
    mail.subscribe(ADA, "INBOX")
    after_sub = positions(mail)
    assert not mail.subscribe(ADA, "INBOX").changed
    assert positions(mail) == after_sub == before + 1


@pytest.mark.parametrize(("mode", "expected"), [
    ("add", {"\\Seen", "\\Flagged"}), ("remove", set()), ("replace", {"\\Flagged"}),
])
def test_flag_modes(mail, mode, expected):
    d = mail.deliver(account=ADA, raw=make_mail(), flags=["\\Seen"])
    flags = ["\\Flagged"] if mode != "remove" else ["\\Seen"]
    mail.flag(d.message_id, flags, mode)
    assert set(mail.message(d.message_id).flags) == expected


def test_flag_event_carries_old_and_new_flags_and_where_the_message_is(mail):
    d = mail.deliver(account=ADA, raw=make_mail(), labels=["w"])
    start = positions(mail) + 1
    mail.flag(d.message_id, ["$Forwarded"])
    [e] = events(mail, start)
    assert isinstance(e, Message.FlagsChanged)
    assert (e.old_flags, e.flags, e.mailbox_id, e.uid, e.labels) == (
        [], ["$Forwarded"], d.mailbox_id, d.uid, ["w"])


@pytest.mark.parametrize("bad", ["\\Bogus", "two words", "", "a(b"])
def test_invalid_flags_are_refused_and_nothing_is_written(mail, bad):
    d = mail.deliver(account=ADA, raw=make_mail())
    before = positions(mail)
    with pytest.raises(InvalidCommand, match="flags"):
        mail.flag(d.message_id, [bad])
    assert positions(mail) == before


def test_bad_input_is_refused_with_a_named_error_and_nothing_written(mail):
    with pytest.raises(InvalidCommand, match="account"):
        mail.deliver(account="not-an-address", raw=make_mail())
    with pytest.raises(MessageRejected):
        mail.deliver(account=ADA, raw=b"\x00\x01\x02 binary junk")
    with pytest.raises(InvalidCommand, match="extract_limit"):
        mail.deliver(account=ADA, raw=make_mail(), extract_limit=0)
    with pytest.raises(MailboxNotFound):
        mail.deliver(account=ADA, mailbox="Nope", raw=make_mail())
    with pytest.raises(MessageNotFound):
        mail.flag(uuid4(), ["\\Seen"])
    assert positions(mail) == 0


def test_label_add_and_remove_defines_labels_on_the_account(mail):
    d = mail.deliver(account=ADA, raw=make_mail())
    mail.label(d.message_id, add=["work", "urgent"])
    mail.label(d.message_id, remove=["urgent"])
    assert mail.message(d.message_id).labels == {"work"}
    assert set(mail.account(ADA).labels) == {"work", "urgent"}


def test_count_limited_extraction_refuses_past_the_limit_until_the_policy_changes(mail):
    raw = make_mail()
    d = mail.deliver(account=ADA, raw=raw, extract_limit=2)
    assert b"".join(mail.extract(d.message_id)) == raw
    assert b"".join(mail.extract(d.message_id)) == raw
    assert mail.message(d.message_id).state == "expired"
    with pytest.raises(ExtractionRefused, match="limit of 2"):
        mail.extract(d.message_id)
    mail.set_policy(d.message_id, extract_limit=1)
    assert b"".join(mail.extract(d.message_id)) == raw


def test_until_dated_extraction_is_refused_after_the_date(mail, clock):
    d = mail.deliver(account=ADA, raw=make_mail(), extract_until=clock.now + timedelta(days=1))
    mail.extract(d.message_id)
    clock.advance(days=2)
    with pytest.raises(ExtractionRefused, match="extractable until"):
        mail.extract(d.message_id)
    mail.set_policy(d.message_id)  # indefinite
    mail.extract(d.message_id)


def test_soft_delete_restore_and_expunge(mail):
    d = mail.deliver(account=ADA, raw=make_mail())
    assert mail.delete(d.message_id).changed
    assert not mail.delete(d.message_id).changed
    with pytest.raises(InvalidState):
        mail.flag(d.message_id, ["\\Seen"])
    assert mail.restore(d.message_id).changed
    mail.expunge([d.message_id])
    with pytest.raises(InvalidState):
        mail.restore(d.message_id)


def test_small_payloads_travel_inline_and_large_ones_are_stored_once(mail, payloads):
    small = make_mail()
    big = make_mail(body="x" * 50_000 + "\r\n")
    a = mail.deliver(account=ADA, raw=small)
    b = mail.deliver(account=ADA, raw=big)
    c = mail.deliver(account="grace@example.org", raw=big)
    assert mail.message(a.message_id).inline
    stored = mail.message(b.message_id).address  # random, not its digest (ADR 0099)
    assert [address for address, _, _ in payloads.list()] == [stored] != [b.sha256]
    assert b.sha256 == c.sha256 and mail.message(c.message_id).address == stored
    assert b"".join(mail.extract(c.message_id)) == big


def test_events_never_carry_more_than_the_inline_limit_of_payload(mail):
    mail.deliver(account=ADA, raw=make_mail(body="y" * 200_000 + "\r\n"))
    delivered = [e for e in events(mail) if isinstance(e, Message.Delivered)]
    assert delivered[0].personal["body"] is None and not delivered[0].inline


def test_personal_data_is_confined_to_the_personal_part(mail):
    mail.deliver(account=ADA, raw=make_mail(subject="Secret plans"))
    [e] = [e for e in events(mail) if isinstance(e, Message.Delivered)]
    outside = {k: v for k, v in vars(e).items() if k != "personal"}
    assert "Secret plans" not in repr(outside)
    assert e.personal["envelope"]["subject"] == "Secret plans"


def test_upload_stays_incomplete_until_completed(mail):
    raw = make_mail(body="z" * 300_000 + "\r\n")
    upload = mail.begin_upload(account=ADA, labels=["big"])
    mid = upload.message_id
    assert upload.position == mail.uow.head()  # read-your-writes, as every command
    mail.append_chunk(mid, 0, raw[:100_000])
    with pytest.raises(InvalidCommand, match="expected chunk 1"):
        mail.append_chunk(mid, 0, raw[100_000:200_000])
    mail.append_chunk(mid, 1, raw[100_000:])
    with pytest.raises(InvalidState, match="incomplete"):
        mail.extract(mid)
    d = mail.complete_upload(mid)
    assert d.uid == 1 and d.size == len(raw)
    assert b"".join(mail.extract(mid)) == raw


def test_copy_is_a_new_message_sharing_the_payload(mail, payloads):
    raw = make_mail(body="c" * 40_000 + "\r\n")
    d = mail.deliver(account=ADA, raw=raw)
    mail.create_mailbox(ADA, "Keep", create_account=True)
    c = mail.copy(d.message_id, "Keep")
    assert c.message_id != d.message_id and c.sha256 == d.sha256
    assert len(list(payloads.list())) == 1
    [copied] = [e for e in events(mail) if isinstance(e, Message.Delivered)
                and e.originator_id == c.message_id]
    assert copied.copied_from == d.message_id


def test_mailbox_names_are_unique_and_inbox_is_protected(mail):
    mail.create_mailbox(ADA, "Work", create_account=True)
    with pytest.raises(MailboxExists):
        mail.create_mailbox(ADA, "Work", create_account=True)
    with pytest.raises(InvalidCommand, match="INBOX"):
        mail.rename_mailbox(ADA, "INBOX", "Other")
    with pytest.raises(InvalidCommand, match="INBOX"):
        mail.delete_mailbox(ADA, "INBOX")


def test_deleting_a_mailbox_expunges_its_messages(mail):
    mail.create_mailbox(ADA, "Old", create_account=True)
    d = mail.deliver(account=ADA, mailbox="Old", raw=make_mail())
    change = mail.delete_mailbox(ADA, "Old")
    assert change.extra["expunged"] == 1
    assert mail.message(d.message_id).state == "expunged"
    with pytest.raises(MailboxNotFound):
        mail.deliver(account=ADA, mailbox="Old", raw=make_mail())


def test_threads_follow_the_root_of_the_references_chain(mail):
    a = mail.deliver(account=ADA, raw=make_mail(message_id="<root@x>"))
    b = mail.deliver(account=ADA, raw=make_mail(message_id="<r1@x>", in_reply_to="<root@x>",
                                                references="<root@x>"))
    c = mail.deliver(account=ADA, raw=make_mail(message_id="<r2@x>", in_reply_to="<r1@x>",
                                                references="<root@x> <r1@x>"))
    other = mail.deliver(account=ADA, raw=make_mail(message_id="<other@x>"))
    tids = {x: mail.message(x.message_id).thread_id for x in (a, b, c, other)}
    assert tids[a] == tids[b] == tids[c] != tids[other]
