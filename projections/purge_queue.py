"""``purge_queue``: which messages may be purged, from when (Sterling Global Mailbox).

Row key: ``queue (ASCII) + 0x00 + shard (1 byte: crc32(message id) % 16) + minute bucket of
``since`` (8 bytes big-endian, minutes since the epoch) + message id (16)``. ``since`` is
when the queue's TTL starts counting; the purge job adds the TTL (a setting) when it runs, so
a changed TTL applies to everything already queued. Family ``q``: ``q:reason``, ``q:since``
(ISO 8601), ``q:message`` (16 bytes), ``q:account`` (16 bytes).

Entries are hints: the purge job double-checks the message's current state before acting
(``domain.lifecycle.verdict``), so a restore or a relaxed policy writes nothing here. Which
events enqueue what:

==========================================  ============  =====================================
event                                       queue         since
==========================================  ============  =====================================
``Deleted`` (soft)                          deleted       event time
``Expunged``                                deleted       event time
``Extracted`` leaving state expired         expired       event time
``PolicyChanged`` to state expired          expired       event time
``Expired`` (the until date passed)         expired       the until date
``Delivered`` / ``UploadCompleted``         expiring      the policy's ``until`` (kind until;
                                                          the event time if that is later)
``PolicyChanged`` to kind until, active     expiring      the same
``UploadBegun``                             incomplete    event time
``Purged``                                  (removes the entry that led to it)
==========================================  ============  =====================================

Entries the double check keeps stay (a later run past the peek-back window never reads them
again); a purged message's other entries stay too, and a job finding one keeps it.
``purge_pointer`` (row key ``queue + 0x00 + shard``, column ``p:bucket``) belongs to the
purge jobs, not to this projection: a rebuild does not reset it (``POINTER_SPEC``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from domain.message import Arrived, Message, Placed
from domain.values import MessageState
from projections import names as n
from projections.codec import encode_datetime, put
from projections.keys import RowReader, purge_row
from projections.tablestore import DeleteRow, Mutation, TableSpec

T = n.PURGE_QUEUE
TABLES = (TableSpec(T, (n.F_QUEUE,), split_by_salt=False),)
POINTER_SPEC = TableSpec(n.PURGE_POINTER, (n.F_POINTER,), split_by_salt=False)

_EXPIRED = MessageState.EXPIRED.value


def _entry(e: Placed | Message.UploadBegun, p: int, queue: str, reason: str,
           since: datetime) -> list[Mutation]:
    row = purge_row(queue, e.originator_id, since)
    return [
        put(T, row, n.PQ_REASON, reason.encode(), p),
        put(T, row, n.PQ_SINCE, encode_datetime(since), p),
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


def _expiring(e: Arrived | Message.PolicyChanged, p: int) -> list[Mutation]:
    until = _until(e.policy)
    if until is None:
        return []
    return _entry(e, p, n.QUEUE_EXPIRING, "until", max(until, e.timestamp))


def _deleted(e: Message.Deleted, p: int) -> list[Mutation]:
    return _entry(e, p, n.QUEUE_DELETED, "deleted", e.timestamp)


def _expunged(e: Message.Expunged, p: int) -> list[Mutation]:
    return _entry(e, p, n.QUEUE_DELETED, "expunged", e.timestamp)


def _extracted(e: Message.Extracted, p: int) -> list[Mutation]:
    if e.state != _EXPIRED:
        return []
    return _entry(e, p, n.QUEUE_EXPIRED, "limit", e.timestamp)


def _policy_changed(e: Message.PolicyChanged, p: int) -> list[Mutation]:
    if e.state == _EXPIRED:
        return _entry(e, p, n.QUEUE_EXPIRED, "policy", e.timestamp)
    return _expiring(e, p)


def _expired(e: Message.Expired, p: int) -> list[Mutation]:
    return _entry(e, p, n.QUEUE_EXPIRED, "until", e.since)


def _upload_begun(e: Message.UploadBegun, p: int) -> list[Mutation]:
    return _entry(e, p, n.QUEUE_INCOMPLETE, "incomplete", e.timestamp)


def _purged(e: Message.Purged, p: int) -> list[Mutation]:
    if not e.queue or e.since is None:
        return []
    return [DeleteRow(T, purge_row(e.queue, e.originator_id, e.since), p)]


_HANDLERS: dict[type, Callable[[Any, int], list[Mutation]]] = {
    Message.Delivered: _expiring,
    Message.UploadCompleted: _expiring,
    Message.Expired: _expired,
    Message.Purged: _purged,
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
