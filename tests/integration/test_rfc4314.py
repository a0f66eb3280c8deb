"""RFC 4314 as written, where letterlog deviated (issue 41), attacked through ``as_user``:
MOVE and COPY need 'r' on the source; EXPUNGE removes only \\Deleted messages; flags and
labels of a delivery or a copy follow 's', 't', 'w' on the target (dropped, as Dovecot
drops them); a child mailbox starts with its parent's ACL; an owner's negative entries
count but she keeps 'a'; and no answer tells a user what it may not read (an idempotent
delivery's earlier message, UIDNEXT with 'l' alone, the owner's subscriptions)."""

from __future__ import annotations

import pytest

from adapters.embedded import Letterlog
from domain.errors import InvalidCommand, PermissionDenied
from tests.factories import make_mail

ADA, BOB = "ada@example.org", "bob@example.org"


@pytest.fixture
def store(tmp_path):
    s = Letterlog.open(tmp_path / "data", durability="normal")
    for account in (ADA, BOB):
        s.deliver(account=account, raw=make_mail(f"hello {account}"))
    for name in ("Team", "Private", "Drop"):
        s.create_mailbox(ADA, name)
    yield s
    s.close()


def refused(store, action, error):
    before = store.max_position()
    with pytest.raises(error) as raised:
        action()
    assert store.max_position() == before
    return raised.value


def test_move_needs_read_on_the_source(store):
    d = store.deliver(account=ADA, mailbox="Team", raw=make_mail("secret"))
    store.acl_set(ADA, "Team", BOB, "lte")  # may delete and expunge, may not read
    store.acl_set(ADA, "Drop", BOB, "lri")
    bob = store.as_user(BOB)
    assert refused(store, lambda: bob.move(d.message_id, "Drop"), PermissionDenied).missing == "r"
    assert refused(store, lambda: bob.copy(d.message_id, "Drop"), PermissionDenied).missing == "r"
    assert bob.messages(ADA, "Drop") == []
    store.acl_set(ADA, "Team", BOB, "lrte")
    bob.move(d.message_id, "Drop")
    assert [m.subject for m in bob.messages(ADA, "Drop")] == ["secret"]


def test_expunge_removes_only_messages_marked_deleted(store):
    d = store.deliver(account=ADA, mailbox="Team", raw=make_mail("keep me"))
    store.acl_set(ADA, "Team", BOB, "lre")  # 'e' alone: may not mark anything \Deleted
    bob = store.as_user(BOB)
    error = refused(store, lambda: bob.expunge([d.message_id]), InvalidCommand)
    assert "not marked \\Deleted" in str(error)
    assert len(store.messages(ADA, "Team")) == 1
    store.flag(d.message_id, ["\\Deleted"])  # someone with 't' marks it
    bob.expunge([d.message_id])
    assert store.messages(ADA, "Team") == []
    # a soft-deleted message ('t': delete) is marked too
    e = store.deliver(account=ADA, mailbox="Team", raw=make_mail("soft"))
    store.delete(e.message_id)
    bob.expunge([e.message_id])


FLAGS = ["\\Seen", "\\Deleted", "\\Flagged", "$Work"]


@pytest.mark.parametrize(("rights", "flags", "labels"), [
    ("li", [], []),
    ("lis", ["\\Seen"], []),
    ("lit", ["\\Deleted"], []),
    ("liw", ["$Work", "\\Flagged"], ["x"]),
    ("listw", ["$Work", "\\Deleted", "\\Flagged", "\\Seen"], ["x"]),
])
def test_flags_and_labels_on_delivery_and_copy_follow_s_t_w_of_the_target(store, rights,
                                                                          flags, labels):
    store.acl_set(ADA, "Drop", BOB, rights)
    store.acl_set(ADA, "Team", BOB, "lr")
    bob = store.as_user(BOB)
    d = bob.deliver(account=ADA, mailbox="Drop", raw=make_mail("new"), flags=FLAGS,
                    labels=["x"])
    src = store.deliver(account=ADA, mailbox="Team", raw=make_mail("old"), flags=FLAGS,
                        labels=["x"])
    c = bob.copy(src.message_id, "Drop")
    for delivered in (d, c):
        shown = store.show(delivered.message_id)
        assert sorted(shown["flags"]) == sorted(flags)
        assert sorted(shown["labels"]) == labels
    # the administrator's copy keeps everything
    whole = store.show(store.copy(src.message_id, "Drop").message_id)
    assert sorted(whole["flags"]) == sorted(FLAGS)


def test_a_child_mailbox_starts_with_its_parents_acl(store):
    store.acl_set(ADA, "Team", BOB, "lrk")
    store.acl_set(ADA, "Team", "-anyone", "w")
    bob = store.as_user(BOB)
    bob.create_mailbox(ADA, "Team/Notes")
    store.create_mailbox(ADA, "Team/Admin")
    for child in ("Team/Notes", "Team/Admin"):
        assert store.acl_get(ADA, child) == {BOB: "lrk", "-anyone": "w"}
    assert bob.my_rights(ADA, "Team/Notes") == "lrk"
    store.create_mailbox(ADA, "Loose")
    assert store.acl_get(ADA, "Loose") == {}


def test_an_owners_negative_entry_counts_but_she_keeps_administer(store):
    store.deliver(account=ADA, mailbox="Private", raw=make_mail("diary"))
    store.acl_set(ADA, "Private", "-ada@example.org", "rwa")
    ada = store.as_user(ADA)
    assert ada.my_rights(ADA, "Private") == "lsipkxtea"
    assert refused(store, lambda: ada.messages(ADA, "Private"), PermissionDenied).missing == "r"
    ada.acl_delete(ADA, "Private", "-ada@example.org")  # 'a' kept: she is never locked out
    assert len(ada.messages(ADA, "Private")) == 1


def test_an_idempotent_answer_tells_an_insert_only_user_nothing_of_the_earlier_message(store):
    raw = make_mail("same bytes")
    first = store.deliver(account=ADA, mailbox="Private", raw=raw, idempotency_key="k1")
    assert first.uid > 0 and first.sha256
    store.acl_set(ADA, "Drop", BOB, "li")
    bob = store.as_user(BOB)
    again = bob.deliver(account=ADA, mailbox="Drop", raw=raw, idempotency_key="k1")
    assert again.duplicate and (again.uid, again.uidvalidity, again.sha256, again.modseq) == (
        0, 0, "", 0)
    # a user who may read where the earlier message is gets the whole answer
    store.acl_set(ADA, "Private", BOB, "lr")
    assert bob.deliver(account=ADA, mailbox="Drop", raw=raw, idempotency_key="k1").uid == (
        first.uid)


def test_lookup_alone_shows_a_name_and_no_state(store):
    store.deliver(account=ADA, mailbox="Team", raw=make_mail("x"))
    store.subscribe(ADA, "Team")
    store.acl_set(ADA, "Team", BOB, "l")
    store.acl_set(ADA, "Drop", BOB, "lr")
    rows = {r["path"]: r for r in store.as_user(BOB).mailboxes()}
    team, drop = rows[f"shared/{ADA}/Team"], rows[f"shared/{ADA}/Drop"]
    assert "uidnext" not in team and "uidvalidity" not in team
    assert drop["uidnext"] == 1 and team["subscribed"] is False


def test_a_user_with_lookup_never_changes_the_owners_subscriptions(store):
    store.subscribe(ADA, "Team")
    store.acl_set(ADA, "Team", BOB, "lr")
    bob = store.as_user(BOB)
    for action in (lambda: bob.unsubscribe(ADA, "Team"), lambda: bob.subscribe(ADA, "Drop")):
        assert refused(store, action, PermissionDenied).missing == "owner"
    assert "Team" in store.subscriptions(ADA)
    assert store.as_user(ADA).unsubscribe(ADA, "Team").changed
