"""``visible_mailboxes``: per identifier, the mailboxes it may look up (``l``), so that
"every mailbox I may use" is one scan per identifier naming the caller.

Row key: salt(identifier) + identifier (UTF-8) + ``0x00`` + mailbox id (16 bytes).
Identifiers are those of ACL entries: a user, ``$group``, ``anyone``, ``authenticated``,
and the negative ones (``-bob``). Family ``v``: ``v:account``, the mailbox's account id.

A user's visible mailboxes are the rows of the user, each of its groups, ``anyone`` and
``authenticated``, minus the rows of the same identifiers negated (a negative ``l``), plus
its own account's mailboxes (the owner's, from ``mailbox_names``). A row appears when an
entry gains ``l`` and is deleted (at the event's position) when it loses it or goes; a
mailbox deleted loses its entries first (``Mailbox.AclChanged`` to no rights), so no row
outlives it.
"""

from __future__ import annotations

from domain.identity import identifier_of_event
from domain.mailbox import Mailbox
from projections import names as n
from projections.codec import put
from projections.keys import RowReader, visible_row
from projections.tablestore import DeleteRow, Mutation, TableSpec

T = n.VISIBLE_MAILBOXES
TABLES = (TableSpec(T, (n.F_VISIBLE,)),)
HANDLED = frozenset({Mailbox.AclChanged})


def project(event: object, position: int, read: RowReader) -> list[Mutation]:
    if type(event) is not Mailbox.AclChanged:
        return []
    e: Mailbox.AclChanged = event
    had, has = "l" in e.old_rights, "l" in e.new_rights
    if had == has:
        return []
    row = visible_row(identifier_of_event(e.identifier), e.originator_id)
    if has:
        return [put(T, row, n.VIS_ACCOUNT, e.account_id.bytes, position)]
    return [DeleteRow(T, row, position)]
