"""The attacks of issue 41 on names, against the embedded store with its real passwd-file
directory: a name that folds to another user's name owns nothing of it, case does not
escape a negative entry (a user's or a group's), and one bad line of the directory neither
stops every other user nor lets its own user act without its groups."""

from __future__ import annotations

import pytest

from adapters.embedded import Letterlog
from domain.acl_identifiers import UnknownIdentifier
from domain.directory import DirectoryInvalid
from domain.errors import MailboxNotFound, PermissionDenied
from domain.identity import NameRefused
from domain.values import account_id_for
from tests.factories import make_mail

SAM, STRASSE, ADA = "sam@example.org", "strasse@example.org", "ada@example.org"
ESZETT = "stra\u00dfe@example.org"
PASSWD = (
    f"{SAM}:x\n"
    f"\u017fam@example.org:x\n"  # long s: skipped, it would stand for sam
    f"{STRASSE}:x\n{ESZETT}:x\n"
    f"{ADA}:x\n"
    "bob@example.org:x::::::userdb_acl_groups=Interns\n"
    "eve@example.org:x:1000:staff::::userdb_acl_groups=interns\n"  # bad gid: skipped
)


@pytest.fixture
def store(tmp_path):
    data = tmp_path / "data"
    s = Letterlog.open(data, durability="normal")
    (data / "users.passwd").write_text(PASSWD)
    for account in (SAM, STRASSE, ESZETT, ADA):
        s.deliver(account=account, raw=make_mail(f"hello {account}"))
    s.create_mailbox(ADA, "Team")
    s.deliver(account=ADA, mailbox="Team", raw=make_mail("team"))
    yield s
    s.close()


def refused_and_nothing_written(store, action, error):
    before = store.max_position()
    with pytest.raises(error) as raised:
        action()
    assert store.max_position() == before
    return raised.value


def test_a_long_s_name_is_nobody_and_owns_nothing_of_sam(store):
    refusal = refused_and_nothing_written(
        store, lambda: store.as_user("\u017fam@example.org"), NameRefused)
    assert "compatibility form" in str(refusal)
    with pytest.raises(NameRefused):  # nor can anyone be given rights under it
        store.acl_set(SAM, "INBOX", "\u017fam@example.org", "lr")
    assert [u.name for u in store_directory_users(store)] == [
        ADA, "bob@example.org", SAM, STRASSE, ESZETT]


def store_directory_users(store):
    from adapters.bootstrap.directories import directory

    return directory(store.settings).users()


def test_eszett_and_ss_are_two_users_and_neither_owns_the_other(store):
    eszett, strasse = store.as_user(ESZETT), store.as_user(STRASSE)
    for user, other in ((eszett, STRASSE), (strasse, ESZETT)):
        for action in (lambda u=user, o=other: u.messages(o, "INBOX"),
                       lambda u=user, o=other: u.create_mailbox(o, "Mine"),
                       lambda u=user, o=other: u.acl_set(o, "INBOX", "eve@example.org",
                                                         "lr")):
            refused_and_nothing_written(store, action, (MailboxNotFound, PermissionDenied))
        with pytest.raises(PermissionDenied):
            user.counters(other)
    assert len(eszett.messages(ESZETT, "INBOX")) == 1
    assert account_id_for(ESZETT) != account_id_for(STRASSE)


def test_case_and_width_do_not_escape_a_negative_entry(store):
    store.acl_set(ADA, "Team", "anyone", "lr")
    store.acl_set(ADA, "Team", "-BOB@example.org", "lr")
    assert store.acl_get(ADA, "Team") == {"anyone": "lr", "-bob@example.org": "lr"}
    for spelled in ("BOB@Example.org", "bob@EXAMPLE.ORG", "\uff42ob@example.org"):
        refused_and_nothing_written(
            store, lambda s=spelled: store.as_user(s).messages(ADA, "Team"), MailboxNotFound)
    # a negative group entry, the group spelled in another case in the directory
    store.acl_delete(ADA, "Team", "-bob@example.org")
    store.acl_set(ADA, "Team", "-$INTERNS", "r")
    bob = store.as_user("Bob@Example.org")
    assert bob.caller.groups == {"interns"}
    refused_and_nothing_written(store, lambda: bob.messages(ADA, "Team"), PermissionDenied)


def test_one_bad_line_stops_only_its_own_user(store):
    store.acl_set(ADA, "Team", "anyone", "lr")
    store.acl_set(ADA, "Team", "-$interns", "lr")
    # eve's line is malformed: she would act without the group interns, whose negative
    # entry must hold, so she cannot act at all; everyone else acts as before
    with pytest.raises(DirectoryInvalid, match=r"users.passwd:7: user 'eve@example.org'"):
        store.as_user("eve@example.org")
    assert len(store.as_user(SAM).messages(ADA, "Team")) == 1


# -- ACL identifiers: Dovecot's spellings mapped, unknown syntax and nobody refused ---------


@pytest.mark.parametrize(("identifier", "error", "says"), [
    ("user=zed", UnknownIdentifier, "knows no user 'zed'"),
    ("-user=zed", UnknownIdentifier, "would deny nobody"),
    ("group=sales", UnknownIdentifier, "no user of the directory is in the group 'sales'"),
    ("-group=sales", UnknownIdentifier, "would deny nobody"),
    ("zed@example.org", UnknownIdentifier, "knows no user"),
    ("owner", NameRefused, "'owner' has no meaning here"),
    ("group-override=interns", NameRefused, "group-override"),
    ("uid=bob", NameRefused, "not an identifier syntax"),
])
def test_an_identifier_that_names_nobody_is_refused_and_nothing_stored(store, identifier,
                                                                        error, says):
    refusal = refused_and_nothing_written(
        store, lambda: store.acl_set(ADA, "Team", identifier, "lr"), error)
    assert says in str(refusal)
    assert store.acl_get(ADA, "Team") == {}


def test_dovecots_spellings_of_known_names_are_mapped_explicitly(store):
    store.acl_set(ADA, "Team", "user=BOB@example.org", "lr")
    store.acl_set(ADA, "Team", "-group=Interns", "r")
    store.acl_set(ADA, "Team", "-user=sam@example.org", "l")
    assert store.acl_get(ADA, "Team") == {"bob@example.org": "lr", "-$interns": "r",
                                          "-sam@example.org": "l"}
    # a user with the right 'a' is held to the same rule
    store.acl_set(ADA, "Team", SAM, "lra")
    sam = store.as_user(SAM)
    refused_and_nothing_written(store, lambda: sam.acl_set(ADA, "Team", "user=zed", "lr"),
                                UnknownIdentifier)


def test_an_entry_written_before_the_rule_under_another_spelling_still_holds(store):
    """Events of an older letterlog may spell a user as typed (``-BOB@Example.org``):
    the mailbox, the ``acl`` table and ``visible_mailboxes`` read them as the rule has
    them, so the denial holds and can be removed by its canonical name."""
    store.acl_set(ADA, "Team", "anyone", "lr")
    mb = store.mail.mailbox_of(ADA, "Team")
    mb._change_rights("-BOB@Example.ORG", "lr")  # as an old event holds it, unchecked
    store.mail.uow.save(mb)
    store.catch_up()
    assert store.acl_get(ADA, "Team") == {"anyone": "lr", "-bob@example.org": "lr"}
    assert (ADA, "Team", "-bob@example.org", "lr") in store.acl_entries()
    refused_and_nothing_written(
        store, lambda: store.as_user("bob@example.org").messages(ADA, "Team"), MailboxNotFound)
    assert [r["path"] for r in store.as_user("bob@example.org").mailboxes()] == []
    store.acl_delete(ADA, "Team", "-bob@example.org")
    assert len(store.as_user("bob@example.org").messages(ADA, "Team")) == 1
