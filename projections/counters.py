"""``counters``: per account, per mailbox and per label: messages, unread, bytes (ElasticInbox).

Row key: the account id (16 bytes). Family ``c``, the counts:

* ``c:m<mailbox id, 16 bytes>`` -- ``b"messages,unread,bytes"`` of the mailbox's listed
  messages (unread: no ``\\Seen``);
* ``c:l<label UTF-8>`` -- the same for the account's listed messages carrying the label;
* ``c:pos`` -- the position of the last event applied to this row.

Family ``d``, one marker per soft-deleted message:

* ``d:<message id, 16 bytes>`` -- ``1`` while the message is soft-deleted (dropped when it
  is restored, expunged or purged). Whether an expunged or purged message still counted
  comes from the ``old_state`` those events carry.

A busy account has thousands of markers and a handful of counts: readers ask for family
``c`` only (``names.CT_COUNTS``); the projector reads the whole row, markers included, and
writes both families in one row mutation.

Only listed messages (state active or expired) count; soft-deleted and expunged ones do not;
a move transfers the counts between mailboxes. Values are absolute, never increments.

``Mailbox.Deleted`` removes the mailbox's ``c:m`` cell (DeleteColumn at its position): a
deleted mailbox, or one left ``\\Noselect``, leaves no count behind. The command appends it
after the expunges of the mailbox's messages; in logs written before, the expunges followed
it, so a change that would only lower a mailbox cell that does not exist (``messages <= 0``)
is not written: it cannot bring a deleted mailbox's cell back.

Counters are the one read-modify-write projection: it reads the row; if the event's position
is ``<=`` the stored ``c:pos`` the event was applied already and nothing is written;
otherwise it writes every changed counter and ``c:pos``, all at ``version = position``, in
one row mutation (atomic per row in HBase). Exact under at-least-once delivery as long as
each account's events arrive in log order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any
from uuid import UUID

from domain.mailbox import Mailbox
from domain.message import LISTED_STATES, Arrived, Message
from projections import names as n
from projections.codec import TRUE, decode_counts, put
from projections.keys import (
    RowReader,
    deleted_marker_column,
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


def _is_mailbox_column(column: bytes) -> bool:
    return column.startswith(n.CT_MAILBOX) and len(column) == len(n.CT_MAILBOX) + 16


def _mailbox_dropped(e: Mailbox.Deleted, position: int, row_key: bytes,
                     row: dict[bytes, bytes]) -> list[Mutation]:
    column = _mailbox_column_of(e.originator_id.int)
    if column not in row:
        return []
    return [DeleteColumn(T, row_key, column, position),
            put(T, row_key, n.CT_POS, b"%d" % position, position)]


def project(event: object, position: int, read: RowReader) -> list[Mutation]:
    deltas = _deltas_of(event)
    if deltas is None:
        return []
    kind = type(event)
    e: Any = event
    row_key = e.account_id.bytes
    row = read(T, row_key)
    stored = row.get(n.CT_POS)
    if stored is not None and int(stored) >= position:
        return []  # applied already
    if kind is Mailbox.Deleted:
        return _mailbox_dropped(e, position, row_key, row)
    out: list[Mutation] = []
    if kind is Message.Deleted:
        out.append(put(T, row_key, deleted_marker_column(e.originator_id), TRUE, position))
    elif kind in _MARKS:
        marker = deleted_marker_column(e.originator_id)
        marked = marker in row
        if marked:
            out.append(DeleteColumn(T, row_key, marker, position))
        if kind in _LEAVES and e.old_state in LISTED_STATES:
            _count(deltas, -1, e.mailbox_id, e.labels, e.flags, e.size)
    for column, (dn, du, db) in deltas.items():
        if dn or du or db:
            old = row.get(column)
            if old is not None:
                on, ou, ob = decode_counts(old)
                dn, du, db = dn + on, du + ou, db + ob
            elif dn <= 0 and _is_mailbox_column(column):
                continue  # a deleted mailbox's cell (see above)
            out.append(put(T, row_key, column, b"%d,%d,%d" % (dn, du, db), position))
    if not out:
        return []
    out.append(put(T, row_key, n.CT_POS, b"%d" % position, position))
    return out




class _Row:
    """One account's counters row as a fold sees it: counts, guard, deleted markers."""

    __slots__ = ("row", "counts", "changed", "dropped", "pos", "pos_changed", "marks")

    def __init__(self, row: dict[bytes, bytes]) -> None:
        self.row = row  # the row as stored when first touched (read only)
        self.counts: dict[bytes, list[int]] = {}  # column -> [messages, unread, bytes]
        self.changed: dict[bytes, int] = {}  # column -> position of its last change
        self.dropped: dict[bytes, int] = {}  # mailbox column -> position of its removal
        stored = row.get(n.CT_POS)
        self.pos = -1 if stored is None else int(stored)
        self.pos_changed = False
        # marker column -> [visible, last put's position, highest delete's position]
        self.marks: dict[bytes, list[Any]] = {}

    def stored(self, column: bytes) -> bytes | None:
        """The column's stored value, unless the fold removed it since."""
        return None if column in self.dropped else self.row.get(column)

    def marked(self, column: bytes) -> bool:
        found = self.marks.get(column)
        return column in self.row if found is None else found[0]

    def mark(self, column: bytes, visible: bool, position: int) -> None:
        found = self.marks.get(column)
        if found is None:
            found = self.marks[column] = [column in self.row, -1, -1]
        found[0] = visible
        found[1 if visible else 2] = position


class CounterFold:
    """``project`` for a fold (``ProjectionRunner.apply_events(fold=True)``): the same
    counts, guard and markers, kept per account as integers instead of re-encoded cells per
    event; ``drain()`` gives the mutations a fold of ``project``'s output would hold (each
    changed cell's final value at the position of its last change, the highest delete of a
    marker, a marker put after it), and forgets everything (the next event re-reads its row).

    An event is taken whole or not at all: everything that can fail (the deltas, the stored
    counts decoded) is computed before anything is changed."""

    def __init__(self) -> None:
        self._rows: dict[bytes, _Row] = {}

    def project(self, event: object, position: int, read: RowReader) -> list[Mutation]:
        deltas = _deltas_of(event)
        if deltas is None:
            return []
        kind = type(event)
        e: Any = event
        if kind in _LEAVES and e.old_state in LISTED_STATES:
            _count(deltas, -1, e.mailbox_id, e.labels, e.flags, e.size)
        row_key = e.account_id.bytes
        state = self._rows.get(row_key)
        if state is None:
            state = self._rows[row_key] = _Row(read(T, row_key))
        if state.pos >= position:
            return []  # applied already
        counts = state.counts
        if kind is Mailbox.Deleted:
            column = _mailbox_column_of(e.originator_id.int)
            if column not in counts and state.stored(column) is None:
                return []
            counts.pop(column, None)
            state.changed.pop(column, None)
            state.dropped[column] = position
            state.pos = position
            state.pos_changed = True
            return []
        new: list[tuple[bytes, list[int]]] = []
        for column, (dn, du, db) in deltas.items():
            if dn or du or db:
                old = counts.get(column)
                if old is None:
                    stored = state.stored(column)
                    if stored is not None:
                        old = list(decode_counts(stored))
                    elif dn <= 0 and _is_mailbox_column(column):
                        continue  # a deleted mailbox's cell (module docstring)
                    else:
                        old = [0, 0, 0]
                new.append((column, [old[0] + dn, old[1] + du, old[2] + db]))
        # nothing below fails
        out = bool(new)
        if kind is Message.Deleted:
            state.mark(deleted_marker_column(e.originator_id), True, position)
            out = True
        elif kind in _MARKS:
            marker = deleted_marker_column(e.originator_id)
            if state.marked(marker):
                state.mark(marker, False, position)
                out = True
        if not out:
            return []
        changed = state.changed
        for column, value in new:
            counts[column] = value
            changed[column] = position
        state.pos = position
        state.pos_changed = True
        return []

    def drain(self) -> list[Mutation]:
        out: list[Mutation] = []
        for row_key, state in self._rows.items():
            counts = state.counts
            for column, position in state.dropped.items():
                out.append(DeleteColumn(T, row_key, column, position))
            for column, position in state.changed.items():
                m, u, b = counts[column]
                out.append(put(T, row_key, column, b"%d,%d,%d" % (m, u, b), position))
            for column, (_, put_at, deleted_at) in state.marks.items():
                if deleted_at >= 0:
                    out.append(DeleteColumn(T, row_key, column, deleted_at))
                if put_at > deleted_at:
                    out.append(put(T, row_key, column, TRUE, put_at))
            if state.pos_changed:
                out.append(put(T, row_key, n.CT_POS, b"%d" % state.pos, state.pos))
        self._rows.clear()
        return out
