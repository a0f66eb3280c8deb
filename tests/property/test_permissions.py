"""Property: whatever rights a user holds on a mailbox, a command it lacks a right for changes
nothing (the log and every table, cell for cell and version for version, are as before), and
a mailbox it may not look up is never revealed (refused with the very words used for a
mailbox that does not exist). A command that succeeds is one the rights allow."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.embedded import Letterlog
from domain.errors import MailboxNotFound, MessageNotFound, NotFound, PermissionDenied
from domain.rights import RIGHTS, Caller, flag_rights, rights_of
from projections.registry import TABLE_SPECS
from tests.factories import make_mail

ADA, BOB = "ada@example.org", "bob@example.org"
rights = st.sets(st.sampled_from(RIGHTS)).map(lambda s: "".join(sorted(s)))

# command -> (the rights it needs on Team, on Drop), and how to run it as bob
COMMANDS: dict[str, tuple[str, str, Callable[[Any, Any], Any]]] = {
    "messages": ("r", "", lambda bob, d: bob.messages(ADA, "Team")),
    "extract": ("r", "", lambda bob, d: bob.extract(d.message_id)),
    "show": ("r", "", lambda bob, d: bob.show(d.message_id)),
    "seen": ("s", "", lambda bob, d: bob.flag(d.message_id, ["\\Seen"])),
    "flag": ("w", "", lambda bob, d: bob.flag(d.message_id, ["$Done", "\\Deleted"])),
    "label": ("w", "", lambda bob, d: bob.label(d.message_id, add=["x"])),
    "delete": ("t", "", lambda bob, d: bob.delete(d.message_id)),
    "expunge": ("e", "", lambda bob, d: bob.expunge([d.message_id])),
    "move": ("te", "i", lambda bob, d: bob.move(d.message_id, "Drop")),
    "copy": ("r", "i", lambda bob, d: bob.copy(d.message_id, "Drop")),
    "deliver": ("i", "", lambda bob, d: bob.deliver(account=ADA, mailbox="Team",
                                                     raw=make_mail("by bob"))),
    "create": ("k", "", lambda bob, d: bob.create_mailbox(ADA, f"Team/{d.uid}")),
    "acl": ("a", "", lambda bob, d: bob.acl_set(ADA, "Team", "anyone", "lr")),
    "delete_mailbox": ("x", "", lambda bob, d: bob.delete_mailbox(ADA, "Team")),
}
COMMANDS["flag"] = ("", "", COMMANDS["flag"][2])  # needs: flag_rights, below


def everything(store: Letterlog) -> tuple[int, list[Any]]:
    """The log's head and every cell of every table, with its version."""
    host = store.projections
    cells = [(spec.name, list(host.tables.scan_cells(host.physical(spec.name))))
             for spec in TABLE_SPECS]
    return store.max_position(), cells


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Letterlog]:
    s = Letterlog.open(tmp_path_factory.mktemp("rights") / "data", durability="normal")
    s.deliver(account=BOB, raw=make_mail("bob's own"))
    s.create_mailbox(ADA, "Drop", create_account=True)
    yield s
    s.close()


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(team=rights, drop=rights, anyone=rights, negative=rights,
       command=st.sampled_from(sorted(COMMANDS)))
def test_a_command_lacking_a_right_changes_nothing_and_reveals_nothing(
        store, team, drop, anyone, negative, command):
    if "Team" not in {mb["name"] for mb in store.mailbox_list(ADA)}:
        store.create_mailbox(ADA, "Team")
    d = store.deliver(account=ADA, mailbox="Team", raw=make_mail("for the property"))
    store.acl_set(ADA, "Team", BOB, team)
    store.acl_set(ADA, "Team", "anyone", anyone)
    store.acl_set(ADA, "Team", "-" + BOB, negative)
    store.acl_set(ADA, "Drop", BOB, drop)
    bob = store.as_user(BOB)
    caller = Caller(BOB)
    on_team = rights_of(caller, ADA, store.acl_get(ADA, "Team"))
    on_drop = rights_of(caller, ADA, store.acl_get(ADA, "Drop"))
    need_team, need_drop, run = COMMANDS[command]
    if command == "flag":
        need_team = flag_rights(["$Done", "\\Deleted"])
    allowed = set(need_team) <= on_team and set(need_drop) <= on_drop
    before = everything(store)
    try:
        run(bob, d)
    except PermissionDenied as error:
        assert not allowed
        assert everything(store) == before
        assert error.missing and set(error.missing) <= set(RIGHTS)
        where = on_team if set(error.missing) <= set(need_team) else on_drop
        assert "l" in where  # named a right only where bob may look the mailbox up
    except NotFound as error:
        assert not allowed
        assert everything(store) == before
        if isinstance(error, MessageNotFound):
            assert str(error) == f"message {d.message_id} does not exist"
            assert "l" not in on_team
        else:
            assert isinstance(error, MailboxNotFound)
            hidden = "Team" if "l" not in on_team else "Drop"
            assert "l" not in (on_team if hidden == "Team" else on_drop)
            with pytest.raises(MailboxNotFound) as missing:
                bob.messages(ADA, "Nowhere")
            assert str(error) == str(missing.value).replace("'Nowhere'", f"'{hidden}'")
    else:
        assert allowed, (command, team, drop, anyone, negative)
