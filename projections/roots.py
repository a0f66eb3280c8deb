"""``roots``: every user's virtual root, for the administrator's list (and the user purge).

Row key: the user's name folded to lower case (UTF-8). Family ``r``: ``r:user`` (the name as
set) and ``r:root`` (``account`` or ``account/path``); a root deleted deletes the row at the
event's position.
"""

from __future__ import annotations

from domain.roots import VirtualRoot
from projections import names as n
from projections.codec import put
from projections.keys import RowReader, root_row
from projections.tablestore import DeleteRow, Mutation, TableSpec

T = n.ROOTS
TABLES = (TableSpec(T, (n.F_ROOT,), split_by_salt=False),)
HANDLED = frozenset({VirtualRoot.Set, VirtualRoot.Deleted})


def project(event: object, position: int, read: RowReader) -> list[Mutation]:
    if type(event) is VirtualRoot.Set:
        row = root_row(event.user)
        return [put(T, row, n.ROOT_USER, event.user.encode(), position),
                put(T, row, n.ROOT_ROOT, event.root.encode(), position)]
    if type(event) is VirtualRoot.Deleted:
        return [DeleteRow(T, root_row(event.user), position)]
    return []
