"""``mailbox_names``: an account's mailbox name -> mailbox id.

Row key: ``salt(account) + account id (16) + name (UTF-8)``; a prefix scan of
``salt(account) + account id`` lists an account's mailboxes by name. Family ``n``:
``n:mailbox`` = the mailbox id (16 bytes). A rename deletes the old row (at the event's
position) and writes the new one; an unregistered name's row is deleted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain.account import Account
from projections import names as n
from projections.codec import put
from projections.keys import RowReader, mailbox_name_row
from projections.tablestore import DeleteRow, Mutation, TableSpec

T = n.MAILBOX_NAMES
TABLES = (TableSpec(T, (n.F_NAME,)),)


def _registered(e: Account.MailboxRegistered, p: int) -> list[Mutation]:
    row = mailbox_name_row(e.originator_id, e.name)
    return [put(T, row, n.MN_MAILBOX, e.mailbox_id.bytes, p)]


def _renamed(e: Account.MailboxRenamed, p: int) -> list[Mutation]:
    return [
        DeleteRow(T, mailbox_name_row(e.originator_id, e.old_name), p),
        put(T, mailbox_name_row(e.originator_id, e.new_name), n.MN_MAILBOX, e.mailbox_id.bytes, p),
    ]


def _unregistered(e: Account.MailboxUnregistered, p: int) -> list[Mutation]:
    return [DeleteRow(T, mailbox_name_row(e.originator_id, e.name), p)]


_HANDLERS: dict[type, Callable[[Any, int], list[Mutation]]] = {
    Account.MailboxRegistered: _registered,
    Account.MailboxRenamed: _renamed,
    Account.MailboxUnregistered: _unregistered,
}
HANDLED = frozenset(_HANDLERS)


def project(event: object, position: int, read: RowReader) -> list[Mutation]:
    handler = _HANDLERS.get(type(event))
    return [] if handler is None else handler(event, position)
