"""``verify``: the live read models against a fold of the log up to the same position, in a
scratch store (SQLite beyond 200,000 events, else in memory), table by table: rows, cells
and a digest each, and the first differences where they differ."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.tables.memory import InMemoryTableStore
from adapters.tables.sqlite import SqliteTableStore
from projections.registry import Projection
from projections.runner import ProjectionRunner
from projections.tablestore import TableStore, diff_tables, table_digest

Events = Callable[..., Iterator[tuple[int, Any]]]
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class TableReport:
    table: str
    live_rows: int
    live_cells: int
    live_digest: str
    rebuilt_rows: int
    rebuilt_cells: int
    rebuilt_digest: str
    differences: list[str]

    @property
    def identical(self) -> bool:
        return self.live_digest == self.rebuilt_digest

    def as_dict(self) -> dict[str, Any]:
        return {"table": self.table, "identical": self.identical,
                "rows": self.live_rows, "cells": self.live_cells, "digest": self.live_digest,
                "rebuilt_rows": self.rebuilt_rows, "rebuilt_digest": self.rebuilt_digest,
                "differences": self.differences}


def progress_of(total: int, progress: Progress | None) -> Callable[[int], None] | None:
    """``ProjectionRunner``'s progress (events taken) as a host's (done, total)."""
    if progress is None:
        return None
    return lambda done: progress(done, total)


def verify_tables(live: TableStore, physical: Callable[[str], str], events: Events,
                  projections: tuple[Projection, ...], position: int,
                  progress: Progress | None = None, max_diffs: int = 10) -> list[TableReport]:
    """Folds the log up to ``position`` into a scratch store and compares every table."""
    with tempfile.TemporaryDirectory(prefix="letterlog-verify-") as tmp:
        scratch: TableStore = (SqliteTableStore(Path(tmp) / "scratch.sqlite", synchronous="OFF")
                               if position > 200_000 else InMemoryTableStore())
        runner = ProjectionRunner(scratch, projections)
        runner.create_tables()
        runner.apply_events(events(start=1, stop=position), fold=True,
                            progress=progress_of(position, progress))
        reports = []
        for p in projections:
            for spec in p.tables:
                a = table_digest(live, physical(spec.name))
                b = table_digest(scratch, spec.name)
                diffs = [] if a.sha256 == b.sha256 else diff_tables(
                    live, physical(spec.name), scratch, spec.name, max_diffs=max_diffs)
                reports.append(TableReport(spec.name, a.rows, a.cells, a.sha256,
                                           b.rows, b.cells, b.sha256, diffs))
        scratch.close()
        return reports
