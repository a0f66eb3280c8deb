"""The log on SQLite: eventsourcing's SQLite factory with an explicit ``synchronous`` pragma
(ADR 0004: ``full`` by default, every commit fsynced) and a new events file's page size."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from typing import Any

from eventsourcing.sqlite import SQLiteConnection, SQLiteConnectionPool, SQLiteFactory

from adapters.files.filemodes import private_file, read_only_sqlite, write_ahead

SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL", "off": "OFF"}


class _DurableSQLitePool(SQLiteConnectionPool):
    synchronous = "FULL"

    def _create_connection(self) -> SQLiteConnection:
        conn = super()._create_connection()
        raw = conn._sqlite_conn
        raw.execute(f"PRAGMA synchronous={self.synchronous}")
        return conn


EVENTS_PAGE_SIZE = 16384
"""Page size of a new events file. An event with its compressed personal part is ~2 KB, so on
4 KiB pages a quarter of the file was the unused tails of pages and overflow pages; on
16 KiB pages the 5,000-message import's log takes 10.9 MB instead of 13.6 MB (ADR 0014). An
existing file keeps the page size it was made with."""


def _new_file_page_size(path: str, page_size: int) -> None:
    """Give a new (absent or empty) SQLite file ``page_size``: only possible before its first
    table, and before WAL mode is on."""
    if not path or path.startswith(":memory:") or "mode=memory" in path:
        return
    with contextlib.suppress(FileNotFoundError):
        if os.path.getsize(path) > 0:
            return
    if not path.startswith("file:"):
        private_file(path)  # 0600 before SQLite makes it (its -wal and -shm take its mode)
    con = sqlite3.connect(path)
    try:
        con.execute(f"PRAGMA page_size={page_size}")
        write_ahead(con)  # writes the header with that page size
    finally:
        con.close()


class DurableSQLiteFactory(SQLiteFactory):
    """SQLiteFactory with an explicit ``synchronous`` pragma (env ``SQLITE_SYNCHRONOUS``);
    a new events file gets ``EVENTS_PAGE_SIZE`` pages."""

    def __init__(self, env: Any) -> None:
        _new_file_page_size(env.get("SQLITE_DBNAME") or "", EVENTS_PAGE_SIZE)
        super().__init__(env)
        mode = SYNCHRONOUS.get((self.env.get("SQLITE_SYNCHRONOUS") or "full").lower(), "FULL")
        old = self.datastore.pool
        pool = _DurableSQLitePool(db_name=read_only_sqlite(old.db_name) or old.db_name,
                                  lock_timeout=old.lock_timeout)  # read-only: a snapshot
        pool.synchronous = mode
        old.close()
        self.datastore.pool = pool
