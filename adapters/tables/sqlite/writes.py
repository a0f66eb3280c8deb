"""Writing the SQLite table store: a batch of puts and deletes per table (``Batch``, written
as the package docstring says), a fresh table's bulk load (``insert_fresh``), a Spark run's
tables merged in (``merge_table``, ``drop_covered``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from operator import itemgetter
from typing import Any

from adapters.tables.sqlite.schema import Schema
from projections.tablestore import (
    CellRecord,
    DeleteColumn,
    DeleteRow,
    InvalidMutation,
    Mutation,
    Put,
    TableLoad,
    UnknownFamily,
    family_of,
)

_IN_CHUNK = 500  # rows per ``row IN (...)`` query of tombstones
_column_of = itemgetter(1)  # of a CellRecord
_cell_key = itemgetter(0, 1)  # a CellRecord's row and column: its place in the table


@dataclass
class Batch:
    schema: Schema
    checked: set[bytes] = field(default_factory=set)  # columns whose family exists
    """Columns checked: ``batched`` hands the schema's own set (``Schema.known``), so a
    column is checked once per table, not once per batch."""
    puts: list[tuple[bytes, bytes, bytes, int]] = field(default_factory=list)
    column_deletes: list[tuple[bytes, bytes, int]] = field(default_factory=list)
    row_deletes: list[tuple[bytes, int]] = field(default_factory=list)

    def check(self, column: bytes) -> None:
        if column not in self.checked:
            if family_of(column) not in self.schema.families:
                raise UnknownFamily(
                    f"column {column!r}: table {self.schema.name!r} has no such family"
                )
            self.checked.add(column)

    def add_tombs(self, tombs: Iterable[tuple[bytes, bytes, int]]) -> None:
        """A load's tombstones (``TombRecord``: a column's, or with ``b""`` its row's)."""
        for row, column, version in tombs:
            if column:
                self.check(column)
                self.column_deletes.append((row, column, version))
            else:
                self.row_deletes.append((row, version))

    def _not_hidden(self, conn: sqlite3.Connection,
                    tombs_exist: bool | None) -> list[tuple[bytes, bytes, bytes, int]]:
        """The puts that no stored tombstone hides (read inside the write transaction).
        ``tombs_exist``: whether the table has any tombstone, if already known."""
        if tombs_exist is None:
            tombs_exist = conn.execute(
                f"SELECT 1 FROM {self.schema.tombs} LIMIT 1").fetchone() is not None
        if not tombs_exist:
            return self.puts
        rows = list({put[0] for put in self.puts})
        tombs: dict[tuple[bytes, bytes], int] = {}
        for i in range(0, len(rows), _IN_CHUNK):
            chunk = rows[i : i + _IN_CHUNK]
            sql = (
                f"SELECT row, col, version FROM {self.schema.tombs} "
                f"WHERE row IN ({', '.join('?' * len(chunk))})"
            )
            for row, col, version in conn.execute(sql, chunk):
                tombs[row, col] = version
        if not tombs:
            return self.puts
        return [
            put
            for put in self.puts
            if put[3] > tombs.get((put[0], b""), -1) and put[3] > tombs.get((put[0], put[1]), -1)
        ]

    @classmethod
    def of(cls, schema: Schema, load: TableLoad) -> Batch:
        """A ``TableLoad``'s records as a batch (no mutation objects on the way)."""
        batch = cls(schema)
        batch.puts = load.cells if isinstance(load.cells, list) else list(load.cells)
        for column in set(map(_column_of, batch.puts)):  # in C: a rebuild loads millions
            batch.check(column)
        batch.add_tombs(load.tombs)
        return batch

    def write(self, conn: sqlite3.Connection, tombs_exist: bool | None = None) -> None:
        s = self.schema
        if self.puts:
            # in key order (stable: a cell put twice keeps its order): a batch of rows keyed
            # newest first, inserted as they came, splits each page it meets in half and
            # leaves half of it empty for good (a fresh import's ``messages`` pages came out
            # 50 % empty, 16.5 % sorted; ADR 0111)
            if len(self.puts) > 1:
                self.puts.sort(key=_cell_key)
            _insert_rows(conn, s.insert, s.on_conflict, self._not_hidden(conn, tombs_exist))
        if self.column_deletes:
            column_deletes = [(bytearray(r), bytearray(c), v) for r, c, v in self.column_deletes]
            conn.executemany(s.raise_tomb, column_deletes)
            conn.executemany(
                f"DELETE FROM {s.cells} WHERE row = ?1 AND col = ?2 AND version <= ?3",
                column_deletes,
            )
        if self.row_deletes:
            row_deletes = [(bytearray(r), v) for r, v in self.row_deletes]
            conn.executemany(s.raise_tomb, [(r, _EMPTY, v) for r, v in row_deletes])
            conn.executemany(
                f"DELETE FROM {s.cells} WHERE row = ?1 AND version <= ?2", row_deletes
            )
            conn.executemany(
                f"DELETE FROM {s.tombs} WHERE row = ?1 AND col > x'' AND version <= ?2",
                row_deletes,
            )


_EMPTY = bytearray()
_ROWS_PER_INSERT = 200


@lru_cache(maxsize=256)
def _values(head: str, tail: str, rows: int) -> str:
    return f"{head} VALUES {', '.join(['(?, ?, ?, ?)'] * rows)}{tail}"


def _insert_rows(conn: sqlite3.Connection, head: str, tail: str, puts: Iterable[CellRecord],
                 row_tombs: dict[bytes, int] | None = None,
                 column_tombs: dict[bytes, dict[bytes, int]] | None = None,
                 check: Callable[[bytes], None] | None = None) -> None:
    """``head VALUES (...) tail`` for every put that the tombstones given do not hide,
    ``_ROWS_PER_INSERT`` rows a statement: one statement step for 200 rows instead of one
    each (SQLite applies the rows in order, as if one by one, upsert clause included), about
    half the cost of a row-per-step ``executemany``. Blobs are bound as ``bytearray`` (one
    per row key and column): Python's ``sqlite3`` sends a ``bytes`` parameter through its
    adapter lookup, about half a bound blob's cost. Parameters are made a statement at a
    time, as ``executemany`` takes them. ``check(column)``, if given, is called for each
    column the first time it is met (a fresh load's family check: inside the caller's
    transaction, which an error rolls back whole)."""
    rest: list[Any] = []

    def statements() -> Iterator[tuple[Any, ...]]:
        if not row_tombs and not column_tombs:
            yield from unhidden()
            return
        columns: dict[bytes, bytearray] = {}
        last: bytes | None = None
        key = _EMPTY
        floor: int = -1  # the current row's tombstone
        hidden: dict[bytes, int] | None = None  # and its column tombstones
        params: list[Any] = []
        add = params.extend
        full = 4 * _ROWS_PER_INSERT
        for row, column, value, version in puts:
            if row is not last:
                last, key = row, bytearray(row)
                if row_tombs is not None and column_tombs is not None:
                    floor, hidden = row_tombs.get(row, -1), column_tombs.get(row)
            if version <= floor or (hidden is not None and version <= hidden.get(column, -1)):
                continue
            name = columns.get(column)
            if name is None:
                if check is not None:
                    check(column)
                name = columns[column] = bytearray(column)
            add((key, name, bytearray(value), version))
            if len(params) == full:
                yield tuple(params)
                params.clear()
        rest.extend(params)

    def unhidden() -> Iterator[tuple[Any, ...]]:
        """``statements`` where no tombstone is given (most tables of a rebuild): the
        same parameters, without a tombstone test per cell."""
        columns: dict[bytes, bytearray] = {}
        last: bytes | None = None
        key = _EMPTY
        params: list[Any] = []
        add = params.extend
        left = _ROWS_PER_INSERT
        for row, column, value, version in puts:
            if row is not last:
                last, key = row, bytearray(row)
            name = columns.get(column)
            if name is None:
                if check is not None:
                    check(column)
                name = columns[column] = bytearray(column)
            add((key, name, bytearray(value), version))
            left -= 1
            if not left:
                yield tuple(params)
                params.clear()
                left = _ROWS_PER_INSERT
        rest.extend(params)

    if isinstance(puts, list) and len(puts) < _ROWS_PER_INSERT:
        # A command's few cells: one ``execute`` writes them (an ``executemany`` costs a
        # statement preparation), their parameters made in one loop.
        if not row_tombs and not column_tombs:
            if check is not None:
                for column in set(map(_column_of, puts)):
                    check(column)
            if puts:  # every put of the batch may be hidden by a stored tombstone
                conn.execute(_values(head, tail, len(puts)), _few(puts))
            return
        if next(statements(), None) is not None:
            raise AssertionError("a full statement from fewer puts than its rows")
    else:
        conn.executemany(_values(head, tail, _ROWS_PER_INSERT), statements())
    if rest:
        conn.execute(_values(head, tail, len(rest) // 4), rest)


def _few(puts: list[CellRecord]) -> list[Any]:
    """The parameters of fewer puts than a statement's rows (``_insert_rows``), no tombstone
    to test: each blob a ``bytearray``, made once for consecutive puts of the same object
    (a row's cells share its key; a batch's tracking rows their column and value)."""
    params: list[Any] = []
    add = params.extend
    last_row: bytes | None = None
    last_column: bytes | None = None
    last_value: bytes | None = None
    key = name = blob = _EMPTY
    for row, column, value, version in puts:
        if row is not last_row:
            last_row, key = row, bytearray(row)
        if column is not last_column:
            last_column, name = column, bytearray(column)
        if value is not last_value:
            last_value, blob = value, bytearray(value)
        add((key, name, blob, version))
    return params


def insert_fresh(conn: sqlite3.Connection, schema: Schema, load: TableLoad) -> None:
    """A ``TableLoad`` into an empty table (see ``SqliteTableStore.load``): tombstones
    inserted, cells that one of them hides left out, the others inserted in the order given
    with plain inserts (a load's cells are unique), in one pass over them (each column's
    family checked the first time it is met: the caller's transaction rolls back a failed
    load whole)."""
    batch = Batch(schema, schema.known)
    batch.add_tombs(load.tombs)
    row_tombs: dict[bytes, int] = dict(batch.row_deletes)
    column_tombs: dict[bytes, dict[bytes, int]] = {}
    for row, column, version in batch.column_deletes:
        column_tombs.setdefault(row, {})[column] = version
    tombs = [*((r, b"", v) for r, v in batch.row_deletes), *batch.column_deletes]
    if tombs:
        conn.executemany(schema.raise_tomb, [(bytearray(r), bytearray(c), v)
                                             for r, c, v in tombs])
    _insert_rows(conn, schema.insert, "", load.cells, row_tombs, column_tombs, batch.check)


def merge_table(conn: sqlite3.Connection, source: Schema, target: Schema) -> None:
    """The attached run's ``source`` table into ``target``, as ``apply`` would write it. Into
    an empty SQLite table (the first run a fresh table takes) a plain ``INSERT ... SELECT *``
    of the whole table: SQLite copies the records as they are, pages in key order (its
    transfer optimisation), half the time of the upsert; the run's keys are unique, so the
    outcome is the same."""
    for mine, theirs, upsert in (
        (target.tombs, source.tombs, " WHERE true ORDER BY row, col "
         "ON CONFLICT(row, col) DO UPDATE SET version = excluded.version "
         "WHERE excluded.version > version"),
        (target.cells, source.cells, " WHERE true ORDER BY row, col" + Schema.on_conflict),
    ):
        empty = conn.execute(f"SELECT 1 FROM {mine} LIMIT 1").fetchone() is None
        conn.execute(f"INSERT INTO {mine} SELECT * FROM run.{theirs}" + ("" if empty else upsert))


def batched(schema_of: Callable[[str], Schema], mutations: Iterable[Mutation]) -> dict[str, Batch]:
    """``mutations`` by table, every family checked before anything is written."""
    batches: dict[str, Batch] = {}
    last: str | None = None
    batch: Batch | None = None
    for m in mutations:  # check everything before writing anything
        table = m.table
        if table != last or batch is None:
            batch = batches.get(table)
            if batch is None:
                schema = schema_of(table)
                batch = batches[table] = Batch(schema, schema.known)
            last = table
        if type(m) is Put or isinstance(m, Put):
            column = m.column
            if column not in batch.checked:
                batch.check(column)
            batch.puts.append((m.row, column, m.value, m.version))
        elif isinstance(m, DeleteColumn):
            batch.check(m.column)
            batch.column_deletes.append((m.row, m.column, m.version))
        elif isinstance(m, DeleteRow):
            batch.row_deletes.append((m.row, m.version))
        else:
            raise InvalidMutation(f"mutation: {m!r:.80} is not a Put, DeleteColumn, DeleteRow")
    return batches


def write(conn: sqlite3.Connection, batches: dict[str, Batch],
          missing: Callable[[str, sqlite3.OperationalError], Exception]) -> None:
    """Every batch, in the transaction ``conn`` is in; ``missing`` names a table another
    connection dropped."""
    with_puts = [b for b in batches.values() if b.puts]
    tombs: dict[str, bool] = {}
    if len(with_puts) > 1:  # one statement asks every table whether it has tombstones
        probe = ", ".join(f"EXISTS (SELECT 1 FROM {b.schema.tombs})" for b in with_puts)
        try:
            found = conn.execute(f"SELECT {probe}").fetchone()
        except sqlite3.OperationalError:
            found = None  # a dropped table: the write below names it
        if found is not None:
            tombs = {b.schema.name: bool(v) for b, v in zip(with_puts, found, strict=True)}
    for batch in batches.values():
        try:
            batch.write(conn, tombs.get(batch.schema.name))
        except sqlite3.OperationalError as error:
            raise missing(batch.schema.name, error) from error


def drop_covered(conn: sqlite3.Connection, schema: Schema) -> None:
    """Removes the cells a tombstone covers (after merging runs: one run's tombstone may
    cover another's put), from the tombstones (few), not every cell (many)."""
    for match in ("c.col = t.col WHERE t.col != x''", "true WHERE t.col = x''"):
        conn.execute(
            f"DELETE FROM {schema.cells} WHERE (row, col) IN (SELECT c.row, c.col "
            f"FROM {schema.tombs} AS t JOIN {schema.cells} AS c ON c.row = t.row "
            f"AND {match} AND t.version >= c.version)")
