"""The raw SQLite baseline of the projection benchmarks: the cells a table store was given,
written again with plain ``executemany`` upserts; and ``WriteRecorder``, which wraps a store's
``apply`` / ``load`` to keep and count what it writes.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from itertools import count
from operator import itemgetter
from pathlib import Path
from typing import Any

from devtools.bench.common import SYNCHRONOUS, PhaseClock, rate


class WriteRecorder:
    """Wraps a store's ``apply`` and ``load``: keeps (a copy of) each applied batch, counts
    what was written and the time spent writing."""

    def __init__(self, store: Any, keep: bool) -> None:
        self.batches: list[list[Any]] = []
        self.seconds = 0.0
        self.puts = 0
        self.deletes = 0
        self._apply = store.apply
        self._load = getattr(store, "load", None)
        self._keep = keep
        store.apply = self.apply
        if self._load is not None:
            store.load = self.load

    def apply(self, mutations: Iterable[Any]) -> None:
        from projections.tablestore import Put

        batch = list(mutations)
        puts = sum(1 for m in batch if type(m) is Put)
        self.puts += puts
        self.deletes += len(batch) - puts
        if self._keep:
            self.batches.append(batch)
        t0 = time.perf_counter()
        self._apply(batch)
        self.seconds += time.perf_counter() - t0

    def load(self, loads: Any, mutations: Iterable[Any] = ()) -> None:
        from projections.tablestore import Put

        batch = list(mutations)
        puts = sum(1 for m in batch if type(m) is Put)
        self.puts += puts
        self.deletes += len(batch) - puts + sum(len(load.tombs) for load in loads)
        # a load's cells may be an iterator, read once: counted as the store takes them, in C
        counters = [count() for _ in loads]
        loads = [replace(load, cells=map(_first, zip(load.cells, counter, strict=False)))
                 for load, counter in zip(loads, counters, strict=True)]
        t0 = time.perf_counter()
        assert self._load is not None
        self._load(loads, batch)
        self.seconds += time.perf_counter() - t0
        self.puts += sum(next(counter) for counter in counters)


_first = itemgetter(0)


def _raw_connection(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"PRAGMA synchronous={SYNCHRONOUS}")
    con.execute("PRAGMA cache_size=-32768")  # as SqliteTableStore
    return con


def raw_cell_writes(batches: list[list[Any]], path: Path, *,
                    binding: str = "bytes") -> dict[str, Any]:
    """Writes the same cells (and deletes) with plain SQL: one transaction per batch, one
    ``executemany`` per table and kind, into ``(row, col, value, version) WITHOUT ROWID``
    tables. Returns cells/s; the tuples are built before the clock starts.

    ``binding="bytearray"`` passes the blobs as ``bytearray``: Python 3.11's ``sqlite3``
    sends every ``bytes`` parameter through its adapter lookup (``_need_adapt`` exempts
    int, float, str and bytearray, not bytes), which builds a key tuple and formats an
    ``AttributeError`` for the failed ``__adapt__`` lookup -- ~40 % of a raw insert's CPU."""
    from projections.tablestore import DeleteColumn, DeleteRow, Put

    blob: Callable[[bytes], Any] = bytearray if binding == "bytearray" else bytes
    if binding not in ("bytes", "bytearray"):
        raise ValueError(f"binding: {binding!r} is not 'bytes' or 'bytearray'")

    prepared: list[list[tuple[str, list[Any], list[Any], list[Any]]]] = []
    tables: set[str] = set()
    cells = 0
    for batch in batches:
        by_table: dict[str, tuple[list[Any], list[Any], list[Any]]] = {}
        for m in batch:
            slot = by_table.get(m.table)
            if slot is None:
                slot = by_table[m.table] = ([], [], [])
            if type(m) is Put:
                slot[0].append((blob(m.row), blob(m.column), blob(m.value), m.version))
                cells += 1
            elif type(m) is DeleteColumn:
                slot[1].append((blob(m.row), blob(m.column), m.version))
            elif type(m) is DeleteRow:
                slot[2].append((blob(m.row), m.version))
        tables.update(by_table)
        prepared.append([(t, *lists) for t, lists in by_table.items()])
    con = _raw_connection(path)
    sql: dict[str, tuple[str, str, str]] = {}
    for t in sorted(tables):
        q = '"' + ("raw:" + t).replace('"', '""') + '"'
        con.execute(f"CREATE TABLE {q} (row BLOB NOT NULL, col BLOB NOT NULL, value BLOB NOT NULL,"
                    " version INTEGER NOT NULL, PRIMARY KEY (row, col)) WITHOUT ROWID")
        sql[t] = (f"INSERT OR REPLACE INTO {q} (row, col, value, version) VALUES (?, ?, ?, ?)",
                  f"DELETE FROM {q} WHERE row = ? AND col = ? AND version <= ?",
                  f"DELETE FROM {q} WHERE row = ? AND version <= ?")
    clock = PhaseClock()
    for batch_tables in prepared:
        con.execute("BEGIN IMMEDIATE")
        for table, puts, col_deletes, row_deletes in batch_tables:
            ins, del_col, del_row = sql[table]
            if puts:
                con.executemany(ins, puts)
            if col_deletes:
                con.executemany(del_col, col_deletes)
            if row_deletes:
                con.executemany(del_row, row_deletes)
        con.execute("COMMIT")
    seconds = clock.stop()
    con.close()
    return {"cells": cells, "transactions": len(prepared), "seconds": round(seconds, 3),
            "cells_per_s": rate(cells, seconds), "cpu_share": clock.share}
