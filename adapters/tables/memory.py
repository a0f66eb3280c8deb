"""``InMemoryTableStore``: the reference implementation of the table store port.

Plain dicts and a sorted key list (``bisect``). Per table it keeps, like the SQLite adapter,
only what decides what a reader sees:

* ``cells[row][column] = (value, version)`` -- the newest *visible* put of each cell;
* ``column_tombs[row][column] = version`` -- the highest ``DeleteColumn`` of a cell;
* ``row_tombs[row] = version`` -- the highest ``DeleteRow`` of a row.

A put is kept only if its version is above both tombstones and not below the kept version;
a delete removes the kept puts it hides. Tombstones are kept forever, so a late put with an
old version stays hidden (HBase before a major compaction). Thread-safe through one lock;
scans read in chunks, so writing while iterating a scan is allowed.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from projections.tablestore import (
    Cells,
    DeleteColumn,
    DeleteRow,
    KeyRange,
    Mutation,
    Put,
    StoreClosed,
    TableNotFound,
    TableSpec,
    TableSpecConflict,
    UnknownFamily,
    ValuesFromCells,
    family_of,
    hidden,
    is_family_filter,
    key_range,
    replaces,
    validate_table_name,
)

_CHUNK = 256


@dataclass
class _Table:
    spec: TableSpec
    families: frozenset[bytes]
    keys: list[bytes] = field(default_factory=list)  # sorted keys of ``cells``
    cells: dict[bytes, dict[bytes, tuple[bytes, int]]] = field(default_factory=dict)
    column_tombs: dict[bytes, dict[bytes, int]] = field(default_factory=dict)
    row_tombs: dict[bytes, int] = field(default_factory=dict)

    def put(self, m: Put) -> None:
        if hidden(m.version, self.row_tombs.get(m.row, -1)):
            return
        if hidden(m.version, self.column_tombs.get(m.row, {}).get(m.column, -1)):
            return
        row = self.cells.get(m.row)
        if row is None:
            row = self.cells[m.row] = {}
            insort(self.keys, m.row)
        kept = row.get(m.column)
        if replaces(m.version, None if kept is None else kept[1]):
            row[m.column] = (m.value, m.version)

    def delete_column(self, m: DeleteColumn) -> None:
        tombs = self.column_tombs.setdefault(m.row, {})
        tombs[m.column] = max(tombs.get(m.column, -1), m.version)
        row = self.cells.get(m.row)
        if row is not None and m.column in row and hidden(row[m.column][1], m.version):
            del row[m.column]
            self._forget_if_empty(m.row, row)

    def delete_row(self, m: DeleteRow) -> None:
        self.row_tombs[m.row] = max(self.row_tombs.get(m.row, -1), m.version)
        row = self.cells.get(m.row)
        if row is not None:
            for column in [c for c, (_, v) in row.items() if hidden(v, m.version)]:
                del row[column]
            self._forget_if_empty(m.row, row)

    def _forget_if_empty(self, key: bytes, row: dict[bytes, tuple[bytes, int]]) -> None:
        if not row:
            del self.cells[key]
            del self.keys[bisect_left(self.keys, key)]


def _column_filter(table: _Table, columns: Sequence[bytes] | None) -> tuple[set[bytes], set[bytes]]:
    families: set[bytes] = set()
    exact: set[bytes] = set()
    for column in columns or ():
        if family_of(column) not in table.families:
            raise UnknownFamily(f"column {column!r}: table {table.spec.name!r} has no such family")
        if is_family_filter(column):
            families.add(family_of(column))
        else:
            exact.add(column)
    return families, exact


def _select(
    row: dict[bytes, tuple[bytes, int]],
    columns: Sequence[bytes] | None,
    wanted: tuple[set[bytes], set[bytes]],
) -> Cells:
    if columns is None:
        return {c: row[c] for c in sorted(row)}
    families, exact = wanted
    return {c: row[c] for c in sorted(row) if c in exact or family_of(c) in families}


class InMemoryTableStore(ValuesFromCells):
    """Every table in process memory; the fake for unit tests and the semantic reference."""

    def __init__(self) -> None:
        self._tables: dict[str, _Table] = {}
        self._lock = threading.RLock()
        self._closed = False

    # -- tables ------------------------------------------------------------------------------

    def _table(self, name: str) -> _Table:
        if self._closed:
            raise StoreClosed("the in-memory table store is closed")
        table = self._tables.get(name)
        if table is None:
            raise TableNotFound(f"table {name!r} does not exist")
        return table

    def create_table(self, spec: TableSpec) -> None:
        with self._lock:
            if self._closed:
                raise StoreClosed("the in-memory table store is closed")
            existing = self._tables.get(spec.name)
            if existing is None:
                families = frozenset(f.encode() for f in spec.families)
                self._tables[spec.name] = _Table(spec, families)
            elif set(existing.spec.families) != set(spec.families):
                raise TableSpecConflict(
                    f"table {spec.name!r} exists with families {existing.spec.families!r}, "
                    f"not {spec.families!r}"
                )

    def drop_table(self, name: str) -> None:
        validate_table_name(name)
        with self._lock:
            self._tables.pop(name, None)

    def table_exists(self, name: str) -> bool:
        with self._lock:
            return name in self._tables

    def list_tables(self) -> list[str]:
        with self._lock:
            return sorted(self._tables)

    # -- writes ------------------------------------------------------------------------------

    def apply(self, mutations: Iterable[Mutation]) -> None:
        batch = list(mutations)
        with self._lock:
            for m in batch:  # check everything before writing anything
                table = self._table(m.table)
                if not isinstance(m, DeleteRow) and family_of(m.column) not in table.families:
                    raise UnknownFamily(
                        f"column {m.column!r}: table {m.table!r} has no such family"
                    )
            for m in batch:
                table = self._tables[m.table]
                if isinstance(m, Put):
                    table.put(m)
                elif isinstance(m, DeleteColumn):
                    table.delete_column(m)
                else:
                    table.delete_row(m)

    # -- reads -------------------------------------------------------------------------------

    def get_cells(self, table: str, row: bytes, columns: Sequence[bytes] | None = None) -> Cells:
        with self._lock:
            t = self._table(table)
            wanted = _column_filter(t, columns)
            return _select(t.cells.get(row, {}), columns, wanted)

    def scan_cells(
        self,
        table: str,
        *,
        prefix: bytes | None = None,
        start: bytes | None = None,
        stop: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
        columns: Sequence[bytes] | None = None,
    ) -> Iterator[tuple[bytes, Cells]]:
        with self._lock:  # fail at the call, not at the first next()
            wanted = _column_filter(self._table(table), columns)
        bounds = key_range(prefix=prefix, start=start, stop=stop, reverse=reverse)
        return self._scan(table, bounds, reverse, limit, columns, wanted)

    def _scan(
        self,
        table: str,
        bounds: KeyRange,
        reverse: bool,
        limit: int | None,
        columns: Sequence[bytes] | None,
        wanted: tuple[set[bytes], set[bytes]],
    ) -> Iterator[tuple[bytes, Cells]]:
        remaining = limit
        if bounds.is_empty() or (remaining is not None and remaining <= 0):
            return
        low, high, high_inclusive = bounds.low, bounds.high, bounds.high_inclusive
        while True:
            with self._lock:
                t = self._table(table)
                lo = 0 if low is None else bisect_left(t.keys, low)
                if high is None:
                    hi = len(t.keys)
                else:
                    hi = (bisect_right if high_inclusive else bisect_left)(t.keys, high)
                if reverse:
                    keys = t.keys[max(lo, hi - _CHUNK) : hi][::-1]
                else:
                    keys = t.keys[lo : min(hi, lo + _CHUNK)]
                chunk = [(k, _select(t.cells[k], columns, wanted)) for k in keys]
            for key, cells in chunk:
                if not cells:
                    continue
                yield key, cells
                if remaining is not None:
                    remaining -= 1
                    if remaining == 0:
                        return
            if len(keys) < _CHUNK:
                return
            if reverse:
                high, high_inclusive = keys[-1], False
            else:
                low = keys[-1] + b"\x00"

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._tables.clear()
