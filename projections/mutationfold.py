"""``MutationFold``: mutations folded into, per row, the final visible puts and the highest
deletes (HBase's version rule, ``tablestore``), read back as the store plus the fold would
show a row. The runner folds the tables a projection reads in a live batch, and every table
in a rebuild's fold (``runner``'s docstring).

A fold keeps each cell as ``(value, version)``, not as the ``Put`` it came in: a rebuild's
projectors hand it whole rows (``RowPut``: a row's cells at one version, the fold form of a
projector, ``registry.FOLD_FORMS``) with no object per cell, and the fold lists its tables for a
bulk load without reading a ``Put``'s attributes per cell (ADR 0106).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import NamedTuple

from projections.codec import put
from projections.tablestore import (
    CellRecord,
    Cells,
    DeleteColumn,
    DeleteRow,
    Mutation,
    Put,
    TableLoad,
    TombRecord,
)

__all__ = ["Cell", "FoldInput", "MutationFold", "RowPut", "identity", "to_table"]


def identity(name: str) -> str:
    return name


Cell = tuple[bytes, int]  # (value, version)
_View = tuple[dict[bytes, Cell], dict[bytes, bytes]]  # visible cells, and their values


class RowPut(NamedTuple):
    """A row's cells written at one ``version``: folded as a ``Put`` per cell would be.
    What a projector's fold form (``registry.FOLD_FORMS``) gives for a row it writes several
    cells of, built in one step; only a ``MutationFold`` takes it (never a store)."""

    table: str
    row: bytes
    cells: tuple[tuple[bytes, bytes], ...]  # (column, value), a column at most once
    version: int


FoldInput = Mutation | RowPut


def _put_cells(cells: dict[bytes, Cell], column_tombs: dict[bytes, int] | None,
               view: _View | None, puts: Iterable[tuple[bytes, bytes]], version: int) -> int:
    """A ``RowPut``'s cells folded into a row that holds cells, tombstones or a view already,
    as a ``Put`` each; returns how many cells the row gained."""
    added = 0
    for column, value in puts:
        if column_tombs is not None and version <= column_tombs.get(column, -1):
            continue
        kept = cells.get(column)
        if kept is None:
            added += 1
        elif version < kept[1]:
            continue
        cells[column] = (value, version)
        if view is not None:
            visible, values = view
            old = visible.get(column)
            if old is None or version >= old[1]:
                visible[column] = (value, version)
                values[column] = value
    return added


class MutationFold:
    """Folds mutations into, per row, the final visible puts and the highest deletes.

    Applying ``mutations()`` to a store has the same visible effect as applying everything
    folded, in any order (HBase version semantics: a put is hidden by a delete of a version
    ``>=`` its own; the highest version wins). ``read`` gives a row as the store plus the
    folded mutations would show it; ``load(table, row)`` fetches the stored row, once.
    Each cell is kept as ``(value, version)``; ``mutations()`` makes its ``Put``.
    """

    def __init__(self, load: Callable[[str, bytes], Cells] | None = None) -> None:
        self._load = load
        self._written: dict[str, dict[bytes, dict[bytes, Cell]]] = {}
        self._row_tombs: dict[str, dict[bytes, int]] = {}
        self._col_tombs: dict[str, dict[bytes, dict[bytes, int]]] = {}
        self._views: dict[str, dict[bytes, _View]] = {}  # rows read: table -> row -> view
        self.cells = 0  # puts held

    @property
    def empty(self) -> bool:
        return not (self._written or self._row_tombs or self._col_tombs)

    def apply(self, m: Mutation) -> None:
        self.extend((m,))

    def extend(self, mutations: Iterable[FoldInput]) -> None:
        """Fold each mutation in (puts, several to one row, are the common case; a
        ``RowPut`` is a ``Put`` per cell, in one step)."""
        written, row_tombs, col_tombs, views = (
            self._written, self._row_tombs, self._col_tombs, self._views)
        last_table: str | None = None
        last_row: bytes | None = None
        cells: dict[bytes, Cell] = {}
        row_tomb = -1
        column_tombs: dict[bytes, int] | None = None
        view: _View | None = None
        added = 0
        for m in mutations:
            kind = type(m)
            if kind is not Put and kind is not RowPut:
                if kind is DeleteColumn:
                    self._delete_column(m.table, m.row, m.column, m.version)  # type: ignore[union-attr]
                elif kind is DeleteRow:
                    self._delete_row(m.table, m.row, m.version)
                else:
                    raise TypeError(f"mutation: {m!r:.80} is not a Put, DeleteColumn, DeleteRow")
                last_table = None
                continue
            table, row, version = m.table, m.row, m.version
            if row is not last_row or table is not last_table:
                rows = written.get(table)
                if rows is None:
                    rows = written[table] = {}
                found = rows.get(row)
                if found is None:
                    found = rows[row] = {}
                cells, last_table, last_row = found, table, row
                tombs = row_tombs.get(table)
                row_tomb = -1 if tombs is None else tombs.get(row, -1)
                by_row = col_tombs.get(table)
                column_tombs = None if by_row is None else by_row.get(row)
                viewed = views.get(table) if views else None
                view = None if viewed is None else viewed.get(row)
            if version <= row_tomb:
                continue
            if kind is RowPut:
                if not cells and column_tombs is None and view is None:  # a fresh row
                    cells.update({c: (v, version) for c, v in m.cells})  # type: ignore[union-attr]
                    added += len(cells)
                else:
                    added += _put_cells(cells, column_tombs, view, m.cells, version)  # type: ignore[union-attr]
                continue
            column = m.column  # type: ignore[union-attr]
            if column_tombs is not None and version <= column_tombs.get(column, -1):
                continue
            kept = cells.get(column)
            if kept is None:
                added += 1
            elif version < kept[1]:
                continue
            value = m.value  # type: ignore[union-attr]
            cells[column] = (value, version)
            if view is not None:
                visible, values = view
                old = visible.get(column)
                if old is None or version >= old[1]:
                    visible[column] = (value, version)
                    values[column] = value
        self.cells += added

    def _hidden(self, table: str, row: bytes, column: bytes, version: int) -> bool:
        rows = self._row_tombs.get(table)
        if rows is not None and version <= rows.get(row, -1):
            return True
        columns = self._col_tombs.get(table)
        if columns is not None:
            tombs = columns.get(row)
            if tombs is not None and version <= tombs.get(column, -1):
                return True
        return False

    def _delete_column(self, table: str, row: bytes, column: bytes, version: int) -> None:
        if self._hidden(table, row, column, version):
            return  # an equal or higher delete covers it already
        self._col_tombs.setdefault(table, {}).setdefault(row, {})[column] = version
        rows = self._written.get(table)
        cells = None if rows is None else rows.get(row)
        if rows is not None and cells is not None:
            kept = cells.get(column)
            if kept is not None and kept[1] <= version:
                del cells[column]
                self.cells -= 1
                if not cells:
                    del rows[row]
        seen = self._views.get(table, {}).get(row)
        if seen is not None:
            visible, view = seen
            old = visible.get(column)
            if old is not None and old[1] <= version:
                del visible[column]
                del view[column]

    def _delete_row(self, table: str, row: bytes, version: int) -> None:
        tombs = self._row_tombs.setdefault(table, {})
        if version <= tombs.get(row, -1):
            return
        tombs[row] = version
        rows = self._written.get(table)
        cells = None if rows is None else rows.get(row)
        if rows is not None and cells is not None:
            kept = {c: cell for c, cell in cells.items() if cell[1] > version}
            self.cells -= len(cells) - len(kept)
            if kept:
                rows[row] = kept
            else:
                del rows[row]
        columns = self._col_tombs.get(table)
        if columns is not None and row in columns:
            left = {c: v for c, v in columns[row].items() if v > version}
            if left:
                columns[row] = left
            else:
                del columns[row]
        viewed = self._views.get(table)
        if viewed is not None and row in viewed:
            visible = {c: cell for c, cell in viewed[row][0].items() if cell[1] > version}
            viewed[row] = (visible, {c: value for c, (value, _) in visible.items()})

    def read(self, table: str, row: bytes) -> dict[bytes, bytes]:
        """The row's visible values (do not modify the returned dict)."""
        viewed = self._views.get(table)
        if viewed is None:
            viewed = self._views[table] = {}
        seen = viewed.get(row)
        if seen is None:
            stored = self._load(table, row) if self._load is not None else {}
            visible = {c: cell for c, cell in stored.items()
                       if not self._hidden(table, row, c, cell[1])}
            cells = self._written.get(table, {}).get(row)
            if cells:
                for c, cell in cells.items():
                    old = visible.get(c)
                    if old is None or cell[1] >= old[1]:
                        visible[c] = cell
            seen = viewed[row] = (visible, {c: value for c, (value, _) in visible.items()})
        return seen[1]

    def mutations(self, physical: Callable[[str], str] = identity) -> list[Mutation]:
        """The folded rows as mutations, in (table, row, column) order, deletes first."""
        out: list[Mutation] = []
        append = out.append
        for table in sorted(self._written.keys() | self._row_tombs.keys() | self._col_tombs.keys()):
            target = physical(table)
            rows = self._written.get(table, {})
            row_tombs = self._row_tombs.get(table, {})
            col_tombs = self._col_tombs.get(table, {})
            keys = rows.keys() | row_tombs.keys() | col_tombs.keys() if row_tombs or col_tombs \
                else rows.keys()
            for row in sorted(keys):
                version = row_tombs.get(row)
                if version is not None:
                    append(DeleteRow(target, row, version))
                tombs = col_tombs.get(row)
                if tombs:
                    for column in sorted(tombs):
                        append(DeleteColumn(target, row, column, tombs[column]))
                cells = rows.get(row)
                if not cells:
                    continue
                for column in sorted(cells):
                    value, v = cells[column]
                    append(put(target, row, column, value, v))
        return out

    def contents(self, physical: Callable[[str], str] = identity) -> list[TableLoad]:
        """The folded tables as ``TableLoad``s (the data of ``mutations()``, as records).
        Each table's cells are listed as they are taken, in key order, in one pass from the
        fold (no list of every record first): take them before the fold changes."""
        loads: list[TableLoad] = []
        for table in sorted(self._written.keys() | self._row_tombs.keys() | self._col_tombs.keys()):
            tombs: list[TombRecord] = [(row, b"", v) for row, v in
                                       self._row_tombs.get(table, {}).items()]
            for row, columns in self._col_tombs.get(table, {}).items():
                tombs.extend((row, column, v) for column, v in columns.items())
            tombs.sort()
            loads.append(TableLoad(physical(table), _records(self._written.get(table, {})),
                                   tombs))
        return loads

    def clear(self) -> None:
        self._written.clear()
        self._row_tombs.clear()
        self._col_tombs.clear()
        self._views.clear()
        self.cells = 0


def _records(rows: dict[bytes, dict[bytes, Cell]]) -> Iterator[CellRecord]:
    """A folded table's cells as records, in key order."""
    for row in sorted(rows):
        found = rows[row]
        for column, cell in sorted(found.items()) if len(found) > 1 else found.items():
            yield (row, column, *cell)


def to_table(m: FoldInput, table: str) -> FoldInput:
    """``m`` written to ``table`` instead (a physical name)."""
    if type(m) is Put:
        return put(table, m.row, m.column, m.value, m.version)
    if isinstance(m, RowPut):
        return m._replace(table=table)
    return replace(m, table=table)
