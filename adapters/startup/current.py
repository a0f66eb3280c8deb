"""The fast read path: the read models as they are, when they are current with the log.

A read command (``list``, ``search``, ...) would otherwise open the whole store: the event
log (the eventsourcing library), the command side with its event classes and the
projection host, which catches the read models up with the log before anything is read.
When the tables already reflect every event of the log (the usual case: every command
catches them up before it returns) none of that is needed. ``open_current`` compares the
log's head (``SELECT MAX(rowid)`` on ``events.sqlite``) with the lowest position the
projections have tracked in ``tables.sqlite``; if no projection is behind, it returns the
tables to read as they are (``CurrentTables``). Otherwise, and for any store but the
embedded SQLite one, it returns None: the caller opens the store, which catches up.
ADR 0024 records the decision.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from adapters.files import datadir
from adapters.files.datadir import check_data_dir
from adapters.readside.catalog import Catalog
from adapters.readside.queries import ReadModelQueries
from adapters.startup.envsettings import read_settings
from adapters.tables.sqlite import SqliteTableStore
from projections import names as n
from projections.keys import tracked, tracking_row
from projections.tablestore import TableNotFound, TableStore

EVENTS_TABLE = "stored_events"  # the eventsourcing library's SQLite table


class CurrentTables(ReadModelQueries):
    """The read models of an embedded store, read as they are (no log, no catch-up)."""

    def __init__(self, tables: TableStore, catalog: Catalog, position: int) -> None:
        self.tables = tables
        self.catalog = catalog
        self._position = position

    def _read(self) -> CurrentTables:
        return self

    def physical(self, logical: str) -> str:
        return self.catalog.physical(logical)

    def position(self) -> int:
        """The log position the tables reflect (the log's head when they were opened)."""
        return self._position

    def close(self) -> None:
        self.tables.close()


def open_current(data: Path) -> CurrentTables | None:
    """The read models in ``data`` if they are current with its log, else None (open the
    store instead). A directory holding no store raises what opening the store raises."""
    settings = read_settings()
    if settings is None or not settings.embedded:
        return None
    check_data_dir(data, sqlite_log=True, create=False)
    if not (data / datadir.READ_MODELS).is_file():
        return None
    try:
        head = log_head(data / datadir.LOG)
        tables = SqliteTableStore(data / datadir.READ_MODELS)
    except sqlite3.Error:
        return None
    try:
        catalog = Catalog(tables)
        catalog.refresh()
        position = tracked_position(tables, catalog.physical)
    except (TableNotFound, sqlite3.Error):
        position = -1
    if position < head:
        tables.close()
        return None
    return CurrentTables(tables, catalog, position)


def log_head(events: Path) -> int:
    """The position of the last event in the SQLite log (0: none)."""
    con = sqlite3.connect(f"file:{events}?mode=ro", uri=True)
    try:
        found = con.execute(f"SELECT MAX(rowid) FROM {EVENTS_TABLE}").fetchone()  # noqa: S608
    finally:
        con.close()
    return int(found[0] or 0)


def tracked_position(tables: TableStore, physical: object) -> int:
    """The lowest position any projection has tracked (0 for one that tracked none)."""
    table = physical(n.TRACKING)  # type: ignore[operator]
    return min(tracked(tables.get(table, tracking_row(name), [n.TR_POSITION]))
               for name in n.PROJECTIONS)
