"""``SqliteTableStore``: the table store port on one embedded SQLite file (the layout and
its invariants: the package docstring): connections, the catalog of tables, writes
(``writes``), reads (``reads``), and the file's upkeep."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from adapters.files.filemodes import private_file, read_only_sqlite, write_ahead
from adapters.tables.sqlite.reads import ScanQuery, column_clause, row_width, scan
from adapters.tables.sqlite.schema import CATALOG, Schema, create_table, drop_table
from adapters.tables.sqlite.writes import (
    Batch,
    batched,
    drop_covered,
    insert_fresh,
    merge_table,
    write,
)
from projections.capabilities import (
    BulkLoading,
    Checkpointing,
    Compacting,
    DataVersioned,
    TableSized,
)
from projections.tablestore import (
    Cells,
    Mutation,
    Row,
    StoreClosed,
    TableLoad,
    TableNotFound,
    TableSpec,
    TableStore,
    key_range,
    validate_table_name,
)

_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
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


class SqliteTableStore:
    """Every logical table in one SQLite file; see the module docstring for the layout."""

    def __init__(
        self, path: str | Path, *, synchronous: str = "NORMAL", busy_timeout: float = 30.0,
        page_size: int = PAGE_SIZE,
    ) -> None:
        if synchronous.upper() not in _SYNCHRONOUS:
            raise ValueError(f"synchronous: {synchronous!r} is not one of {_SYNCHRONOUS}")
        self._path = str(path)
        self._read_only = read_only_sqlite(self._path)  # a snapshot, a backup mount
        if (self._path != ":memory:" and not self._path.startswith("file:")
                and self._read_only is None):
            private_file(self._path)  # 0600 before SQLite makes it (and its -wal, -shm)
        self._synchronous = synchronous.upper()
        self._busy_timeout = busy_timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._schemas: dict[str, Schema] = {}
        self._closed = False
        conn = self._conn()
        if self._read_only is not None:
            return  # read only: its catalog is there (it holds read models)
        conn.execute(f"PRAGMA page_size={page_size}")  # only a new, empty file takes it
        write_ahead(conn)
        with self._transaction(conn):
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {CATALOG} (name TEXT PRIMARY KEY, "
                "families TEXT NOT NULL, split_by_salt INTEGER NOT NULL)"
            )

    # -- connections -------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreClosed(f"table store {self._path} is closed")
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self._read_only or self._path,
                uri=self._read_only is not None,
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

    def _schema(self, name: str) -> Schema:
        schema = self._schemas.get(name)
        if schema is None:
            found = (
                self._conn()
                .execute(f"SELECT families FROM {CATALOG} WHERE name = ?", (name,))
                .fetchone()
            )
            if found is None:
                raise TableNotFound(f"table {name!r} does not exist")
            schema = self._schemas[name] = Schema.of(name, json.loads(found[0]))
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
            create_table(conn, spec)
        self._schemas.pop(spec.name, None)

    def drop_table(self, name: str) -> None:
        valid = validate_table_name(name)
        with self._transaction(self._conn()) as conn:
            drop_table(conn, valid)
        self._schemas.pop(name, None)

    def table_exists(self, name: str) -> bool:
        sql = f"SELECT 1 FROM {CATALOG} WHERE name = ?"
        return self._conn().execute(sql, (name,)).fetchone() is not None

    def list_tables(self) -> list[str]:
        rows = self._conn().execute(f"SELECT name FROM {CATALOG} ORDER BY name").fetchall()
        return [name for (name,) in rows]

    # -- writes ------------------------------------------------------------------------------

    def apply(self, mutations: Iterable[Mutation]) -> None:
        batches = batched(self._schema, mutations)
        if not batches:
            return
        conn = self._conn()
        with self._transaction(conn):
            write(conn, batches, self._missing)

    def load(self, loads: Sequence[TableLoad], mutations: Iterable[Mutation] = ()) -> None:
        """``apply`` of every load's tombstones and cells, then of ``mutations``, in one
        transaction. Into an empty table (a rebuild's fresh one) they are plain inserts in
        the order given (key order: page by page), the cells a tombstone of the same load
        hides left out, blobs bound as ``bytearray``: Python's ``sqlite3`` sends ``bytes``
        through its adapter lookup, most of a bound blob's cost. A table that holds
        anything takes the general path of ``apply``."""
        checked = [(self._schema(load.table), load) for load in loads]
        batches = batched(self._schema, mutations)
        conn = self._conn()
        with self._transaction(conn):
            for schema, load in checked:
                try:
                    empty = all(conn.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() is None
                                for t in (schema.cells, schema.tombs))
                    if empty:
                        insert_fresh(conn, schema, load)
                    else:
                        Batch.of(schema, load).write(conn)
                except sqlite3.OperationalError as error:
                    raise self._missing(schema.name, error) from error
            write(conn, batches, self._missing)

    def merge_runs(self, runs: Sequence[str | Path], tables: dict[str, str], *,
                   last: bool = True) -> None:
        """Merges *runs* (other tables files, each holding logical tables already folded, as
        a Spark rebuild's tasks write them) into this store's tables ``tables[logical]``,
        inside SQLite (``ATTACH`` + ``INSERT ... SELECT`` in key order), one transaction per
        run (the target tables are a rebuild's fresh ones, read by no one before a switch).
        The outcome is ``apply`` of every run's puts and deletes: the higher tombstone and
        the higher version win, and a put that another run's tombstone covers is removed.
        ``last=False``: more runs follow, and the removal of covered puts (a pass over every
        tombstone) waits for the call with ``last`` (it gives the same tables once at the
        end: a tombstone only rises, and a put it covers stays covered). Durability is the
        store's own (WAL, its ``synchronous``): the file holds the live tables too."""
        conn = self._conn()
        schemas = {logical: self._schema(physical) for logical, physical in tables.items()}
        for run in runs:  # one transaction per run: the tables are not live before a switch
            conn.execute("ATTACH DATABASE ? AS run", (str(run),))
            try:
                with self._transaction(conn):
                    present = {name for (name,) in conn.execute(
                        f"SELECT name FROM run.{CATALOG}")}
                    for logical, schema in schemas.items():
                        if logical in present:
                            merge_table(conn, Schema.of(logical, ()), schema)
            finally:
                conn.execute("DETACH DATABASE run")
        if not last:
            return
        with self._transaction(conn):
            for schema in schemas.values():
                drop_covered(conn, schema)

    # -- reads -------------------------------------------------------------------------------

    def get(self, table: str, row: bytes, columns: Sequence[bytes] | None = None) -> Row:
        return {c: v for c, (v, _) in self.get_cells(table, row, columns).items()}

    def get_cells(self, table: str, row: bytes, columns: Sequence[bytes] | None = None) -> Cells:
        schema = self._schema(table)
        clause, params = column_clause(schema, columns)
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
        clause, params = column_clause(schema, columns)
        bounds = key_range(prefix=prefix, start=start, stop=stop, reverse=reverse)
        query = ScanQuery(schema, clause, params, reverse, row_width(columns), versions)
        return scan(self._select, query, bounds, limit)

    def _select(self, schema: Schema, sql: str, args: list[Any]) -> list[Any]:
        try:
            return self._conn().execute(sql, args).fetchall()
        except sqlite3.OperationalError as error:
            raise self._missing(schema.name, error) from error

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

    def slack(self) -> float | None:
        """The share of the file that holds nothing and ``compact`` could take back: free
        pages, and the unused bytes of tables of more than one page (a table's one page
        stays, however empty); SQLite's ``dbstat``, which reads every page. None where
        SQLite was built without ``dbstat``."""
        conn = self._conn()
        try:
            used, unused = conn.execute(
                "SELECT coalesce(sum(size), 0), coalesce(sum(CASE WHEN pages > 1 THEN empty "
                "ELSE 0 END), 0) FROM (SELECT sum(pgsize) AS size, sum(unused) AS empty, "
                "count(*) AS pages FROM dbstat GROUP BY name)"
            ).fetchone()
        except sqlite3.OperationalError:
            return None
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        total = int(used) + int(free) * int(size)
        return (int(unused) + int(free) * int(size)) / total if total else 0.0

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


def _capabilities(store: SqliteTableStore) -> tuple[TableStore, BulkLoading, Checkpointing,
                                                    Compacting, DataVersioned, TableSized]:
    """mypy checks here that the store keeps the port and the capabilities callers find on it
    (``projections.capabilities``): a signature that drifts fails the lint."""
    return store, store, store, store, store, store
