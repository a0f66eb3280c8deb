"""Rights (RFC 4314) and virtual roots on the embedded store: a user acting through
``as_user`` is checked before anything is written; a refusal names the missing right, and a
mailbox the user may not look up is refused exactly as one that does not exist. Sharing
read-only and read-write between two accounts; roots with relative listings; the ACL and
root tables identical after ``rebuild`` and ``verify``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

import pytest

from adapters.caller import CallerView
from adapters.embedded import Letterlog
from domain.errors import MailboxNotFound, MessageNotFound, PermissionDenied
from domain.mailbox import Mailbox
from domain.rights import COMMAND_RIGHTS, RIGHTS
from domain.roots import VirtualRoot
from tests.factories import make_mail

ADA, BOB, EVE = "ada@example.org", "bob@example.org", "eve@example.org"


@pytest.fixture
def store(tmp_path):
    s = Letterlog.open(tmp_path / "data", durability="normal")
    for account in (ADA, BOB):
        s.deliver(account=account, raw=make_mail(f"hello {account}"))
    for name in ("Team", "Team/2024", "Private", "Drop"):
        s.create_mailbox(ADA, name)
    yield s
    s.close()


def in_team(store: Letterlog, subject: str = "team", mailbox: str = "Team") -> Any:
    return store.deliver(account=ADA, mailbox=mailbox, raw=make_mail(subject))


def refused_writes_nothing(store: Letterlog, action: Callable[[], Any],
                           error: type[Exception]) -> Exception:
    before = store.max_position()
    with pytest.raises(error) as raised:
        action()
    assert store.max_position() == before
    return raised.value


# -- a user's own account, the administrator ------------------------------------------------


def test_the_owner_has_every_right_on_its_own_mailboxes(store):
    ada = store.as_user(ADA)
    d = in_team(store)
    assert ada.my_rights(ADA, "Team") == RIGHTS
    ada.flag(d.message_id, ["\\Seen", "\\Deleted"])
    ada.move(d.message_id, "Private")
    ada.create_mailbox(ADA, "Mine")
    ada.acl_set(ADA, "Mine", BOB, "lr")
    assert store.acl_get(ADA, "Mine") == {BOB: "lr"}


def test_a_user_is_handed_no_administrators_command_at_all(store):
    """The caller's view is the user's face (``adapters.face.Face``) and nothing more: the
    administrator's commands are not there to call (mypy refuses the call; at run time it
    is an AttributeError), and the store behind the view is not reachable by a name."""
    bob = store.as_user(BOB)
    for name in ("purge", "erase_account", "set_root", "acl_entries", "rebuild", "settings",
                 "mail", "log", "payloads", "projections", "store", "as_user"):
        before = store.max_position()
        assert not hasattr(bob, name), name
        assert store.max_position() == before


# -- hidden mailboxes: no `l`, refused as if missing ---------------------------------------


def test_a_mailbox_the_user_may_not_look_up_is_refused_exactly_as_a_missing_one(store):
    bob = store.as_user(BOB)
    d = in_team(store, mailbox="Private")
    hidden = refused_writes_nothing(store, lambda: bob.messages(ADA, "Private"),
                                    MailboxNotFound)
    missing = refused_writes_nothing(store, lambda: bob.messages(ADA, "Privat"),
                                     MailboxNotFound)
    assert str(hidden) == str(missing).replace("Privat'", "Private'")
    assert type(hidden) is type(missing)
    gone = store.as_user(BOB)
    message = refused_writes_nothing(store, lambda: gone.extract(d.message_id), MessageNotFound)
    assert str(message) == f"message {d.message_id} does not exist"
    # an account that does not exist answers the same way
    nobody = refused_writes_nothing(store, lambda: bob.messages(EVE, "Private"),
                                    MailboxNotFound)
    assert str(nobody) == f"mailbox: 'Private' does not exist for {EVE}"
    assert [r["path"] for r in bob.mailboxes()] == ["INBOX"]


def test_with_lookup_but_without_the_right_the_refusal_names_the_right(store):
    store.acl_set(ADA, "Team", BOB, "l")
    d = in_team(store)
    error = refused_writes_nothing(store, lambda: store.as_user(BOB).extract(d.message_id),
                                   PermissionDenied)
    assert error.missing == "r" and "'r' (read)" in str(error) and "Team" in str(error)


# -- sharing between two accounts -----------------------------------------------------------


def test_read_only_sharing_lets_bob_read_and_nothing_else(store):
    store.acl_set(ADA, "Team", BOB, "lr")
    d = in_team(store, "shared plan")
    bob = store.as_user(BOB)
    assert [m.message_id for m in bob.messages(ADA, "Team")] == [d.message_id]
    assert bob.extract(d.message_id) == make_mail("shared plan")
    assert bob.show(d.message_id)["mailbox"] == "Team"
    assert {r["path"]: r["rights"] for r in bob.mailboxes()} == {
        "INBOX": RIGHTS, f"shared/{ADA}/Team": "lr"}
    for action, right in ((lambda: bob.flag(d.message_id, ["\\Seen"]), "s"),
                          (lambda: bob.flag(d.message_id, ["$Done"]), "w"),
                          (lambda: bob.label(d.message_id, add=["x"]), "w"),
                          (lambda: bob.delete(d.message_id), "t"),
                          (lambda: bob.move(d.message_id, "Drop"), "te"),  # has 'r' 
                          (lambda: bob.expunge([d.message_id]), "e"),
                          (lambda: bob.deliver(account=ADA, mailbox="Team",
                                               raw=make_mail("x")), "i"),
                          (lambda: bob.create_mailbox(ADA, "Team/new"), "k"),
                          (lambda: bob.delete_mailbox(ADA, "Team"), "x"),
                          (lambda: bob.acl_set(ADA, "Team", BOB, "lrwa"), "a")):
        assert refused_writes_nothing(store, action, PermissionDenied).missing == right


def test_read_write_sharing_lets_bob_change_and_move_between_shared_mailboxes(store):
    store.acl_set(ADA, "Team", BOB, "lrswite")
    store.acl_set(ADA, "Drop", BOB, "li")
    d = in_team(store)
    bob = store.as_user(BOB)
    bob.flag(d.message_id, ["\\Seen", "$Done"])
    bob.label(d.message_id, add=["shared"])
    moved = bob.move(d.message_id, "Drop")
    assert moved.changed and store.show(d.message_id)["mailbox"] == "Drop"
    # in Drop bob may insert but not read: the message is now out of reach, not hidden
    error = refused_writes_nothing(store, lambda: bob.extract(d.message_id), PermissionDenied)
    assert error.missing == "r"
    bob.deliver(account=ADA, mailbox="Team", raw=make_mail("from bob"))
    assert [m.subject for m in bob.messages(ADA, "Team")] == ["from bob"]


def test_rfc_4314_negative_rights_and_groups_subtract_from_the_union(store):
    store.acl_set(ADA, "Team", "anyone", "lr")
    store.acl_set(ADA, "Team", "$sales", "lrsw")
    store.acl_set(ADA, "Team", "-" + BOB, "w")
    assert store.as_user(BOB).my_rights(ADA, "Team") == "lr"
    assert store.as_user(BOB, groups={"sales"}).my_rights(ADA, "Team") == "lrs"
    assert store.as_user(EVE, groups={"sales"}).my_rights(ADA, "Team") == "lrsw"
    store.acl_set(ADA, "Team", "-$sales", "l")
    eve = store.as_user(EVE, groups={"sales"})
    assert eve.my_rights(ADA, "Team") == "rsw"  # no lookup, the rest still holds
    assert f"shared/{ADA}/Team" not in [r["path"] for r in eve.mailboxes()]
    assert f"shared/{ADA}/Team" in [r["path"] for r in store.as_user(EVE).mailboxes()]


def test_groups_come_from_the_group_resolver(store):
    store.acl_set(ADA, "Team", "$sales", "lr")
    store.group_resolver = lambda user: frozenset({"sales"}) if user == BOB else frozenset()
    assert store.as_user(BOB).my_rights(ADA, "Team") == "lr"
    with pytest.raises(MailboxNotFound):
        store.as_user(EVE).my_rights(ADA, "Team")


# -- virtual roots --------------------------------------------------------------------------


def test_a_root_lists_relative_paths_and_nothing_above_it_can_be_named(store):
    store.acl_set(ADA, "Team", BOB, "lrk")
    store.acl_set(ADA, "Team/2024", BOB, "lr")
    store.acl_set(ADA, "Private", BOB, "lr")
    store.set_root(BOB, f"{ADA}/Team")
    bob = store.as_user(BOB)
    paths = [r["path"] for r in bob.mailboxes()]
    assert paths == ["/", "2024", f"shared/{BOB}/INBOX"]
    assert bob.resolve("2024") == (ADA, "Team/2024")
    assert bob.resolve("/") == (ADA, "Team")
    for above in ("..", "../Private", "2024/../.."):
        with pytest.raises(MailboxNotFound):
            bob.resolve(above)
    # Private is above the root: not found, even though bob has rights there
    refused_writes_nothing(store, lambda: bob.messages(ADA, "Private"), MailboxNotFound)
    refused_writes_nothing(store, lambda: bob.create_mailbox(ADA, "Top"), MailboxNotFound)
    bob.create_mailbox(*bob.resolve("2025"))
    assert store.as_user(BOB).resolve("2025") == (ADA, "Team/2025")


def test_root_set_and_delete_are_events_that_keep_the_old_root(store):
    store.set_root(BOB, ADA)
    changed = store.set_root(BOB, f"{ADA}/Team")
    assert changed.extra["old_root"] == ADA
    assert store.roots() == {BOB: f"{ADA}/Team"} and store.root(BOB) == f"{ADA}/Team"
    deleted = store.delete_root(BOB)
    events = [e for _, e in store.events() if isinstance(e, VirtualRoot.Deleted)]
    assert events[-1].old_root == f"{ADA}/Team" and deleted.extra["old_root"] == f"{ADA}/Team"
    assert store.roots() == {} and store.root(BOB) is None
    assert not store.set_root(BOB, ADA).extra.get("old_root")


def test_acl_delete_keeps_the_old_rights_and_a_deleted_mailbox_leaves_no_entry(store):
    store.acl_set(ADA, "Team/2024", BOB, "lr")
    store.acl_set(ADA, "Team/2024", "$sales", "lrs")
    assert store.acl_delete(ADA, "Team/2024", BOB).extra["old_rights"] == "lr"
    removed = [e for _, e in store.events() if isinstance(e, Mailbox.AclChanged)
               and not e.new_rights]
    assert [(e.identifier, e.old_rights) for e in removed] == [(BOB, "lr")]
    store.delete_mailbox(ADA, "Team/2024")
    assert store.acl_entries() == []
    assert store.as_user(BOB, groups={"sales"}).mailboxes()[0]["path"] == "INBOX"


def test_the_access_tables_are_identical_after_rebuild_and_verify(store):
    store.acl_set(ADA, "Team", BOB, "lr")
    store.acl_set(ADA, "Team", "-" + EVE, "l")
    store.acl_set(ADA, "Private", "anyone", "l")
    store.acl_set(ADA, "Private", "anyone", "")
    store.set_root(BOB, f"{ADA}/Team")
    store.set_root(EVE, ADA)
    store.delete_root(EVE)
    store.rename_mailbox(ADA, "Team", "Crew")
    entries, roots = store.acl_entries(), store.roots()
    assert entries == [(ADA, "Crew", "-" + EVE, "l"), (ADA, "Crew", BOB, "lr")]
    reports = {r.table: r for r in store.verify()}
    assert {"acl", "visible_mailboxes", "roots"} <= set(reports)
    assert all(r.identical for r in reports.values())
    assert reports["acl"].live_cells == 2 and reports["roots"].live_rows == 1
    store.rebuild(["acl", "visible_mailboxes", "roots"])
    assert all(r.identical for r in store.verify())
    assert store.acl_entries() == entries and store.roots() == roots


def test_a_thread_shows_a_user_only_the_messages_of_mailboxes_it_may_read(store):
    first = store.deliver(account=ADA, mailbox="Team", raw=make_mail(
        "a thread", message_id="<t1@example.org>"))
    reply = store.deliver(account=ADA, mailbox="Private", raw=make_mail(
        "Re: a thread", message_id="<t2@example.org>", in_reply_to="<t1@example.org>"))
    assert store.show(reply.message_id)["thread_id"] == store.show(first.message_id)["thread_id"]
    thread_id = UUID(store.show(first.message_id)["thread_id"])
    assert len(store.thread(thread_id)) == 2
    store.acl_set(ADA, "Team", BOB, "lr")
    store.acl_set(ADA, "Private", BOB, "l")  # looks it up, may not read it
    seen = store.as_user(BOB).thread(thread_id)
    assert [row.message_id for row in seen] == [first.message_id]
    assert store.as_user(EVE).thread(thread_id) == []


def test_a_right_taken_by_another_writer_is_refused_at_once_despite_the_checks_cache(
        store, tmp_path):
    """The checks read the command side's current aggregates through its cache; another
    writer (another store on the same data, as another process) changing the ACL moves the
    log's head, and the next check reads the mailbox again."""
    d = in_team(store)
    store.acl_set(ADA, "Team", BOB, "lr")
    bob = store.as_user(BOB)
    assert bob.show(d.message_id)["mailbox"] == "Team"  # read, and cached
    with Letterlog.open(store.settings.data, create=False, durability="normal") as other:
        other.acl_delete(ADA, "Team", BOB)
    refused_writes_nothing(store, lambda: bob.show(d.message_id), MessageNotFound)
    with Letterlog.open(store.settings.data, create=False, durability="normal") as other:
        other.acl_set(ADA, "Team", BOB, "lr")
    assert bob.show(d.message_id)["mailbox"] == "Team"


def test_open_with_a_user_acts_as_that_user(tmp_path, store):
    store.acl_set(ADA, "Team", BOB, "lr")
    data = store.settings.data
    store.close()
    with Letterlog.open(data, user=BOB) as bob:
        assert isinstance(bob, CallerView) and bob.user == BOB
        assert bob.my_rights(ADA, "Team") == "lr"
        assert not hasattr(bob, "purge")  # the user's face only (adapters.face.Face)


# -- the table: every command is checked for the rights it names ---------------------------


def _commands(store: Letterlog, bob: CallerView) -> dict[str, Callable[[], Any]]:
    """One call per command of the table, on Team (Drop as a move's or copy's target)."""
    d = in_team(store)
    store.flag(d.message_id, ["\\Deleted"])  # an expunge removes only \Deleted messages

    def upload() -> Any:
        return bob.begin_upload(account=ADA, mailbox="Team")

    return {
        "deliver": lambda: bob.deliver(account=ADA, mailbox="Team", raw=make_mail("n")),
        "begin_upload": upload,
        "extract": lambda: bob.extract(d.message_id),
        "body": lambda: b"".join(bob.body(ADA, "Team", 1)),
        "show": lambda: bob.show(d.message_id),
        "messages": lambda: bob.messages(ADA, "Team"),
        "search": lambda: bob.search(ADA, "Team"),
        "mailbox_status": lambda: bob.mailbox_status(ADA, "Team"),
        "flag": lambda: bob.flag(d.message_id, ["$Done"]),
        "label": lambda: bob.label(d.message_id, add=["x"]),
        "set_policy": lambda: bob.set_policy(d.message_id, extract_limit=9),
        "move": lambda: bob.move(d.message_id, "Drop"),
        "copy": lambda: bob.copy(d.message_id, "Drop"),
        "delete": lambda: bob.delete(d.message_id),
        "restore": lambda: bob.restore(d.message_id),
        "expunge": lambda: bob.expunge([d.message_id]),
        "create_mailbox": lambda: bob.create_mailbox(ADA, "Team/new"),
        "rename_mailbox": lambda: bob.rename_mailbox(ADA, "Team/2024", "Team/2023"),
        "delete_mailbox": lambda: bob.delete_mailbox(ADA, "Team/2024"),
        "mailbox_list": lambda: bob.my_rights(ADA, "Team"),
        "acl_get": lambda: bob.acl_get(ADA, "Team"),
        "acl_set": lambda: bob.acl_set(ADA, "Team", EVE, "l"),
        "acl_delete": lambda: bob.acl_delete(ADA, "Team", EVE),
        "my_rights": lambda: bob.my_rights(ADA, "Team"),
    }


TESTED = sorted(set(COMMAND_RIGHTS) - {"append_chunk", "complete_upload"})


@pytest.mark.parametrize("command", TESTED)
def test_each_command_needs_the_rights_of_the_table(store, command):
    needs = COMMAND_RIGHTS[command]
    for role, rights in needs.items():
        for right in rights:
            if right == "l":
                continue
            everything_but = "".join(r for r in RIGHTS if r != right)
            for mailbox in ("Team", "Team/2024", "Drop"):
                store.acl_set(ADA, mailbox, BOB, RIGHTS)
            target = {"target": "Drop", "parent": "Team"}.get(role, "Team")
            if command in ("rename_mailbox", "delete_mailbox") and role == "mailbox":
                target = "Team/2024"
            store.acl_set(ADA, target, BOB, everything_but)
            action = _commands(store, store.as_user(BOB))[command]
            error = refused_writes_nothing(store, action, PermissionDenied)
            assert right in error.missing, (command, role, right, error)
    for mailbox in ("Team", "Team/2024", "Drop"):
        store.acl_set(ADA, mailbox, BOB, "".join(set("l" + "".join(needs.values()))))
    _commands(store, store.as_user(BOB))[command]()  # exactly the rights: allowed


def test_every_method_a_user_may_call_has_a_line_in_the_table():
    checked = {"deliver", "check_delivery", "begin_upload", "append_chunk",
               "complete_upload", "extract", "extract_to", "extract_to_stream", "show",
               "flag", "label", "set_policy", "move", "copy", "delete", "restore", "expunge",
               "create_mailbox", "rename_mailbox", "delete_mailbox", "acl_get", "acl_set",
               "acl_delete", "my_rights", "messages", "search", "mailbox_status", "body"}
    public = {name for name in dir(CallerView) if not name.startswith("_")}  # with its parts
    owner_or_naming = {"counters", "usage", "subscriptions", "label_messages", "subscribe",
                       "unsubscribe",
                       "mailbox_list", "mailboxes", "root", "resolve", "path_of", "user",
                       "close", "quota", "quota_shown", "reading",
                       "thread"}  # the rows of mailboxes the user may read (a test above)
    assert public - owner_or_naming == checked
    aliases = {"check_delivery": "deliver", "extract_to": "extract",
               "extract_to_stream": "extract"}
    assert {aliases.get(name, name) for name in checked} <= set(COMMAND_RIGHTS)


# -- the user purge job on a real store -----------------------------------------------------


def test_the_user_purge_removes_a_gone_users_root_and_rights_as_events(store, tmp_path):
    from adapters.directory.passwdfile import PasswdFileDirectory
    from adapters.lifecycle.purgememory import PurgeMemory
    from adapters.lifecycle.userpurge import purge_users

    passwd = tmp_path / "users.passwd"
    passwd.write_text(f"{ADA}:{{PLAIN}}x\n")  # bob is gone; ada stays
    store.acl_set(ADA, "Team", BOB, "lr")
    store.acl_set(ADA, "Team", "$sales", "lr")
    store.acl_set(ADA, "Team", ADA, "lrs")
    store.set_root(BOB, f"{ADA}/Team")
    report = purge_users(PasswdFileDirectory(passwd), store, PurgeMemory(tmp_path / "m.json"),
                         min_ratio=0.5, accept_shrink=True)
    assert report.status == "purged", report.reason
    assert store.roots() == {}
    assert store.acl_entries() == [(ADA, "Team", "$sales", "lr"), (ADA, "Team", ADA, "lrs")]
    removed = [e for _, e in store.events() if isinstance(e, Mailbox.AclChanged)
               and not e.new_rights]
    assert [(e.identifier, e.old_rights) for e in removed] == [(BOB, "lr")]
    assert all(r.identical for r in store.verify())
