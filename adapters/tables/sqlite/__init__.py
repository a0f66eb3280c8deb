"""``SqliteTableStore``: the table store port on one embedded SQLite file, in parts:
``schema`` (the catalog, a table's names and SQL), ``writes``, ``reads``, ``store`` (the class
that puts them together).

May import: ``projections`` (the port), the standard library's ``sqlite3`` and
``adapters.files.filemodes``; never ``streaming``, ``cli`` or ``devtools``.

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

from adapters.tables.sqlite.store import PAGE_SIZE, WAL_AUTOCHECKPOINT, SqliteTableStore

__all__ = ["PAGE_SIZE", "WAL_AUTOCHECKPOINT", "SqliteTableStore"]
