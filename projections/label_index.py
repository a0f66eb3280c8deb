"""``label_index``: per account and label, its listed messages newest first (ElasticInbox).

Row key: ``salt(account) + account id (16) + label (UTF-8) + 0x00 + inverted message id (16)``;
message ids are UUIDv7 (time-ordered), so a forward prefix scan of ``label_prefix`` is newest
first. Family ``i``: ``i:ref`` = mailbox id (16 bytes) + UID (8 bytes big-endian).

Only listed messages (active, expired) are indexed: written on delivery, on a label added, on a
move (new mailbox and UID) and on a restore; deleted on a label removed, a soft delete and an
expunge.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from domain.message import Message, Placed
from projections import names as n
from projections.codec import encode_ref, put
from projections.keys import RowReader, label_row
from projections.tablestore import DeleteRow, Mutation, TableSpec

T = n.LABEL_INDEX
TABLES = (TableSpec(T, (n.F_INDEX,)),)


def _puts(e: Placed, p: int, labels: Iterable[str]) -> list[Mutation]:
    if not labels:  # most messages have no label: nothing to encode
        return []
    account, message = e.account_id, e.originator_id
    ref = encode_ref(e.mailbox_id, e.uid)
    return [put(T, label_row(account, label, message), n.IX_REF, ref, p) for label in labels]


def _deletes(e: Placed, p: int, labels: Iterable[str]) -> list[Mutation]:
    account, message = e.account_id, e.originator_id
    return [DeleteRow(T, label_row(account, label, message), p) for label in labels]


def _all(e: Placed, p: int) -> list[Mutation]:
    return _puts(e, p, e.labels)


def _changed(e: Message.LabelsChanged, p: int) -> list[Mutation]:
    new, old = set(e.labels), set(e.old_labels)
    return _deletes(e, p, sorted(old - new)) + _puts(e, p, sorted(new - old))


def _gone(e: Message.Changed, p: int) -> list[Mutation]:
    return _deletes(e, p, e.labels)


_HANDLERS: dict[type, Callable[[Any, int], list[Mutation]]] = {
    Message.Delivered: _all,
    Message.UploadCompleted: _all,
    Message.Moved: _all,
    Message.Restored: _all,
    Message.LabelsChanged: _changed,
    Message.Deleted: _gone,
    Message.Expunged: _gone,
    Message.Purged: _gone,
}
HANDLED = frozenset(_HANDLERS)


def project(event: object, position: int, read: RowReader) -> list[Mutation]:
    handler = _HANDLERS.get(type(event))
    return [] if handler is None else handler(event, position)
