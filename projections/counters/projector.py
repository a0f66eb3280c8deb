"""The counters projector: ``project`` (one event, read-modify-write of the account's row)
and ``CounterFold`` (a whole history in log order, the row held in memory until ``drain``).
"""

from __future__ import annotations

from typing import Any

from domain.mailbox import Mailbox
from domain.message import LISTED_STATES, Message
from projections import names as n
from projections.codec import TRUE, decode_counts, put
from projections.counters.deltas import (
    _LEAVES,
    _MARKS,
    T,
    _count,
    _deltas_of,
    _fold_deltas,
    _is_mailbox_column,
    _mailbox_column_of,
    _mailbox_dropped,
)
from projections.keys import (
    RowReader,
    deleted_marker_column,
)
from projections.tablestore import DeleteColumn, Mutation


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
