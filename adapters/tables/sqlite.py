"""``SqliteTableStore``: the table store port on one embedded SQLite file.

Storage layout
--------------
One SQLite file in WAL mode, 4 KiB pages (``PAGE_SIZE``). The catalog
``letterlog_tables(name, families, split_by_salt)`` lists the logical tables. Each logical
table ``T`` is two SQLite tables, both ``WITHOUT ROWID`` with primary key ``(row, col)`` so
that rows sit in byte order on disk:

* ``"cells:T"(row, col, value, version)`` holds exactly what a reader sees: for every cell
  the newest put that no delete hides. Reads are plain range queries on the primary key,
  with no tombstone filtering and no skipping of dead rows.
* ``"tombs:T"(row, col, version)`` holds the highest delete version per cell
  (``DeleteColumn``) and per row (``DeleteRow``, stored under the empty column ``x''``,
  which no real column can be since columns are ``family:qualifier``).

Writes keep that invariant:

* ``Put`` is an upsert (``executemany``) that wins when its version is ``>=`` the stored
  one (same version: last write wins; an identical re-put rewrites nothing). Puts that a
  tombstone of their cell or row hides (tombstone version ``>=`` theirs) are dropped
  first: the batch's rows' tombstones are read in the write transaction (one
  ``row IN (...)`` query per 500 rows) and the puts filtered in Python -- about twice as
  fast as a ``NOT EXISTS`` probe per put. While a table has no tombstone at all even that
  read is skipped, so a fresh projection catching up pays only the upsert.
* ``DeleteColumn(v)`` raises the cell tombstone to ``v`` and deletes the stored put if its
  version is ``<= v``; ``DeleteRow(v)`` raises the row tombstone and deletes the row's
  puts and column tombstones with version ``<= v``.

Tombstones are kept forever, so a put that arrives late with an old version stays hidden
(HBase's semantics before a major compaction). Because every one of these operations
commutes -- except puts of the same cell and version, which keep their order -- one
``apply`` runs, per table, all puts (``executemany``), then column deletes, then row deletes,
in one ``BEGIN IMMEDIATE`` transaction: the whole batch is atomic.

Concurrency: one connection per thread (``threading.local``, all closed by ``close()``);
several processes may open the same file (WAL, ``busy_timeout``). Scans read in pages of
whole rows (``LIMIT`` on cells, the last, possibly cut row read again by the next page), so
each row is read atomically, no statement stays open while the caller holds a row, and
writing while iterating is allowed. The catalog is cached per store: a table that another
process drops and re-creates *with other families* needs a new store object.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from operator import itemgetter
from pathlib import Path
from typing import Any

from adapters.filemodes import private_file
from projections.tablestore import (
    CellRecord,
    Cells,
    DeleteColumn,
    DeleteRow,
    InvalidMutation,
    KeyRange,
    Mutation,
    Put,
    Row,
    StoreClosed,
    TableLoad,
    TableNotFound,
    TableSpec,
    TableSpecConflict,
    UnknownFamily,
    family_of,
    is_family_filter,
    key_range,
    validate_table_name,
)

_CATALOG = "letterlog_tables"
_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
_MAX_PAGE = 16384
_FIRST_PAGE = 1024
_IN_CHUNK = 500
PAGE_SIZE = 4096
"""Page size of a new tables file. Every command commits its read-model writes (about ten
B-tree leaves) to the WAL: 4 KiB pages write a quarter of the bytes of 16 KiB pages, which
took about 250 µs off each delivery (``bench ingest``). 16 KiB pages keep an inline body
over ~1 KB in its leaf instead of an overflow page: a 1M-event rebuild wrote its cells in
20 s instead of 30 s (9.7k vs 8.9k events/s overall). The live path matters more (ADR
0011). An existing file keeps the page size it was made with."""
WAL_AUTOCHECKPOINT = 10000
"""Pages in the WAL before a commit checkpoints it (SQLite's default is 1000): a leaf that
many commits touch is copied into the database once per checkpoint, not once per 1000
pages. After a checkpoint the WAL file is cut back to 64 MiB (``journal_size_limit``)."""

_column_of = itemgetter(1)  # of a CellRecord


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


@dataclass(frozen=True)
class _Schema:
    """A logical table: its families and the SQL that works on it."""

    name: str
    families: frozenset[bytes]
    cells: str  # quoted SQLite table names
    tombs: str

    @classmethod
    def of(cls, name: str, families: Iterable[str]) -> _Schema:
        return cls(
            name,
            frozenset(f.encode() for f in families),
            _quote(f"cells:{name}"),
            _quote(f"tombs:{name}"),
        )

    @property
    def insert(self) -> str:
        return f"INSERT INTO {self.cells}(row, col, value, version)"

    _on_conflict = (
        " ON CONFLICT(row, col) DO UPDATE SET value = excluded.value, version = excluded.version "
        "WHERE excluded.version > version "
        "OR (excluded.version = version AND excluded.value IS NOT value)"
    )

    @property
    def raise_tomb(self) -> str:
        return (
            f"INSERT INTO {self.tombs}(row, col, version) VALUES (?, ?, ?) "
            "ON CONFLICT(row, col) DO UPDATE SET version = excluded.version "
            "WHERE excluded.version > version"
        )


@dataclass
class _Batch:
    schema: _Schema
    checked: set[bytes] = field(default_factory=set)  # columns whose family exists
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
    def of(cls, schema: _Schema, load: TableLoad) -> _Batch:
        """A ``TableLoad``'s records as a batch (no mutation objects on the way)."""
        batch = cls(schema)
        for column in set(map(_column_of, load.cells)):  # in C: a rebuild loads millions
            batch.check(column)
        batch.puts = load.cells if isinstance(load.cells, list) else list(load.cells)
        for row, column, version in load.tombs:
            if column:
                batch.check(column)
                batch.column_deletes.append((row, column, version))
            else:
                batch.row_deletes.append((row, version))
        return batch

    def write(self, conn: sqlite3.Connection, tombs_exist: bool | None = None) -> None:
        s = self.schema
        if self.puts:
            _insert_rows(conn, s.insert, s._on_conflict, self._not_hidden(conn, tombs_exist))
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
                 column_tombs: dict[bytes, dict[bytes, int]] | None = None) -> None:
    """``head VALUES (...) tail`` for every put that the tombstones given do not hide,
    ``_ROWS_PER_INSERT`` rows a statement: one statement step for 200 rows instead of one
    each (SQLite applies the rows in order, as if one by one, upsert clause included), about
    half the cost of a row-per-step ``executemany``. Blobs are bound as ``bytearray`` (one
    per row key and column): Python's ``sqlite3`` sends a ``bytes`` parameter through its
    adapter lookup, about half a bound blob's cost. Parameters are made a statement at a
    time, as ``executemany`` takes them."""
    rest: list[Any] = []

    def statements() -> Iterator[tuple[Any, ...]]:
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
                name = columns[column] = bytearray(column)
            add((key, name, bytearray(value), version))
            if len(params) == full:
                yield tuple(params)
                params.clear()
        rest.extend(params)

    if isinstance(puts, list) and len(puts) < _ROWS_PER_INSERT:
        # A command's few cells: the generator only fills ``rest`` (never a full statement),
        # and one ``execute`` writes them; an ``executemany`` costs a statement preparation.
        if next(statements(), None) is not None:
            raise AssertionError("a full statement from fewer puts than its rows")
    else:
        conn.executemany(_values(head, tail, _ROWS_PER_INSERT), statements())
    if rest:
        conn.execute(_values(head, tail, len(rest) // 4), rest)


def _insert_fresh(conn: sqlite3.Connection, schema: _Schema, load: TableLoad) -> None:
    """A ``TableLoad`` into an empty table (see ``SqliteTableStore.load``): tombstones
    inserted, cells that one of them hides left out, the others inserted in the order given
    with plain inserts (a load's cells are unique)."""
    batch = _Batch.of(schema, load)  # checks every family before anything is written
    row_tombs: dict[bytes, int] = dict(batch.row_deletes)
    column_tombs: dict[bytes, dict[bytes, int]] = {}
    for row, column, version in batch.column_deletes:
        column_tombs.setdefault(row, {})[column] = version
    tombs = [*((r, b"", v) for r, v in batch.row_deletes), *batch.column_deletes]
    if tombs:
        conn.executemany(schema.raise_tomb, [(bytearray(r), bytearray(c), v)
                                             for r, c, v in tombs])
    _insert_rows(conn, schema.insert, "", load.cells, row_tombs, column_tombs)


def _merge_table(conn: sqlite3.Connection, source: _Schema, target: _Schema) -> None:
    """The attached run's ``source`` table into ``target``, as ``apply`` would write it."""
    conn.execute(
        f"INSERT INTO {target.tombs}(row, col, version) SELECT row, col, version "
        f"FROM run.{source.tombs} WHERE true ORDER BY row, col "
        "ON CONFLICT(row, col) DO UPDATE SET version = excluded.version "
        "WHERE excluded.version > version")
    conn.execute(f"{target.insert} SELECT row, col, value, version FROM run.{source.cells} "
                 f"WHERE true ORDER BY row, col" + _Schema._on_conflict)


def _column_clause(schema: _Schema, columns: Sequence[bytes] | None) -> tuple[str, list[bytes]]:
    """SQL restricting ``col`` to ``columns`` (families as ``b"fam:"``), with its params."""
    if columns is None:
        return "", []
    exact: list[bytes] = []
    ranges: list[bytes] = []
    for column in columns:
        family = family_of(column)
        if family not in schema.families:
            raise UnknownFamily(f"column {column!r}: table {schema.name!r} has no such family")
        if is_family_filter(column):
            ranges += [family + b":", family + b";"]  # ';' follows ':' in ASCII
        else:
            exact.append(column)
    terms = ["(col >= ? AND col < ?)"] * (len(ranges) // 2)
    if exact:
        terms.append(f"col IN ({', '.join('?' * len(exact))})")
    return " AND (" + " OR ".join(terms) + ")", ranges + exact


_Cell = tuple[Any, ...]  # (row, col, value, version), or without the version for ``scan``


def _grouped(cells: list[_Cell], versions: bool, reverse: bool
             ) -> list[tuple[bytes, dict[bytes, Any]]]:
    """A page of cells in row order as ``(row, {column: value})`` (``versions``: ``{column:
    (value, version)}``), columns in column order. One plain loop over the cells: half the
    time of ``groupby`` with a list and a dict comprehension per row (a 50-row listing reads
    350 cells)."""
    out: list[tuple[bytes, dict[bytes, Any]]] = []
    current = None
    row: dict[bytes, Any] = {}
    if versions:
        for key, column, value, version in cells:
            if key != current:
                row = {}
                out.append((key, row))
                current = key
            row[column] = (value, version)
    else:
        for key, column, value in cells:
            if key != current:
                row = {}
                out.append((key, row))
                current = key
            row[column] = value
    if reverse:  # the columns came last first, as the rows did
        out = [(key, dict(reversed(found.items()))) for key, found in out]
    return out
_GUESSED_WIDTH = 8  # cells per row, when a scan's columns do not bound it


@dataclass(frozen=True, slots=True)
class _ScanQuery:
    """What stays the same over the pages of one scan."""

    schema: _Schema
    clause: str
    params: list[bytes]
    reverse: bool
    width: int  # most cells a row can have among the scanned columns (or a guess)
    versions: bool  # select each cell's version too (``scan_cells``; ``scan`` needs none)


def _row_width(columns: Sequence[bytes] | None) -> int:
    """Named columns bound a row's cells; whole families (or all columns) do not."""
    if columns is None or any(is_family_filter(c) for c in columns):
        return _GUESSED_WIDTH
    return max(1, len(set(columns)))


class SqliteTableStore:
    """Every logical table in one SQLite file; see the module docstring for the layout."""

    def __init__(
        self, path: str | Path, *, synchronous: str = "NORMAL", busy_timeout: float = 30.0,
        page_size: int = PAGE_SIZE,
    ) -> None:
        if synchronous.upper() not in _SYNCHRONOUS:
            raise ValueError(f"synchronous: {synchronous!r} is not one of {_SYNCHRONOUS}")
        self._path = str(path)
        if self._path != ":memory:" and not self._path.startswith("file:"):
            private_file(self._path)  # 0600 before SQLite makes it (and its -wal, -shm)
        self._synchronous = synchronous.upper()
        self._busy_timeout = busy_timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._schemas: dict[str, _Schema] = {}
        self._closed = False
        conn = self._conn()
        conn.execute(f"PRAGMA page_size={page_size}")  # only a new, empty file takes it
        conn.execute("PRAGMA journal_mode=WAL")
        with self._transaction(conn):
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {_CATALOG} (name TEXT PRIMARY KEY, "
                "families TEXT NOT NULL, split_by_salt INTEGER NOT NULL)"
            )

    # -- connections -------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreClosed(f"table store {self._path} is closed")
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self._path,
                isolation_level=None,
                check_same_thread=False,
                timeout=self._busy_timeout,
            )
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            conn.execute("PRAGMA secure_delete=ON")  # a purged row's bytes are zeroed
            conn.execute("PRAGMA cache_size=-32768")  # 32 MiB per connection
            conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT}")
            conn.execute("PRAGMA journal_size_limit=67108864")
            with self._lock:
                self._connections.append(conn)
            self._local.conn = conn
        return conn

    @staticmethod
    @contextmanager
    def _transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _schema(self, name: str) -> _Schema:
        schema = self._schemas.get(name)
        if schema is None:
            found = (
                self._conn()
                .execute(f"SELECT families FROM {_CATALOG} WHERE name = ?", (name,))
                .fetchone()
            )
            if found is None:
                raise TableNotFound(f"table {name!r} does not exist")
            schema = self._schemas[name] = _Schema.of(name, json.loads(found[0]))
        return schema

    def _missing(self, name: str, error: sqlite3.OperationalError) -> Exception:
        """A table dropped by another connection shows up as an SQLite error."""
        self._schemas.pop(name, None)
        if "no such table" in str(error):
            return TableNotFound(f"table {name!r} does not exist")
        return error

    def data_version(self) -> tuple[int, int]:
        """This thread's connection and its ``PRAGMA data_version``: the number changes when
        another connection commits to the file, not when this one does."""
        conn = self._conn()
        return id(conn), int(conn.execute("PRAGMA data_version").fetchone()[0])

    # -- tables ------------------------------------------------------------------------------

    def create_table(self, spec: TableSpec) -> None:
        with self._transaction(self._conn()) as conn:
            found = conn.execute(
                f"SELECT families FROM {_CATALOG} WHERE name = ?", (spec.name,)
            ).fetchone()
            if found is not None:
                families = json.loads(found[0])
                if set(families) != set(spec.families):
                    raise TableSpecConflict(
                        f"table {spec.name!r} exists with families {tuple(families)!r}, "
                        f"not {spec.families!r}"
                    )
                return
            schema = _Schema.of(spec.name, spec.families)
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {schema.cells} (row BLOB NOT NULL, "
                "col BLOB NOT NULL, value BLOB NOT NULL, version INTEGER NOT NULL, "
                "PRIMARY KEY (row, col)) WITHOUT ROWID"
            )
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {schema.tombs} (row BLOB NOT NULL, "
                "col BLOB NOT NULL, version INTEGER NOT NULL, "
                "PRIMARY KEY (row, col)) WITHOUT ROWID"
            )
            conn.execute(
                f"INSERT INTO {_CATALOG} (name, families, split_by_salt) VALUES (?, ?, ?)",
                (spec.name, json.dumps(list(spec.families)), int(spec.split_by_salt)),
            )
        self._schemas.pop(spec.name, None)

    def drop_table(self, name: str) -> None:
        schema = _Schema.of(validate_table_name(name), ())
        with self._transaction(self._conn()) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {schema.cells}")
            conn.execute(f"DROP TABLE IF EXISTS {schema.tombs}")
            conn.execute(f"DELETE FROM {_CATALOG} WHERE name = ?", (name,))
        self._schemas.pop(name, None)

    def table_exists(self, name: str) -> bool:
        sql = f"SELECT 1 FROM {_CATALOG} WHERE name = ?"
        return self._conn().execute(sql, (name,)).fetchone() is not None

    def list_tables(self) -> list[str]:
        rows = self._conn().execute(f"SELECT name FROM {_CATALOG} ORDER BY name").fetchall()
        return [name for (name,) in rows]

    # -- writes ------------------------------------------------------------------------------

    def apply(self, mutations: Iterable[Mutation]) -> None:
        batches = self._batches(mutations)
        if not batches:
            return
        conn = self._conn()
        with self._transaction(conn):
            self._write(conn, batches)

    def _write(self, conn: sqlite3.Connection, batches: dict[str, _Batch]) -> None:
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
                raise self._missing(batch.schema.name, error) from error

    def load(self, loads: Sequence[TableLoad], mutations: Iterable[Mutation] = ()) -> None:
        """``apply`` of every load's tombstones and cells, then of ``mutations``, in one
        transaction. Into an empty table (a rebuild's fresh one) they are plain inserts in
        the order given (key order: page by page), the cells a tombstone of the same load
        hides left out, blobs bound as ``bytearray``: Python's ``sqlite3`` sends ``bytes``
        through its adapter lookup, most of a bound blob's cost. A table that holds
        anything takes the general path of ``apply``."""
        checked = [(self._schema(load.table), load) for load in loads]
        batches = self._batches(mutations)
        conn = self._conn()
        with self._transaction(conn):
            for schema, load in checked:
                try:
                    empty = all(conn.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() is None
                                for t in (schema.cells, schema.tombs))
                    if empty:
                        _insert_fresh(conn, schema, load)
                    else:
                        _Batch.of(schema, load).write(conn)
                except sqlite3.OperationalError as error:
                    raise self._missing(schema.name, error) from error
            self._write(conn, batches)

    def merge_runs(self, runs: Sequence[str | Path], tables: dict[str, str]) -> None:
        """Merges *runs* (other tables files, each holding logical tables already folded, as
        a Spark rebuild's tasks write them) into this store's tables ``tables[logical]``,
        inside SQLite (``ATTACH`` + ``INSERT ... SELECT`` in key order), one transaction per
        run (the target tables are a rebuild's fresh ones, read by no one before a switch).
        The outcome is ``apply`` of every run's puts and deletes: the higher tombstone and
        the higher version win, and a put that another run's tombstone covers is removed."""
        conn = self._conn()
        schemas = {logical: self._schema(physical) for logical, physical in tables.items()}
        for run in runs:  # one transaction per run: the tables are not live before a switch
            conn.execute("ATTACH DATABASE ? AS run", (str(run),))
            try:
                with self._transaction(conn):
                    present = {name for (name,) in conn.execute(
                        f"SELECT name FROM run.{_CATALOG}")}
                    for logical, schema in schemas.items():
                        if logical in present:
                            _merge_table(conn, _Schema.of(logical, ()), schema)
            finally:
                conn.execute("DETACH DATABASE run")
        with self._transaction(conn):  # from the tombstones (few), not every cell (many)
            for schema in schemas.values():
                for match in ("c.col = t.col WHERE t.col != x''", "true WHERE t.col = x''"):
                    conn.execute(
                        f"DELETE FROM {schema.cells} WHERE (row, col) IN (SELECT c.row, c.col "
                        f"FROM {schema.tombs} AS t JOIN {schema.cells} AS c ON c.row = t.row "
                        f"AND {match} AND t.version >= c.version)")

    def _batches(self, mutations: Iterable[Mutation]) -> dict[str, _Batch]:
        batches: dict[str, _Batch] = {}
        for m in mutations:  # check everything before writing anything
            batch = batches.get(m.table)
            if batch is None:
                batch = batches[m.table] = _Batch(self._schema(m.table))
            if isinstance(m, Put):
                batch.check(m.column)
                batch.puts.append((m.row, m.column, m.value, m.version))
            elif isinstance(m, DeleteColumn):
                batch.check(m.column)
                batch.column_deletes.append((m.row, m.column, m.version))
            elif isinstance(m, DeleteRow):
                batch.row_deletes.append((m.row, m.version))
            else:
                raise InvalidMutation(f"mutation: {m!r:.80} is not a Put, DeleteColumn, DeleteRow")
        return batches

    # -- reads -------------------------------------------------------------------------------

    def get(self, table: str, row: bytes, columns: Sequence[bytes] | None = None) -> Row:
        return {c: v for c, (v, _) in self.get_cells(table, row, columns).items()}

    def get_cells(self, table: str, row: bytes, columns: Sequence[bytes] | None = None) -> Cells:
        schema = self._schema(table)
        clause, params = _column_clause(schema, columns)
        sql = f"SELECT col, value, version FROM {schema.cells} WHERE row = ?{clause} ORDER BY col"
        try:
            found = self._conn().execute(sql, [row, *params]).fetchall()
        except sqlite3.OperationalError as error:
            raise self._missing(table, error) from error
        return {col: (value, version) for col, value, version in found}

    def scan(
        self,
        table: str,
        *,
        prefix: bytes | None = None,
        start: bytes | None = None,
        stop: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
        columns: Sequence[bytes] | None = None,
    ) -> Iterator[tuple[bytes, Row]]:
        return self._rows(table, prefix, start, stop, reverse, limit, columns, versions=False)

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
        return self._rows(table, prefix, start, stop, reverse, limit, columns, versions=True)

    def _rows(
        self,
        table: str,
        prefix: bytes | None,
        start: bytes | None,
        stop: bytes | None,
        reverse: bool,
        limit: int | None,
        columns: Sequence[bytes] | None,
        *,
        versions: bool,
    ) -> Iterator[tuple[bytes, dict[bytes, Any]]]:
        schema = self._schema(table)  # fail at the call, not at the first next()
        clause, params = _column_clause(schema, columns)
        bounds = key_range(prefix=prefix, start=start, stop=stop, reverse=reverse)
        query = _ScanQuery(schema, clause, params, reverse, _row_width(columns), versions)
        return self._scan(query, bounds, limit)

    def _scan(
        self, query: _ScanQuery, bounds: KeyRange, limit: int | None
    ) -> Iterator[tuple[bytes, dict[bytes, Any]]]:
        """Rows as ``{column: value}`` (``versions``: ``{column: (value, version)}``), the
        columns in column order."""
        remaining = limit
        if bounds.is_empty() or (remaining is not None and remaining <= 0):
            return
        low, high, high_inclusive = bounds.low, bounds.high, bounds.high_inclusive
        reverse, width = query.reverse, query.width
        order = "row DESC, col DESC" if reverse else "row, col"
        selected = "row, col, value, version" if query.versions else "row, col, value"
        # a page of ``remaining * width + 1`` cells holds ``remaining`` whole rows at least
        page = _FIRST_PAGE if remaining is None else min(_MAX_PAGE, remaining * width + 1)
        while True:
            where: list[str] = []
            args: list[Any] = []
            if low is not None:
                where.append("row >= ?")
                args.append(low)
            if high is not None:
                where.append("row <= ?" if high_inclusive else "row < ?")
                args.append(high)
            sql = (
                f"SELECT {selected} FROM {query.schema.cells} "
                f"WHERE {' AND '.join(where) or '1'}{query.clause} ORDER BY {order} LIMIT ?"
            )
            try:
                cells = self._conn().execute(sql, [*args, *query.params, page]).fetchall()
            except sqlite3.OperationalError as error:
                raise self._missing(query.schema.name, error) from error
            complete = len(cells) < page
            if not complete:  # the last row may go on in the next page: read it again there
                last = cells[-1][0]
                cut = len(cells) - 1
                while cut > 0 and cells[cut - 1][0] == last:
                    cut -= 1
                if cut == 0:  # one row wider than a page
                    page = min(page * 4, 2**31 - 1)
                    continue
                del cells[cut:]
            rows = 0
            for key, found in _grouped(cells, query.versions, reverse):
                yield key, found
                rows += 1
                if remaining is not None:
                    remaining -= 1
                    if remaining == 0:
                        return
            if complete:
                return
            if reverse:
                high, high_inclusive = last, True
            else:
                low = last
            per_row = len(cells) / rows
            want = _MAX_PAGE if remaining is None else int(per_row * remaining * 1.25) + 2
            page = max(64, min(_MAX_PAGE, want, page * 4))

    # -- lifecycle ---------------------------------------------------------------------------

    def checkpoint(self, mode: str = "PASSIVE") -> tuple[int, int, int]:
        """Copy the WAL into the database file; returns SQLite's (busy, log, checkpointed)."""
        if mode.upper() not in ("PASSIVE", "FULL", "RESTART", "TRUNCATE"):
            raise ValueError(f"mode: {mode!r} is not a wal_checkpoint mode")
        busy, log, done = self._conn().execute(f"PRAGMA wal_checkpoint({mode.upper()})").fetchone()
        return int(busy), int(log), int(done)

    def file_bytes(self) -> int:
        """What the store takes on disk: the database file and its WAL."""
        return sum(os.path.getsize(f) for f in (self._path, self._path + "-wal")
                   if os.path.exists(f))

    def table_bytes(self, names: Iterable[str]) -> int | None:
        """The bytes the pages of these tables take in the file (their cells and tombstones;
        SQLite's ``dbstat``); None where SQLite was built without it."""
        physical = [f"{kind}:{name}" for name in names for kind in ("cells", "tombs")]
        if not physical:
            return 0
        marks = ", ".join("?" * len(physical))
        try:
            found = self._conn().execute(
                f"SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name IN ({marks})",
                physical).fetchone()
        except sqlite3.OperationalError:
            return None
        return int(found[0])

    def compact(self) -> int:
        """Rewrite the file with full pages, in key order (``VACUUM``), and cut the WAL back
        (ADR 0030); returns the bytes it freed. Rows inserted before their neighbours (a
        mailbox's newest message first) leave B-tree pages about half full: an import into
        a fresh store left ~45% of the ``messages`` pages unused. One transaction: other
        writers wait for it (``busy_timeout``), readers keep their snapshot."""
        before = self.file_bytes()
        conn = self._conn()
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return before - self.file_bytes()

    def close(self) -> None:
        """Close every connection this store opened (in any thread); idempotent."""
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()

    def __enter__(self) -> SqliteTableStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
