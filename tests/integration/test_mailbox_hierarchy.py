"""Mailbox hierarchy on the embedded store (RFC 3501, '/' as the delimiter): a rename takes
the inferiors along, a delete with inferiors leaves a \\Noselect name, a deleted mailbox
leaves nothing in ``counters``, an unknown account is not created by a mailbox command; the
read models stay equal to a rebuild (``verify``)."""

from __future__ import annotations

import pytest

from adapters.embedded import Letterlog
from domain.account import Account
from domain.errors import (
    AccountNotFound,
    InvalidCommand,
    InvalidState,
    MailboxExists,
    MailboxHasInferiors,
    MailboxNotFound,
)
from domain.mailbox import Mailbox
from projections import names as n
from projections.keys import account_row
from tests.factories import make_mail

ADA = "ada@example.org"
TREE = ("Archive", "Archive/2024", "Archive/2024/Q1")


@pytest.fixture
def store(tmp_path):
    s = Letterlog.open(tmp_path / "data", durability="normal")
    s.deliver(account=ADA, raw=make_mail("hello"))  # the account exists
    yield s
    s.close()


def deliver(store, mailbox, n=1):
    return [store.deliver(account=ADA, mailbox=mailbox, raw=make_mail(f"{mailbox} {i}"))
            for i in range(n)]


def listing(store):
    return {mb["name"]: mb for mb in store.mailbox_list(ADA)}


def assert_rebuild_identical(store):
    assert all(r.identical for r in store.verify()), [r for r in store.verify()
                                                       if not r.identical]
    store.rebuild()
    assert all(r.identical for r in store.verify())


def test_rename_takes_the_inferiors_along_in_one_append(store):
    for name in (*TREE, "Archived"):
        store.create_mailbox(ADA, name)
    delivered = {name: deliver(store, name, 2) for name in (*TREE, "Archived")}
    before = listing(store)
    head = store.max_position()

    c = store.rename_mailbox(ADA, "Archive", "Old")

    assert [(r["from"], r["to"]) for r in c.extra["renamed"]] == [
        ("Archive", "Old"), ("Archive/2024", "Old/2024"), ("Archive/2024/Q1", "Old/2024/Q1")]
    assert c.positions == tuple(range(head + 1, head + 7))  # 3 Account + 3 Mailbox events
    after = listing(store)
    for old in TREE:
        new = "Old" + old[len("Archive"):]
        assert old not in after
        assert after[new]["mailbox_id"] == before[old]["mailbox_id"]
        assert after[new]["uidvalidity"] == before[old]["uidvalidity"]
        assert sorted(m.uid for m in store.messages(ADA, new)) == sorted(
            d.uid for d in delivered[old])
        assert store.mailbox_status(ADA, new)["uidvalidity"] == before[old]["uidvalidity"]
        with pytest.raises(MailboxNotFound):
            store.messages(ADA, old)
    assert after["Archived"] == before["Archived"]  # a name that only starts alike stays
    counts = store.counters(ADA)["mailboxes"]
    assert {k for k in counts} == {"INBOX", "Old", "Old/2024", "Old/2024/Q1", "Archived"}
    assert_rebuild_identical(store)


def test_a_rename_onto_any_existing_name_is_refused_and_writes_nothing(store):
    for name in (*TREE, "Old", "New/2024"):
        store.create_mailbox(ADA, name)
    head = store.max_position()
    with pytest.raises(MailboxExists, match="'Old' already exists"):
        store.rename_mailbox(ADA, "Archive", "Old")
    with pytest.raises(MailboxExists, match="'New/2024' already exists"):
        store.rename_mailbox(ADA, "Archive", "New")  # only an inferior's target exists
    with pytest.raises(InvalidCommand, match="below itself"):
        store.rename_mailbox(ADA, "Archive", "Archive/2024/Q1/x")
    with pytest.raises(InvalidCommand, match="INBOX cannot be renamed"):
        store.rename_mailbox(ADA, "INBOX", "Old Inbox")
    assert store.max_position() == head
    assert set(listing(store)) == {"INBOX", *TREE, "Old", "New/2024"}


def test_delete_with_inferiors_leaves_a_noselect_name_until_they_are_gone(store):
    for name in TREE:
        store.create_mailbox(ADA, name)
    archived = deliver(store, "Archive", 3)
    deliver(store, "Archive/2024", 1)

    c = store.delete_mailbox(ADA, "Archive")
    assert c.extra == {"expunged": 3, "noselect": True}
    mailboxes = listing(store)
    assert mailboxes["Archive"]["noselect"] is True
    assert not mailboxes["Archive/2024"]["noselect"]
    assert store.messages(ADA, "Archive") == []
    assert all(store.mail.message(d.message_id).state == "expunged" for d in archived)
    assert "Archive" not in store.counters(ADA)["mailboxes"]  # holds no messages
    with pytest.raises(InvalidState, match="Noselect"):
        deliver(store, "Archive")

    head = store.max_position()
    with pytest.raises(MailboxHasInferiors, match="Archive/2024"):
        store.delete_mailbox(ADA, "Archive")
    assert store.max_position() == head

    store.delete_mailbox(ADA, "Archive/2024/Q1")
    assert store.delete_mailbox(ADA, "Archive/2024").extra == {"expunged": 1, "noselect": False}
    c = store.delete_mailbox(ADA, "Archive")
    assert c.extra == {"expunged": 0, "noselect": False}
    assert [type(e) for e in _events(store, c.positions)] == [Account.MailboxUnregistered]
    assert set(listing(store)) == {"INBOX"}
    store.create_mailbox(ADA, "Archive")  # the name is free again, a new UIDVALIDITY
    assert_rebuild_identical(store)


def test_a_deleted_mailbox_leaves_no_cell_in_counters(store):
    store.create_mailbox(ADA, "Trash")
    trash = listing(store)["Trash"]["mailbox_id"]
    deliver(store, "Trash", 2)
    c = store.delete_mailbox(ADA, "Trash")
    # the expunges come first, then the mailbox goes
    assert type(_events(store, c.positions)[-1]) is Mailbox.Deleted
    row = store.projections.tables.get(n.COUNTERS, account_row(store.mail.account(ADA).id))
    assert not [column for column in row if trash.replace("-", "") in column.hex()]
    assert set(store.counters(ADA)["mailboxes"]) == {"INBOX"}  # no bare UUID
    assert_rebuild_identical(store)


def test_mailbox_commands_do_not_create_an_unknown_account(store):
    head = store.max_position()
    with pytest.raises(AccountNotFound, match="'bob@example.org' does not exist"):
        store.create_mailbox("bob@example.org", "Work")
    with pytest.raises(AccountNotFound, match="'bob@example.org' does not exist"):
        store.subscribe("bob@example.org", "Work")
    assert store.max_position() == head
    c = store.create_mailbox("bob@example.org", "Work", create_account=True)
    assert c.extra["account_created"] is True
    assert set(listing_of(store, "bob@example.org")) == {"INBOX", "Work"}
    assert store.create_mailbox(ADA, "Work").extra["account_created"] is False
    assert store.subscribe("carol@example.org", "INBOX", create_account=True).changed


def listing_of(store, account):
    return {mb["name"] for mb in store.mailbox_list(account)}


def _events(store, positions):
    app = store.mail.app
    notes = app.recorder.select_notifications(start=positions[0], limit=len(positions))
    return [app.mapper.to_domain_event(x) for x in notes]


def test_an_mta_delivery_to_a_noselect_mailbox_goes_to_inbox(store):
    from adapters.mta.delivery import MtaOptions, delivery_fields

    for name in ("Lists", "Lists/rust"):
        store.create_mailbox(ADA, name)
    options = MtaOptions(detail_mailbox=True)

    def placed(recipient):
        return delivery_fields(store, make_mail("x"), recipient=recipient, options=options,
                               key_prefix=None)["mailbox"]

    assert placed("ada+Lists@example.org") == "Lists"
    store.delete_mailbox(ADA, "Lists")  # \Noselect: Lists/rust is below it
    assert placed("ada+Lists@example.org") == "INBOX"
    assert placed("ada+Lists/rust@example.org") == "Lists/rust"
    options = MtaOptions(mailbox="Lists")  # lda --mailbox Lists
    assert placed(ADA) == "INBOX"


def test_a_delete_expunges_from_the_log_not_from_read_models_that_lag(tmp_path):
    """The command side alone (no read models in this process, as on scale-out where the
    workers have not projected yet) deletes a mailbox with every message in it, a message
    moved in included and one moved out left alone; the read models agree once caught up."""
    data = tmp_path / "data"
    Letterlog.open(data, durability="normal").close()
    with Letterlog.open(data, durability="normal", read_models=False) as writer:
        writer.create_mailbox(ADA, "Old", create_account=True)
        writer.create_mailbox(ADA, "Keep")
        inside = [writer.deliver(account=ADA, mailbox="Old", raw=make_mail(f"in {i}"))
                  for i in range(3)]
        moved_in = writer.deliver(account=ADA, mailbox="Keep", raw=make_mail("moved in"))
        writer.move(moved_in.message_id, "Old")
        writer.move(inside[0].message_id, "Keep")  # moved out: stays
        change = writer.delete_mailbox(ADA, "Old")
    assert change.extra == {"expunged": 3, "noselect": False}
    with Letterlog.open(data, durability="normal") as reader:
        assert "Old" not in listing(reader)
        kept = reader.messages(ADA, "Keep")
        assert [m.message_id for m in kept] == [inside[0].message_id]
        for gone in (*inside[1:], moved_in):
            assert reader.show(gone.message_id)["state"] == "expunged"
