"""``MutationFold``: mutations folded into, per row, the final visible puts and the highest
deletes (HBase's version rule, ``tablestore``), read back as the store plus the fold would
show a row. The runner folds the tables a projection reads in a live batch, and every table
in a rebuild's fold (``runner``'s docstring).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

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

__all__ = ["Cell", "MutationFold", "identity", "to_table"]


def identity(name: str) -> str:
    return name


Cell = tuple[bytes, int]
_View = tuple[dict[bytes, Cell], dict[bytes, bytes]]  # visible cells, and their values


class MutationFold:
    """Folds mutations into, per row, the final visible puts and the highest deletes.

    Applying ``mutations()`` to a store has the same visible effect as applying everything
    folded, in any order (HBase version semantics: a put is hidden by a delete of a version
    ``>=`` its own; the highest version wins). ``read`` gives a row as the store plus the
    folded mutations would show it; ``load(table, row)`` fetches the stored row, once.
    The ``Put`` objects folded are kept and handed back, not copied.
    """

    def __init__(self, load: Callable[[str, bytes], Cells] | None = None) -> None:
        self._load = load
        self._written: dict[str, dict[bytes, dict[bytes, Put]]] = {}
        self._row_tombs: dict[str, dict[bytes, int]] = {}
        self._col_tombs: dict[str, dict[bytes, dict[bytes, int]]] = {}
        self._views: dict[str, dict[bytes, _View]] = {}  # rows read: table -> row -> view
        self.cells = 0  # puts held

    @property
    def empty(self) -> bool:
        return not (self._written or self._row_tombs or self._col_tombs)

    def apply(self, m: Mutation) -> None:
        self.extend((m,))

    def extend(self, mutations: Iterable[Mutation]) -> None:
        """Fold each mutation in (puts, several to one row, are the common case)."""
        written, row_tombs, col_tombs, views = (
            self._written, self._row_tombs, self._col_tombs, self._views)
        last_table: str | None = None
        last_row: bytes | None = None
        cells: dict[bytes, Put] = {}
        row_tomb = -1
        column_tombs: dict[bytes, int] | None = None
        view: _View | None = None
        added = 0
        for m in mutations:
            if type(m) is not Put:
                if type(m) is DeleteColumn:
                    self._delete_column(m.table, m.row, m.column, m.version)
                elif type(m) is DeleteRow:
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
            column = m.column
            if column_tombs is not None and version <= column_tombs.get(column, -1):
                continue
            kept = cells.get(column)
            if kept is None:
                added += 1
            elif version < kept.version:
                continue
            cells[column] = m
            if view is not None:
                visible, values = view
                old = visible.get(column)
                if old is None or version >= old[1]:
                    visible[column] = (m.value, version)
                    values[column] = m.value
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
            if kept is not None and kept.version <= version:
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
            kept = {c: p for c, p in cells.items() if p.version > version}
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
                for c, p in cells.items():
                    old = visible.get(c)
                    if old is None or p.version >= old[1]:
                        visible[c] = (p.value, p.version)
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
                if target == table:
                    out.extend(cells[column] for column in sorted(cells))
                else:
                    for column in sorted(cells):
                        p = cells[column]
                        append(put(target, row, column, p.value, p.version))
        return out

    def contents(self, physical: Callable[[str], str] = identity) -> list[TableLoad]:
        """The folded tables as ``TableLoad``s (the data of ``mutations()``, as records)."""
        loads: list[TableLoad] = []
        for table in sorted(self._written.keys() | self._row_tombs.keys() | self._col_tombs.keys()):
            rows = self._written.get(table, {})
            cells: list[CellRecord] = []
            add = cells.append
            for row in sorted(rows):
                found = rows[row]
                for column, p in sorted(found.items()) if len(found) > 1 else found.items():
                    add((row, column, p.value, p.version))
            tombs: list[TombRecord] = [(row, b"", v) for row, v in
                                       self._row_tombs.get(table, {}).items()]
            for row, columns in self._col_tombs.get(table, {}).items():
                tombs.extend((row, column, v) for column, v in columns.items())
            tombs.sort()
            loads.append(TableLoad(physical(table), cells, tombs))
        return loads

    def clear(self) -> None:
        self._written.clear()
        self._row_tombs.clear()
        self._col_tombs.clear()
        self._views.clear()
        self.cells = 0


def to_table(m: Mutation, table: str) -> Mutation:
    """``m`` written to ``table`` instead (a physical name)."""
    if type(m) is Put:
        return put(table, m.row, m.column, m.value, m.version)
    return replace(m, table=table)
