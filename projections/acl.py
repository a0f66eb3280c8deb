"""``acl``: every mailbox's ACL entries (RFC 4314), for ``letterlog acl`` and the
administrator's list of them.

Row key: the mailbox id (16 bytes: a rename keeps the row; a deleted mailbox's entries are
removed by its own events first). Family ``a``: one column ``a:<identifier UTF-8>`` per
entry, value the rights in RFC 4314's order; an entry removed is deleted at the event's
position.
"""

from __future__ import annotations

from domain.identity import identifier_of_event
from domain.mailbox import Mailbox
from projections import names as n
from projections.codec import put
from projections.keys import RowReader, acl_column
from projections.tablestore import DeleteColumn, Mutation, TableSpec

T = n.ACL
TABLES = (TableSpec(T, (n.F_ACL,), split_by_salt=False),)
HANDLED = frozenset({Mailbox.AclChanged})


def project(event: object, position: int, read: RowReader) -> list[Mutation]:
    if type(event) is not Mailbox.AclChanged:
        return []
    e: Mailbox.AclChanged = event
    row, column = e.originator_id.bytes, acl_column(identifier_of_event(e.identifier))
    if e.new_rights:
        return [put(T, row, column, e.new_rights.encode(), position)]
    return [DeleteColumn(T, row, column, position)]
