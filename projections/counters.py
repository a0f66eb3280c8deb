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
        deltas = _fold_deltas(event)
        if deltas is None:
            return []
        kind = type(event)
        e: Any = event
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


# -- mergeable partial aggregates (a fold of one position range; ADR 0061) ---------------------
#
# ``CounterFold`` is exact only over an account's whole history in log order. A fold of one
# position range of the log cannot know the row as the earlier ranges leave it, and three
# things in counters depend on it: a change that would only lower a mailbox cell that does
# not exist is not written; ``Mailbox.Deleted`` removes the cell only if it exists; an
# unmark (``Restored``, ``Expunged``, ``Purged``) deletes the soft-delete marker only if it
# is set. Everything else is a sum of per-event deltas. So a range keeps, per cell, what it
# did *before the first thing that settles the cell's existence* apart (``_Part``):
#
# * ``head``: the sum (and last position) of the mailbox cell's lowering changes made while
#   its existence is unknown: they count if and only if the cell exists when the range
#   starts;
# * ``settled``: the first change that settles it: an add (``_ADD``: a rise, or any change
#   to a label cell) -- the cell exists from there, its value relative to what came before
#   unless the range drops it again later -- or a drop (``_DROP``) that removes the cell if
#   it exists when the range starts; from there on the range's own fold is exact;
# * for a marker, the range's first unmark when no ``Message.Deleted`` came before it in
#   the range: it deletes the marker if and only if the marker is set when the range starts.
#
# ``c:pos`` is the last event that changed the row; an event the range's own fold counts
# changed it whatever came before; one whose only change was conditional, if its condition
# holds. ``merge_counter_parts`` folds the ranges' parts of a row in log order, resolving
# each condition against the state the earlier ranges leave, and ``counter_mutations``
# gives exactly the mutations ``CounterFold.drain`` gives after a fold of the whole history.

_ADD = 1
_DROP = 2


class _Part:
    """One counts cell in one range (see above); ``value``/``changed``/``dropped``: the
    range's own fold after ``settled``."""

    __slots__ = ("head", "head_at", "settled", "settled_at", "present", "value", "changed",
                 "dropped")

    def __init__(self) -> None:
        self.head = [0, 0, 0]
        self.head_at = -1
        self.settled = 0
        self.settled_at = -1
        self.present = False
        self.value = [0, 0, 0]
        self.changed = -1
        self.dropped = -1

    def __getstate__(self) -> tuple[Any, ...]:  # compact when pickled between tasks
        return (self.head, self.head_at, self.settled, self.settled_at, self.present,
                self.value, self.changed, self.dropped)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        (self.head, self.head_at, self.settled, self.settled_at, self.present, self.value,
         self.changed, self.dropped) = state


class _MarkPart:
    """One soft-delete marker in one range: the range's first unmark if no put preceded it
    (conditional), then the range's own fold (visible, last put, last delete)."""

    __slots__ = ("unmark_at", "visible", "put_at", "deleted_at")

    def __init__(self) -> None:
        self.unmark_at = -1
        self.visible = False
        self.put_at = -1
        self.deleted_at = -1

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.unmark_at, self.visible, self.put_at, self.deleted_at)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.unmark_at, self.visible, self.put_at, self.deleted_at = state


class CounterPart:
    """One account's counters row as a position range leaves it: ``cells`` (column ->
    ``_Part``), ``marks`` (marker column -> ``_MarkPart``) and ``pos``, the last position
    the range's own fold changed the row at (-1: none). Mergeable in log order
    (``merge_counter_parts``)."""

    __slots__ = ("cells", "marks", "pos")

    def __init__(self) -> None:
        self.cells: dict[bytes, _Part] = {}
        self.marks: dict[bytes, _MarkPart] = {}
        self.pos = -1

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.cells, self.marks, self.pos)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.cells, self.marks, self.pos = state


class CounterPartialFold:
    """The counters fold of one position range of the log, as mergeable parts per account
    (``parts``): feed it the range's events in log order (``project``), any events (those
    counters does not handle are skipped). An event is taken whole or not at all."""

    def __init__(self) -> None:
        self.parts: dict[bytes, CounterPart] = {}

    def project(self, event: object, position: int) -> None:
        deltas = _fold_deltas(event)
        if deltas is None:
            return
        kind = type(event)
        e: Any = event
        row_key = e.account_id.bytes
        # nothing below fails
        row = self.parts.get(row_key)
        if row is None:
            row = self.parts[row_key] = CounterPart()
        cells = row.cells
        changed = False
        if kind is Mailbox.Deleted:
            column = _mailbox_column_of(e.originator_id.int)
            cell = cells.get(column)
            if cell is None:
                cell = cells[column] = _Part()
            if not cell.settled:
                cell.settled, cell.settled_at = _DROP, position  # if it exists: resolved later
            elif cell.present:
                cell.present, cell.value, cell.changed = False, [0, 0, 0], -1
                cell.dropped = position
                row.pos = position
            return
        for column, (dn, du, db) in deltas.items():
            if not (dn or du or db):
                continue
            cell = cells.get(column)
            if cell is None:
                cell = cells[column] = _Part()
            lowers = dn <= 0 and _is_mailbox_column(column)
            if cell.present:
                value = cell.value
                value[0] += dn
                value[1] += du
                value[2] += db
            elif not cell.settled:
                if lowers:  # counts only if the cell exists when the range starts
                    head = cell.head
                    head[0] += dn
                    head[1] += du
                    head[2] += db
                    cell.head_at = position
                    continue
                cell.settled, cell.settled_at = _ADD, position
                cell.present, cell.value = True, [dn, du, db]
            elif lowers:
                continue  # a deleted mailbox's cell (module docstring)
            else:
                cell.present, cell.value = True, [dn, du, db]
            cell.changed = position
            changed = True
        if kind in _MARKS:
            marker = deleted_marker_column(e.originator_id)
            mark = row.marks.get(marker)
            if mark is None:
                mark = row.marks[marker] = _MarkPart()
                if kind is not Message.Deleted:
                    mark.unmark_at = position  # deletes the marker if it is set by then
            if kind is Message.Deleted:
                mark.visible, mark.put_at = True, position
                changed = True
            elif mark.visible:
                mark.visible, mark.deleted_at = False, position
                changed = True
        if changed:
            row.pos = position


class CounterRow:
    """One account's counters row merged from its ranges' parts so far (log order)."""

    __slots__ = ("cells", "marks", "pos")

    def __init__(self) -> None:
        # column -> [present, [messages, unread, bytes], changed at, dropped at]
        self.cells: dict[bytes, list[Any]] = {}
        # marker column -> [visible, put at, deleted at]
        self.marks: dict[bytes, list[Any]] = {}
        self.pos = -1


def merge_counter_parts(row: CounterRow, part: CounterPart) -> None:
    """Folds the next range's ``part`` of an account's row into ``row`` (the merge of the
    earlier ranges), resolving the part's conditions against it (comment above)."""
    pos = max(row.pos, part.pos)
    cells = row.cells
    for column, p in part.cells.items():
        cell = cells.get(column)
        if cell is None:
            cell = cells[column] = [False, [0, 0, 0], -1, -1]
        if p.head_at >= 0 and cell[0]:  # the lowering changes count: the cell existed
            cell[1] = [a + b for a, b in zip(cell[1], p.head, strict=True)]
            cell[2] = p.head_at
            pos = max(pos, p.head_at)
        if p.settled == _ADD:
            if p.dropped < 0:  # the range's value is relative to what came before
                base = cell[1] if cell[0] else [0, 0, 0]
                cell[0], cell[2] = True, p.changed
                cell[1] = [a + b for a, b in zip(base, p.value, strict=True)]
            else:  # dropped again within the range: the range's own fold decides
                cell[0], cell[1], cell[2], cell[3] = p.present, list(p.value), p.changed, \
                    p.dropped
        elif p.settled == _DROP:
            if cell[0]:  # the drop removes the cell the earlier ranges left
                cell[0], cell[1], cell[2], cell[3] = False, [0, 0, 0], -1, p.settled_at
                pos = max(pos, p.settled_at)
            if p.dropped >= 0:
                cell[3] = p.dropped
            if p.present:
                cell[0], cell[1], cell[2] = True, list(p.value), p.changed
    marks = row.marks
    for column, m in part.marks.items():
        mark = marks.get(column)
        if mark is None:
            mark = marks[column] = [False, -1, -1]
        if m.unmark_at >= 0 and mark[0]:
            mark[0], mark[2] = False, m.unmark_at
            pos = max(pos, m.unmark_at)
        if m.put_at >= 0:
            mark[0], mark[1] = m.visible, m.put_at
            if m.deleted_at >= 0:
                mark[2] = m.deleted_at
    row.pos = pos


def counter_mutations(table: str, row_key: bytes, row: CounterRow) -> list[Mutation]:
    """The mutations ``CounterFold.drain`` gives for the row after a fold of the whole
    history, from the merge of its ranges' parts (into ``table``: its physical name)."""
    out: list[Mutation] = []
    for column, (present, (m, u, b), changed, dropped) in row.cells.items():
        if dropped >= 0:
            out.append(DeleteColumn(table, row_key, column, dropped))
        if present and changed >= 0:
            out.append(put(table, row_key, column, b"%d,%d,%d" % (m, u, b), changed))
    for column, (_, put_at, deleted_at) in row.marks.items():
        if deleted_at >= 0:
            out.append(DeleteColumn(table, row_key, column, deleted_at))
        if put_at > deleted_at:
            out.append(put(table, row_key, column, TRUE, put_at))
    if row.pos >= 0:
        out.append(put(table, row_key, n.CT_POS, b"%d" % row.pos, row.pos))
    return out
