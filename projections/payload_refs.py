"""``payload_refs``: which messages refer to a payload in the payload store.

Row key: the payload's address (its SHA-256 before ADR 0099, random since) as 64 hex ASCII
bytes. Family ``r``: one column
``r:<message id, 16 bytes>`` per referring message, value the account id (16 bytes). Only
payloads that are not inline (those live in the payload store) are referenced. Written on
``Delivered`` (also a copy: a new message referring to the same payload) and
``UploadCompleted``; one cell per message, so re-applying is idempotent. The columns are
removed by ``Purged`` (every payload the message referred to); an upload's chunks are referred
to from ``UploadChunkAppended`` (value empty) until then. The payload job deletes a payload
only when its row is empty (and its grace period is over).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain.message import Arrived, Message
from projections import names as n
from projections.codec import put
from projections.keys import RowReader, payload_ref_column, payload_row
from projections.tablestore import DeleteColumn, Mutation, TableSpec

T = n.PAYLOAD_REFS
TABLES = (TableSpec(T, (n.F_REF,), split_by_salt=False),)


def _chunk(e: Message.UploadChunkAppended, p: int) -> list[Mutation]:
    """An upload's chunk is referred to by its message until the message is purged."""
    return [put(T, payload_row(e.sha256), payload_ref_column(e.originator_id), b"", p)]


def _released(e: Message.Purged, p: int) -> list[Mutation]:
    column = payload_ref_column(e.originator_id)
    return [DeleteColumn(T, payload_row(sha), column, p) for sha in e.payloads]


def _referenced(e: Arrived, p: int) -> list[Mutation]:
    if e.inline:
        return []
    column = payload_ref_column(e.originator_id)
    # ``address`` since ADR 0099 (an older event's upcast to it); a made-up event's sha256
    return [put(T, payload_row(e.address or e.sha256), column, e.account_id.bytes, p)]


_HANDLERS: dict[type, Callable[[Any, int], list[Mutation]]] = {
    Message.Delivered: _referenced,
    Message.UploadCompleted: _referenced,
    Message.UploadChunkAppended: _chunk,
    Message.Purged: _released,
}
HANDLED = frozenset(_HANDLERS)


def project(event: object, position: int, read: RowReader) -> list[Mutation]:
    handler = _HANDLERS.get(type(event))
    return [] if handler is None else handler(event, position)
