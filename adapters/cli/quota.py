"""``letterlog quota get|set ACCOUNT``: an account's quota (bytes and messages) and its
usage, and setting the account's own quota (an ``Account.QuotaSet`` event).

A value is a limit (sizes as ``10M``, ``1G``, ``1500``), ``unlimited``, or ``default`` (the
``LETTERLOG_QUOTA_BYTES`` / ``_MESSAGES`` settings apply). Bad input is one line and exit
status 2, and nothing is written. docs/permissions.md "Quotas", ADR 0050.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from adapters.cli.common import fail, group, out, quota_text, state
from domain.errors import AccountNotFound, PermissionDenied
from domain.quota import DEFAULT, UNLIMITED, parse_size

app = group("Quotas: per-account limits on bytes and messages.")
SECTION = (170, 'Quotas')  # the root help's section (adapters.cli.table)
quota_app = group("An account's quota (bytes, messages) and its usage; `set` gives the "
                  "account its own (see docs/permissions.md, Quotas).")
app.add_typer(quota_app, name="quota")

Account = Annotated[str, typer.Argument(metavar="ACCOUNT", help="the account's address")]


def parse_limit(value: str | None, what: str, *, size: bool) -> int | None:
    """``unlimited`` -> 0, ``default`` -> -1, else a positive number (a size if ``size``)."""
    if value is None:
        return None
    text = value.strip().lower()
    if text == "unlimited":
        return UNLIMITED
    if text == "default":
        return DEFAULT
    try:
        number = parse_size(text) if size else int(text)
    except ValueError:
        example = "10M, 1G, 1500" if size else "1000"
        fail(f"{what}: {value!r} is not a limit (e.g. {example}, unlimited or default)")
    if number <= 0:
        fail(f"{what}: {value!r}: a limit is at least 1 (0 is written `unlimited`)")
    return number


def quota_of(account: str) -> dict[str, Any] | None:
    """The account's quota and usage from the command side (None: no such account, or a
    caller (``--as USER``) that may not read quotas: the administrator's)."""
    try:
        return dict(state.store(read_models=False).quota(account))
    except (AccountNotFound, PermissionDenied):
        return None


@quota_app.command("get")
def quota_get(account: Account) -> None:
    """The account's limits (its own, or the default's) and its usage up to the log's
    head."""
    q = state.store(read_models=False).quota(account)
    if state.json:
        out(q)
        return
    typer.echo(f"account  {q['account']}")
    typer.echo(quota_text(q))


@quota_app.command("set")
def quota_set(
    account: Account,
    bytes_: Annotated[str | None, typer.Option(
        "--bytes", metavar="SIZE", help="bytes the account may hold (10M, 1G, 1500), "
        "unlimited, or default")] = None,
    messages: Annotated[str | None, typer.Option(
        metavar="N", help="messages the account may hold, unlimited, or default")] = None,
    unlimited: Annotated[bool, typer.Option(
        help="no limit on bytes nor messages (whatever the default)")] = False,
) -> None:
    """Gives ACCOUNT its own quota (an event; a limit not given stays as it is)."""
    size = parse_limit(bytes_, "--bytes", size=True)
    count = parse_limit(messages, "--messages", size=False)
    if unlimited:
        if size is not None or count is not None:
            fail("--unlimited: give it alone, or --bytes / --messages")
        size = count = 0
    if size is None and count is None:
        fail("quota set: give --bytes, --messages or --unlimited")
    store = state.admin()
    change = store.set_quota(account, bytes=size, messages=count)
    q = store.quota(account)
    if state.json:
        out({**q, "changed": bool(change.positions), "position": change.position})
        return
    typer.echo(("set: " if change.positions else "unchanged: ") + quota_text(q))
