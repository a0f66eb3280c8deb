"""What each event changes in an account's counters row (``Deltas``: per column, messages,
unread and bytes), shared by the live projector (``projector``) and the fold of a position
range (``parts``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any
from uuid import UUID

from domain.mailbox import Mailbox
from domain.message import LISTED_STATES, Arrived, Message
from projections import names as n
from projections.codec import put
from projections.keys import (
    label_counter_column,
    mailbox_counter_column,
)
from projections.tablestore import DeleteColumn, Mutation, TableSpec

T = n.COUNTERS
TABLES = (TableSpec(T, (n.F_COUNT, n.F_DELETED), split_by_salt=False),)
READS = (T,)
SEEN = "\\Seen"

Deltas = dict[bytes, list[int]]  # column -> [messages, unread, bytes]

_label_column = lru_cache(maxsize=65536)(label_counter_column)


@lru_cache(maxsize=65536)
def _mailbox_column_of(mailbox: int) -> bytes:  # keyed by UUID.int: cheaper to hash
    return mailbox_counter_column(UUID(int=mailbox))


def _count(
    deltas: Deltas, sign: int, mailbox: UUID | None, labels: Iterable[str],
    flags: Iterable[str], size: int,
) -> None:
    """Adds (``sign`` = 1) or removes (-1) one message's contribution to its mailbox (unless
    ``mailbox`` is None) and to each of ``labels``."""
    if type(size) is not int:
        raise TypeError(f"size: expected an int, got {type(size).__name__}")
    unread = 0 if SEEN in flags else sign
    size *= sign
    for label in labels:
        _add(deltas, _label_column(label), sign, unread, size)
    if mailbox is not None:
        _add(deltas, _mailbox_column_of(mailbox.int), sign, unread, size)


def _add(deltas: Deltas, column: bytes, messages: int, unread: int, size: int) -> None:
    acc = deltas.get(column)
    if acc is None:
        deltas[column] = [messages, unread, size]
    else:
        acc[0] += messages
        acc[1] += unread
        acc[2] += size


def _arrived(e: Arrived, d: Deltas) -> None:
    _count(d, 1, e.mailbox_id, e.labels, e.flags, e.size)


def _flags(e: Message.FlagsChanged, d: Deltas) -> None:
    if e.state in LISTED_STATES and (SEEN in e.flags) != (SEEN in e.old_flags):
        _count(d, -1, e.mailbox_id, e.labels, e.old_flags, e.size)
        _count(d, 1, e.mailbox_id, e.labels, e.flags, e.size)


def _labels(e: Message.LabelsChanged, d: Deltas) -> None:
    if e.state in LISTED_STATES:
        new, old = set(e.labels), set(e.old_labels)
        _count(d, -1, None, sorted(old - new), e.flags, e.size)
        _count(d, 1, None, sorted(new - old), e.flags, e.size)


def _moved(e: Message.Moved, d: Deltas) -> None:
    if e.state in LISTED_STATES:
        _count(d, -1, e.from_mailbox_id, (), e.flags, e.size)
        _count(d, 1, e.mailbox_id, (), e.flags, e.size)


def _deleted(e: Message.Deleted, d: Deltas) -> None:
    _count(d, -1, e.mailbox_id, e.labels, e.flags, e.size)


def _restored(e: Message.Restored, d: Deltas) -> None:
    if e.state in LISTED_STATES:
        _count(d, 1, e.mailbox_id, e.labels, e.flags, e.size)


def _policy(e: Message.PolicyChanged, d: Deltas) -> None:
    before, after = e.old_state in LISTED_STATES, e.state in LISTED_STATES
    if before != after:
        _count(d, 1 if after else -1, e.mailbox_id, e.labels, e.flags, e.size)


def _expunged(e: Message.Expunged, d: Deltas) -> None:
    """Needs the row (see ``_was_listed``): done in ``project``."""


_DELTAS: dict[type, Callable[[Any, Deltas], None]] = {
    Message.Delivered: _arrived,
    Message.UploadCompleted: _arrived,
    Message.FlagsChanged: _flags,
    Message.LabelsChanged: _labels,
    Message.Moved: _moved,
    Message.Deleted: _deleted,
    Message.Restored: _restored,
    Message.PolicyChanged: _policy,
    Message.Expunged: _expunged,
    Message.Purged: _expunged,
}
def _mailbox_deleted(e: Mailbox.Deleted, d: Deltas) -> None:
    """Removes a cell instead of changing counts: done in ``project``."""


_DELTAS[Mailbox.Deleted] = _mailbox_deleted
_MARKS = frozenset({Message.Deleted, Message.Restored, Message.Expunged, Message.Purged})
_LEAVES = frozenset({Message.Expunged, Message.Purged})
HANDLED = frozenset(_DELTAS)


def _deltas_of(event: object) -> Deltas | None:
    """The event's changes to the counts; None when it changes nothing here (a kind without
    deltas, or all of them zero and no deleted marker to move)."""
    kind = type(event)
    compute = _DELTAS.get(kind)
    if compute is None:
        return None
    deltas: Deltas = {}
    compute(event, deltas)
    if (kind not in _MARKS and kind is not Mailbox.Deleted
            and not any(a or b or c for a, b, c in deltas.values())):
        return None
    return deltas


def _fold_deltas(event: object) -> Deltas | None:
    """``_deltas_of``, with a message leaving the listed states taken off the counts (as
    ``project`` does for it): the deltas both folds (``CounterFold``,
    ``CounterPartialFold``) start from."""
    deltas = _deltas_of(event)
    e: Any = event
    if deltas is not None and type(event) in _LEAVES and e.old_state in LISTED_STATES:
        _count(deltas, -1, e.mailbox_id, e.labels, e.flags, e.size)
    return deltas


def _is_mailbox_column(column: bytes) -> bool:
    return column.startswith(n.CT_MAILBOX) and len(column) == len(n.CT_MAILBOX) + 16


def _mailbox_dropped(e: Mailbox.Deleted, position: int, row_key: bytes,
                     row: dict[bytes, bytes]) -> list[Mutation]:
    column = _mailbox_column_of(e.originator_id.int)
    if column not in row:
        return []
    return [DeleteColumn(T, row_key, column, position),
            put(T, row_key, n.CT_POS, b"%d" % position, position)]
