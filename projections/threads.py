"""``threads``: the listed messages of a conversation, newest first (FB Messenger's layout).

Row key: ``salt(thread) + thread id (16) + inverted message id (16)``. Family ``i``:
``i:ref`` = mailbox id (16 bytes) + UID (8 bytes big-endian). Ids only: no subject or other
personal data outside the message row. Same lifecycle as ``label_index``: written on
delivery, move and restore; deleted on soft delete and expunge.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain.message import Message, Placed
from projections import names as n
from projections.codec import encode_ref, put
from projections.keys import RowReader, thread_row
from projections.tablestore import DeleteRow, Mutation, TableSpec

T = n.THREADS
TABLES = (TableSpec(T, (n.F_INDEX,)),)


def _listed(e: Placed, p: int) -> list[Mutation]:
    row = thread_row(e.thread_id, e.originator_id)
    return [put(T, row, n.IX_REF, encode_ref(e.mailbox_id, e.uid), p)]


def _gone(e: Message.Changed, p: int) -> list[Mutation]:
    return [DeleteRow(T, thread_row(e.thread_id, e.originator_id), p)]


_HANDLERS: dict[type, Callable[[Any, int], list[Mutation]]] = {
    Message.Delivered: _listed,
    Message.UploadCompleted: _listed,
    Message.Moved: _listed,
    Message.Restored: _listed,
    Message.Deleted: _gone,
    Message.Expunged: _gone,
    Message.Purged: _gone,
}
HANDLED = frozenset(_HANDLERS)


def project(event: object, position: int, read: RowReader) -> list[Mutation]:
    handler = _HANDLERS.get(type(event))
    return [] if handler is None else handler(event, position)
