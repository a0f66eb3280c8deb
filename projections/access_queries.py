"""Reads of the access read models: ``acl``, ``visible_mailboxes`` and ``roots``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from uuid import UUID

from projections import names as n
from projections.keys import visible_prefix
from projections.tablestore import TableStore

Physical = Callable[[str], str]


def _same(name: str) -> str:
    return name


def acl_entries(store: TableStore, physical: Physical = _same
                ) -> list[tuple[UUID, str, str]]:
    """Every ACL entry: (mailbox id, identifier, rights), in row and column order."""
    out = []
    for row, cells in store.scan(physical(n.ACL)):
        mailbox_id = UUID(bytes=row)
        for column, value in cells.items():
            out.append((mailbox_id, column[len(n.ACL_PREFIX):].decode(), value.decode()))
    return out


def visible_mailboxes(store: TableStore, identifiers: Iterable[str],
                      physical: Physical = _same) -> dict[UUID, UUID]:
    """Mailbox id -> account id of every mailbox one of the positive ``identifiers`` may
    look up, less those one of them negated may not (RFC 4314: negative rights win)."""
    table = physical(n.VISIBLE_MAILBOXES)
    seen: dict[UUID, UUID] = {}
    hidden: set[UUID] = set()
    for ident in identifiers:
        for sign, into in (("", True), ("-", False)):
            prefix = visible_prefix(sign + ident)
            for row, cells in store.scan(table, prefix=prefix):
                mailbox_id = UUID(bytes=row[len(prefix):])
                if into:
                    seen[mailbox_id] = UUID(bytes=cells[n.VIS_ACCOUNT])
                else:
                    hidden.add(mailbox_id)
    return {m: a for m, a in seen.items() if m not in hidden}


def roots(store: TableStore, physical: Physical = _same) -> dict[str, str]:
    """Every user's virtual root: user -> ``account[/path]``."""
    return {cells[n.ROOT_USER].decode(): cells[n.ROOT_ROOT].decode()
            for _, cells in store.scan(physical(n.ROOTS))}
