"""A rebuild's fold over several cores, without Spark (ADR 0113).

``RangeFold`` is a ``Fold`` for ``ProjectionHost.rebuild`` on the embedded SQLite tables: the
positions ``1..stop`` are cut into one range per worker; this process folds the first range
straight into the fresh tables, and one child process per other range folds its range into a
*run* (a SQLite tables file of its own in a scratch directory of the data directory), as the
Spark job's range tasks do (ADR 0061). Then this process merges the runs inside SQLite
(``SqliteTableStore.merge_runs``: the higher version and the higher tombstone win) and
writes ``counters`` from the ranges' mergeable parts (``CounterPartialFold``, merged in log
order), the one projection that reads its own rows. The outcome is the single process's
fold, cell for cell (tests hold the two equal).

Every process reads its range of the log itself (``reader``: a picklable callable that opens
the log in the child and returns ``(events(start, stop), close)``); only the counters' parts
come back. The run files hold plain text (subjects, senders): the scratch
directory goes when the fold ends, failed or not, and one a killed process left is deleted by
``remove_stale_runs`` (the next rebuild, every purge run and erasure).

A child that fails (a corrupt event: ``CorruptEvent`` naming its position) or dies fails the
fold: nothing is merged or switched, the live tables stay as they were.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import queue
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from adapters.files.rundirs import RUN_DIRS, remove_stale_runs, run_directory
from adapters.readside.host import Fold
from adapters.readside.verification import Progress
from adapters.tables.sqlite import SqliteTableStore
from domain.errors import StoreBusy
from projections import names as n
from projections.counters import (
    CounterPartialFold,
    CounterRow,
    counter_mutations,
    merge_counter_parts,
)
from projections.keys import tracking_position
from projections.registry import Projection, select
from projections.runner import ProjectionRunner, error_text, teed
from projections.tablestore import TableStore

Reader = Callable[[], tuple[Callable[[int, int], Iterable[tuple[int, Any]]], Callable[[], None]]]
"""Opens the log (in whichever process calls it): ``(events(start, stop), close)``."""

PARALLEL_FROM = 100_000
"""Logs shorter than this are folded in one process: a child's start-up (~0.5 s) and the
merge would cost more than the second core gives back."""
MAX_WORKERS = 4
"""At most this many processes by default: each further run is merged into tables that
already hold the others' cells (an upsert, not SQLite's copy), which grows with them."""
RUNS_PREFIX = RUN_DIRS[2]


class FoldProcessLost(StoreBusy):
    """A process folding a range of the log ended without its result (killed, out of
    memory): nothing was switched. Temporary: the same rebuild may succeed."""

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


def default_workers() -> int:
    """The cores this process may run on, at most ``MAX_WORKERS``."""
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


def cut(stop: int, parts: int) -> list[tuple[int, int]]:
    """``1..stop`` in ``parts`` consecutive ranges of (nearly) equal size."""
    parts = max(1, min(parts, stop))
    return [(i * stop // parts + 1, (i + 1) * stop // parts) for i in range(parts)]


class RangeFold:
    """A ``Fold`` over ``workers`` processes (see the module docstring); folds in this
    process alone (``single``) below ``PARALLEL_FROM`` events or with one worker."""

    def __init__(self, reader: Reader, data: Path, workers: int = 0,
                 single: Fold | None = None, parallel_from: int | None = None) -> None:
        self.reader = reader
        self.data = Path(data)
        self.workers = workers or default_workers()
        self.single = single
        self.parallel_from = PARALLEL_FROM if parallel_from is None else parallel_from
        self.stats: dict[str, Any] = {}

    def __call__(self, store: TableStore, projections: tuple[Projection, ...],
                 physical: Callable[[str], str], stop: int,
                 progress: Progress | None = None) -> ProjectionRunner:
        if (self.workers < 2 or stop < max(self.parallel_from, self.workers)
                or not isinstance(store, SqliteTableStore)):
            assert self.single is not None, "RangeFold: no single-process fold to fall back on"
            self.stats = {"workers": 1}
            return self.single(store, projections, physical, stop, progress)
        return self._fold(store, projections, physical, stop, progress)

    def _fold(self, store: SqliteTableStore, projections: tuple[Projection, ...],
              physical: Callable[[str], str], stop: int,
              progress: Progress | None) -> ProjectionRunner:
        names = [p.name for p in projections]
        others = [name for name in names if name != n.COUNTERS]
        counters = len(others) < len(names)
        spans = cut(stop, self.workers)
        ctx = multiprocessing.get_context("spawn")  # never a fork of this process's threads
        done = ctx.Array("q", len(spans), lock=False)
        t0 = time.perf_counter()
        remove_stale_runs(self.data)
        with run_directory(self.data, RUNS_PREFIX) as spool:
            runs = [str(Path(spool) / f"run-{i}.sqlite") for i in range(1, len(spans))]
            results = ctx.Queue()
            children = [ctx.Process(target=_child, name=f"letterlog-rebuild-{i + 1}",
                                    args=(self.reader, others, counters, span, run, done,
                                          i + 1, results), daemon=True)
                        for i, (span, run) in enumerate(zip(spans[1:], runs, strict=True))]
            for child in children:
                child.start()
            try:
                def report(taken: int) -> None:
                    done[0] = taken
                    if progress is not None:
                        progress(sum(done), stop)

                ProjectionRunner(store, projections, physical=physical).create_tables()
                runner = ProjectionRunner(store, select(others), physical=physical,
                                          track=False)
                first = CounterPartialFold() if counters else None
                reader_events, close = self.reader()
                try:
                    runner.apply_events(teed(reader_events(*spans[0]), first), fold=True,
                                        progress=report)
                finally:
                    close()
                t1 = time.perf_counter()
                parts = _gather(children, results, done, stop, progress)
            finally:
                for child in children:
                    if child.is_alive():
                        child.kill()
                    child.join()
            t2 = time.perf_counter()
            tables = {t.name: physical(t.name) for p in projections for t in p.tables
                      if p.name != n.COUNTERS}
            store.merge_runs(runs, tables)
        if counters:
            assert first is not None
            _write_counters(store, physical(n.COUNTERS), [first.parts, *parts])
        store.apply([tracking_position(physical(n.TRACKING), name, stop) for name in names])
        self.stats = {"workers": len(spans), "ranges": spans,
                      "fold_s": round(t1 - t0, 3), "children_s": round(t2 - t0, 3),
                      "merge_s": round(time.perf_counter() - t2, 3)}
        return ProjectionRunner(store, projections, physical=physical)


def _child(reader: Reader, names: list[str], counters: bool, span: tuple[int, int],
           run: str, done: Any, slot: int, results: Any) -> None:
    """A child process: its range folded into the run file ``run``; puts ``(slot, parts)``
    or ``(slot, error)`` on ``results``."""
    try:
        partial = CounterPartialFold() if counters else None
        events, close = reader()
        store = SqliteTableStore(run, synchronous="OFF")  # a failed fold's run is never merged
        try:
            runner = ProjectionRunner(store, select(names), track=False)
            runner.create_tables()

            def report(taken: int) -> None:
                done[slot] = taken

            runner.apply_events(teed(events(*span), partial), fold=True, progress=report)
        finally:
            store.close()
            close()
        results.put((slot, partial.parts if partial is not None else {}))
    except BaseException as error:  # handed to the parent, which raises it
        try:
            pickle.dumps(error)
        except Exception:
            error = RuntimeError(error_text(error))
        results.put((slot, error))


def _gather(children: list[Any], results: Any, done: Any, stop: int,
            progress: Progress | None) -> list[dict[bytes, Any]]:
    """Every child's counters parts, in range order; raises what a child failed with, or
    names one that died without a word."""
    parts: dict[int, dict[bytes, Any]] = {}
    while len(parts) < len(children):
        try:
            slot, found = results.get(timeout=0.5)
        except queue.Empty:  # are they all still alive?
            if progress is not None:
                progress(sum(done), stop)
            gone = [(i, c) for i, c in enumerate(children, 1)
                    if i not in parts and not c.is_alive()]
            if gone and results.empty():
                raise FoldProcessLost(
                    f"rebuild: the process folding range {gone[0][0] + 1} of the log ended "
                    f"(exit code {gone[0][1].exitcode}) without its result; nothing was "
                    "switched, the tables in use are unchanged",
                    hint="run the rebuild again; --workers 1 folds in one process") from None
            continue
        if isinstance(found, BaseException):
            raise found
        parts[slot] = found
    return [parts[slot] for slot in sorted(parts)]


def _write_counters(store: TableStore, table: str, ranges: list[dict[bytes, Any]]) -> None:
    """Each account's counters row: its ranges' parts merged in log order."""
    rows: dict[bytes, CounterRow] = {}
    for parts in ranges:
        for account, part in parts.items():
            row = rows.get(account)
            if row is None:
                row = rows[account] = CounterRow()
            merge_counter_parts(row, part)
    batch: list[Any] = []
    for account in sorted(rows):
        batch += counter_mutations(table, account, rows[account])
        if len(batch) >= 50_000:
            store.apply(batch)
            batch = []
    if batch:
        store.apply(batch)
