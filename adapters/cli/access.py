"""``letterlog acl get|set|add|remove|delete|rights|list`` (RFC 4314 rights on a mailbox, in
the manner of ``doveadm acl``) and ``letterlog root set|get|delete|list`` (users' virtual
roots). Each change is an event. With the global ``--as USER`` the command runs as that user
(``acl get/set/...`` need ``a`` on the mailbox; ``root`` is the administrator's). See
docs/permissions.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from adapters.cli.common import group, out, state
from domain.rights import RIGHTS

if TYPE_CHECKING:
    from adapters.face import Face

app = group("Rights on mailboxes and virtual roots.")
SECTION = (160, 'Access')  # the root help's section (adapters.cli.table)
acl_app = group("RFC 4314 rights on a mailbox (l r s w i p k x t e a) for a user, $group, "
                "anyone or authenticated; '-ID' is a negative entry.")
root_app = group("Virtual roots: the mailbox a user sees as its top (ACCOUNT[/PATH]).")
app.add_typer(acl_app, name="acl")
app.add_typer(root_app, name="root")

Account = Annotated[str, typer.Argument(metavar="ACCOUNT", help="the mailbox's account")]
Mailbox = Annotated[str, typer.Argument(metavar="MAILBOX", help="the mailbox's name")]
Identifier = Annotated[str, typer.Argument(
    metavar="ID", help="a user, $group, anyone or authenticated; -ID for a negative entry")]
Rights = Annotated[str, typer.Argument(
    metavar="RIGHTS", help="rights letters, e.g. lrs (RFC 4314: l r s w i p k x t e a)")]
User = Annotated[str, typer.Argument(metavar="USER", help="the user's name")]


def _changed(account: str, mailbox: str, identifier: str, change: object, verb: str) -> None:
    extra = getattr(change, "extra", {})
    rights = extra.get("rights", "")
    out({"account": account, "mailbox": mailbox, "identifier": identifier,
         "changed": getattr(change, "changed", False),
         "position": getattr(change, "position", 0), **extra},
        f"{identifier}: {rights or '(no entry)'}" + ("" if getattr(change, "changed", False)
                                                      else f" ({verb}: unchanged)"))


@acl_app.command("get")
def acl_get(account: Account, mailbox: Mailbox) -> None:
    """The mailbox's ACL: each identifier and its rights."""
    entries = state.reader().acl_get(account, mailbox)
    if state.json:
        for identifier, rights in sorted(entries.items()):
            out({"account": account, "mailbox": mailbox, "identifier": identifier,
                 "rights": rights})
        return
    for identifier, rights in sorted(entries.items()):
        typer.echo(f"{identifier:30} {rights}")


@acl_app.command("set")
def acl_set(account: Account, mailbox: Mailbox, identifier: Identifier,
            rights: Rights) -> None:
    """Set ID's rights to RIGHTS exactly (replacing what it had)."""
    change = state.reader().acl_set(account, mailbox, identifier, rights.lstrip("="))
    _changed(account, mailbox, identifier, change, "set")


@acl_app.command("add")
def acl_add(account: Account, mailbox: Mailbox, identifier: Identifier,
            rights: Rights) -> None:
    """Add RIGHTS to ID's rights."""
    change = state.reader().acl_set(account, mailbox, identifier, "+" + rights.lstrip("+"))
    _changed(account, mailbox, identifier, change, "add")


@acl_app.command("remove")
def acl_remove(account: Account, mailbox: Mailbox, identifier: Identifier,
               rights: Rights) -> None:
    """Take RIGHTS from ID's rights (none left: the entry goes)."""
    change = state.reader().acl_set(account, mailbox, identifier, "-" + rights.lstrip("-"))
    _changed(account, mailbox, identifier, change, "remove")


@acl_app.command("delete")
def acl_delete(account: Account, mailbox: Mailbox, identifier: Identifier) -> None:
    """Remove ID's entry (the event keeps its rights, so it can be set back)."""
    change = state.reader().acl_delete(account, mailbox, identifier)
    out({"account": account, "mailbox": mailbox, "identifier": identifier,
         "changed": change.changed, "position": change.position, **change.extra},
        f"deleted {identifier} (had {change.extra.get('old_rights') or 'no entry'})")


@acl_app.command("rights")
def acl_rights(account: Account, mailbox: Mailbox) -> None:
    """The rights of the caller (--as USER; else the administrator: all) on the mailbox."""
    store = state.reader()
    my_rights = getattr(store, "my_rights", None)
    rights = my_rights(account, mailbox) if my_rights is not None else _all(store, account,
                                                                           mailbox)
    out({"account": account, "mailbox": mailbox, "rights": rights}, rights)


def _all(store: Face, account: str, mailbox: str) -> str:
    """The administrator: every right, on a mailbox that exists."""
    store.acl_get(account, mailbox)
    return RIGHTS


@acl_app.command("list")
def acl_list() -> None:
    """Every ACL entry of the store (the administrator's)."""
    for account, mailbox, identifier, rights in state.admin_reader().acl_entries():
        out({"account": account, "mailbox": mailbox, "identifier": identifier,
             "rights": rights}, f"{account}  {mailbox}  {identifier}  {rights}")


@root_app.command("set")
def root_set(user: User, root: Annotated[str, typer.Argument(
        metavar="ACCOUNT[/PATH]", help="the account, and optionally a mailbox of it")]) -> None:
    """Set USER's virtual root: USER lists mailboxes relative to it and names none above."""
    change = state.admin_reader().set_root(user, root)
    out({"user": user, "changed": change.changed, "position": change.position,
         **change.extra}, f"{user}: {change.extra.get('root', root)}"
                          + ("" if change.changed else " (unchanged)"))


@root_app.command("get")
def root_get(user: User) -> None:
    """USER's virtual root (none: its own account)."""
    root = state.admin_reader().root(user)
    out({"user": user, "root": root}, root or "(none: the user's own account)")


@root_app.command("delete")
def root_delete(user: User) -> None:
    """Remove USER's virtual root (the event keeps it, so it can be set back)."""
    change = state.admin_reader().delete_root(user)
    out({"user": user, "position": change.position, **change.extra},
        f"deleted {user}'s root (was {change.extra['old_root']})")


@root_app.command("list")
def root_list() -> None:
    """Every virtual root."""
    for user, root in state.admin_reader().roots().items():
        out({"user": user, "root": root}, f"{user}  {root}")
