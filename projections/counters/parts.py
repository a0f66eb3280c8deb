"""Counters as mergeable partial aggregates: a fold of one position range of the log
(``CounterPartialFold``) and the merge of the ranges' parts in log order (ADR 0061).
"""

from __future__ import annotations

from typing import Any

from domain.mailbox import Mailbox
from domain.message import Message
from projections import names as n
from projections.codec import TRUE, put
from projections.counters.deltas import (
    _MARKS,
    _fold_deltas,
    _is_mailbox_column,
    _mailbox_column_of,
)
from projections.keys import (
    deleted_marker_column,
)
from projections.tablestore import DeleteColumn, Mutation

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
