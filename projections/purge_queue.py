"""``purge_queue`` (and the empty ``purge_pointer``): what may be purged, and when (Sterling).

Row key: ``queue (ASCII) + 0x00 + shard (1 byte: crc32(message id) % 16) + minute bucket of
the due time (8 bytes big-endian, minutes since the epoch) + message id (16)``. A purger
scans one shard of one queue from its pointer, bucket by bucket. Family ``q``: ``q:reason``,
``q:due`` (ISO 8601), ``q:message`` (16 bytes), ``q:account`` (16 bytes).

Entries are hints: the purger double-checks the message's current state before purging, so a
restore or a relaxed policy does not delete entries. Which events enqueue what:

==========================================  ============  =====================================
event                                       queue         due
==========================================  ============  =====================================
``Deleted`` (soft)                          deleted       ``purge_after``
``Expunged``                                deleted       ``purge_after``
``Extracted`` leaving state expired         expired       event time + 30 days
``Delivered`` / ``UploadCompleted``         expiring      the policy's ``until`` (kind until)
``PolicyChanged`` to state expired          expired       event time + 30 days
``PolicyChanged`` to kind until, active     expiring      the policy's ``until``
``UploadBegun``                             incomplete    event time + 2 days
==========================================  ============  =====================================

``purge_pointer`` (row key ``queue + 0x00 + shard``, column ``p:bucket``) is written by the
purger only; this module only declares the table.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from domain.message import Message
from domain.values import MessageState
from projections import names as n
from projections.codec import encode_datetime, put
from projections.keys import RowReader, purge_row
from projections.tablestore import Mutation, TableSpec

T = n.PURGE_QUEUE
TABLES = (
    TableSpec(T, (n.F_QUEUE,), split_by_salt=False),
    TableSpec(n.PURGE_POINTER, (n.F_POINTER,), split_by_salt=False),
)

EXPIRED_RETENTION = timedelta(days=30)
INCOMPLETE_TTL = timedelta(days=2)
_EXPIRED = MessageState.EXPIRED.value


def _entry(e: Any, p: int, queue: str, reason: str, due: datetime) -> list[Mutation]:
    row = purge_row(queue, e.originator_id, due)
    return [
        put(T, row, n.PQ_REASON, reason.encode(), p),
        put(T, row, n.PQ_DUE, encode_datetime(due), p),
        put(T, row, n.PQ_MESSAGE, e.originator_id.bytes, p),
        put(T, row, n.PQ_ACCOUNT, e.account_id.bytes, p),
    ]


def _until(policy: Any) -> datetime | None:
    if policy.get("kind") != "until":
        return None
    until = policy.get("until")
    if not isinstance(until, datetime):
        raise TypeError(f"policy.until: expected a datetime, got {type(until).__name__}")
    return until


def _delivered(e: Any, p: int) -> list[Mutation]:
    until = _until(e.policy)
    return [] if until is None else _entry(e, p, n.QUEUE_EXPIRING, "until", until)


def _deleted(e: Any, p: int) -> list[Mutation]:
    return _entry(e, p, n.QUEUE_DELETED, "deleted", e.purge_after)


def _expunged(e: Any, p: int) -> list[Mutation]:
    return _entry(e, p, n.QUEUE_DELETED, "expunged", e.purge_after)


def _extracted(e: Any, p: int) -> list[Mutation]:
    if e.state != _EXPIRED:
        return []
    return _entry(e, p, n.QUEUE_EXPIRED, "limit", e.timestamp + EXPIRED_RETENTION)


def _policy_changed(e: Any, p: int) -> list[Mutation]:
    if e.state == _EXPIRED:
        return _entry(e, p, n.QUEUE_EXPIRED, "policy", e.timestamp + EXPIRED_RETENTION)
    until = _until(e.policy)
    return [] if until is None else _entry(e, p, n.QUEUE_EXPIRING, "until", until)


def _upload_begun(e: Any, p: int) -> list[Mutation]:
    return _entry(e, p, n.QUEUE_INCOMPLETE, "incomplete", e.timestamp + INCOMPLETE_TTL)


_HANDLERS: dict[type, Callable[[Any, int], list[Mutation]]] = {
    Message.Delivered: _delivered,
    Message.UploadCompleted: _delivered,
    Message.Deleted: _deleted,
    Message.Expunged: _expunged,
    Message.Extracted: _extracted,
    Message.PolicyChanged: _policy_changed,
    Message.UploadBegun: _upload_begun,
}
HANDLED = frozenset(_HANDLERS)


def project(event: object, position: int, read: RowReader) -> list[Mutation]:
    handler = _HANDLERS.get(type(event))
    return [] if handler is None else handler(event, position)
