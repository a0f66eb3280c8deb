"""``mailboxes``: one row per mailbox (James' MAILBOXES table).

Row key: the mailbox id (16 bytes; uuid5, already evenly spread, so no salt). Family ``m``:
name, account, role, uidvalidity, uidnext, highestmodseq, deleted.

``highestmodseq`` is put with value = version = the event's position on every event that
changes something a client of the mailbox sees (the mailbox itself, or a message in it); the
newest version wins, so the visible value is the highest MODSEQ of the mailbox.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain.mailbox import Mailbox
from domain.message import Message, Placed
from projections import names as n
from projections.codec import FALSE, TRUE, encode_int, put
from projections.keys import RowReader
from projections.tablestore import Mutation, TableSpec

T = n.MAILBOXES
TABLES = (TableSpec(T, (n.F_MAILBOX,), split_by_salt=False),)


def _modseq(row: bytes, p: int) -> Mutation:
    return put(T, row, n.MB_HIGHESTMODSEQ, b"%d" % p, p)


def _created(e: Mailbox.Created, p: int) -> list[Mutation]:
    row = e.originator_id.bytes
    return [
        put(T, row, n.MB_NAME, e.name.encode(), p),
        put(T, row, n.MB_ACCOUNT, e.account_id.bytes, p),
        put(T, row, n.MB_ROLE, e.role.encode(), p),
        put(T, row, n.MB_UIDVALIDITY, encode_int(e.uidvalidity), p),
        put(T, row, n.MB_UIDNEXT, b"1", p),
        put(T, row, n.MB_DELETED, FALSE, p),
        _modseq(row, p),
    ]


def _uids_allocated(e: Mailbox.UidsAllocated, p: int) -> list[Mutation]:
    row = e.originator_id.bytes
    uidnext = encode_int(e.first_uid + len(e.message_ids))
    return [put(T, row, n.MB_UIDNEXT, uidnext, p), _modseq(row, p)]


def _renamed(e: Mailbox.Renamed, p: int) -> list[Mutation]:
    row = e.originator_id.bytes
    return [
        put(T, row, n.MB_NAME, e.new_name.encode(), p),
        put(T, row, n.MB_UIDVALIDITY, encode_int(e.new_uidvalidity), p),
        _modseq(row, p),
    ]


def _deleted(e: Mailbox.Deleted, p: int) -> list[Mutation]:
    row = e.originator_id.bytes
    return [put(T, row, n.MB_DELETED, TRUE, p), _modseq(row, p)]


def _message_changed(e: Placed, p: int) -> list[Mutation]:
    return [_modseq(e.mailbox_id.bytes, p)]


def _message_moved(e: Message.Moved, p: int) -> list[Mutation]:
    return [_modseq(e.from_mailbox_id.bytes, p), _modseq(e.mailbox_id.bytes, p)]


_HANDLERS: dict[type, Callable[[Any, int], list[Mutation]]] = {
    Mailbox.Created: _created,
    Mailbox.UidsAllocated: _uids_allocated,
    Mailbox.Renamed: _renamed,
    Mailbox.Deleted: _deleted,
    Message.Delivered: _message_changed,
    Message.UploadCompleted: _message_changed,
    Message.FlagsChanged: _message_changed,
    Message.LabelsChanged: _message_changed,
    Message.Moved: _message_moved,
    Message.Deleted: _message_changed,
    Message.Restored: _message_changed,
    Message.Expunged: _message_changed,
    Message.Extracted: _message_changed,
    Message.PolicyChanged: _message_changed,
    Message.Expired: _message_changed,
    Message.Purged: _message_changed,
}
HANDLED = frozenset(_HANDLERS)


def project(event: object, position: int, read: RowReader) -> list[Mutation]:
    handler = _HANDLERS.get(type(event))
    return [] if handler is None else handler(event, position)


_MODSEQ_ONLY = frozenset(k for k, v in _HANDLERS.items() if v is _message_changed)


class MailboxFold:
    """``project`` for a fold (see ``projections.registry.Folder``): nearly every event
    rewrites its mailbox's ``highestmodseq`` (and every UID allocation its ``uidnext``); a
    fold keeps only the last one per row, so they are kept here as integers, the row's other
    cells (rare events) as the plain projector's puts. ``drain()`` gives what a fold of
    ``project``'s output would hold."""

    def __init__(self) -> None:
        self._modseq: dict[bytes, int] = {}  # row -> highest position
        self._uidnext: dict[bytes, tuple[bytes, int]] = {}  # row -> (value, position)
        self._other: list[Mutation] = []

    def _touch(self, row: bytes, position: int) -> None:
        if position > self._modseq.get(row, -1):
            self._modseq[row] = position

    def project(self, event: object, position: int, read: RowReader) -> list[Mutation]:
        kind = type(event)
        e: Any = event
        if kind in _MODSEQ_ONLY:
            self._touch(e.mailbox_id.bytes, position)
        elif kind is Mailbox.UidsAllocated:
            row = e.originator_id.bytes
            uidnext = encode_int(e.first_uid + len(e.message_ids))
            if position >= self._uidnext.get(row, (b"", -1))[1]:
                self._uidnext[row] = (uidnext, position)
            self._touch(row, position)
        elif kind is Message.Moved:
            self._touch(e.from_mailbox_id.bytes, position)
            self._touch(e.mailbox_id.bytes, position)
        else:
            self._other += project(event, position, read)
        return []

    def drain(self) -> list[Mutation]:
        out = self._other
        out += [put(T, row, n.MB_UIDNEXT, value, p) for row, (value, p) in self._uidnext.items()]
        out += [_modseq(row, p) for row, p in self._modseq.items()]
        self._other, self._modseq, self._uidnext = [], {}, {}
        return out
