"""Commands on mailboxes and subscriptions."""

from __future__ import annotations

from typing import Annotated

import typer

from adapters.cli.common import fail, group, out, state

app = group("Mailboxes and subscriptions.")
SECTION = (20, 'Mailboxes')  # the root help's section (adapters.cli.table)
mailbox_app = group("Create, rename, delete and list mailboxes.")
app.add_typer(mailbox_app, name="mailbox")

NOSELECT = "\\Noselect"
ROLES = ("inbox", "sent", "drafts", "trash", "junk", "archive")
Account = Annotated[str, typer.Argument(metavar="ACCOUNT", help="the account's address")]
Name = Annotated[str, typer.Argument(metavar="NAME", help="mailbox name")]


CreateAccount = Annotated[bool, typer.Option(
    "--create-account", help="open ACCOUNT (with its INBOX) if it does not exist; without it"
    " an unknown account is an error and nothing is written")]


@mailbox_app.command("create")
def mailbox_create(account: Account, name: Name,
                   role: Annotated[str, typer.Option(metavar="ROLE", help="special use: "
                                                     + ", ".join(ROLES))] = "",
                   create_account: CreateAccount = False) -> None:
    """Create mailbox NAME for ACCOUNT ('/' separates levels: Archive/2024)."""
    if role and role not in ROLES:
        fail(f"--role: {role!r} is not one of {', '.join(ROLES)}")
    c = state.store().create_mailbox(account, name, role, create_account=create_account)
    out({"account": account, "mailbox": name, "position": c.position, **c.extra},
        f"created {name}" + (f" (and the account {account})"
                             if c.extra.get("account_created") else ""))


@mailbox_app.command("rename")
def mailbox_rename(account: Account, name: Name,
                   new_name: Annotated[str, typer.Argument(metavar="NEW_NAME",
                                                           help="its new name")]) -> None:
    """Rename a mailbox and every mailbox below it (NAME/... becomes NEW_NAME/...); each
    keeps its messages, UIDs and UIDVALIDITY. INBOX cannot be renamed."""
    c = state.reader().rename_mailbox(account, name, new_name)
    out({"account": account, "mailbox": new_name, "position": c.position, **c.extra},
        "\n".join(f"renamed {r['from']} to {r['to']}" for r in c.extra["renamed"]))


@mailbox_app.command("delete")
def mailbox_delete(account: Account, name: Name) -> None:
    """Delete a mailbox and expunge its messages. One with mailboxes below it keeps its
    name as \\Noselect (no messages) until they are gone; deleting it again then removes it."""
    c = state.reader().delete_mailbox(account, name)
    out({"account": account, "mailbox": name, "position": c.position, **c.extra},
        f"deleted {name}" + (" (kept as \\Noselect: mailboxes below it exist)"
                             if c.extra.get("noselect") else ""))


@mailbox_app.command("list")
def mailbox_list(account: Annotated[str | None, typer.Argument(
        metavar="[ACCOUNT]", help="the account's address (with --as USER: optional, every "
        "mailbox USER may use, named relative to its root)")] = None) -> None:
    """List an account's mailboxes (\\Noselect: deleted, kept as a name for those below)."""
    if account is None and state.user is None:
        fail("ACCOUNT: give the account (or --as USER for the mailboxes USER may use)")
    for mb in state.reader().mailbox_list(account):
        noselect = "  " + NOSELECT if mb["noselect"] else ""
        out(mb, f"{mb.get('path', mb['name']):20} role={mb['role'] or '-':8} "
                f"uidvalidity={mb['uidvalidity']} "
                f"uidnext={mb['uidnext']}{noselect}"
                f"{'  (subscribed)' if mb['subscribed'] else ''}")


@app.command()
def subscribe(account: Account, mailbox: Name, create_account: CreateAccount = False) -> None:
    """Subscribe ACCOUNT to MAILBOX (by name); the account must exist (or --create-account)."""
    c = state.reader().subscribe(account, mailbox, create_account=create_account)
    out({"account": account, "mailbox": mailbox, "changed": c.changed, "position": c.position},
        f"subscribed {mailbox}" + ("" if c.changed else " (already)"))


@app.command()
def unsubscribe(account: Account, mailbox: Name) -> None:
    """Unsubscribe ACCOUNT from MAILBOX."""
    c = state.reader().unsubscribe(account, mailbox)
    out({"account": account, "mailbox": mailbox, "changed": c.changed, "position": c.position},
        f"unsubscribed {mailbox}" + ("" if c.changed else " (was not subscribed)"))
