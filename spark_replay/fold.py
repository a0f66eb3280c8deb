"""Transform + load, in the executors: one partition's events folded by the projection runner.

Each task gets one partition of the log -- ``by_account`` (``fold_accounts``): every event
of its accounts in position order, from the shuffle; ``by_position`` (``fold_ranges``): a
position range, which the task reads from the log itself; (``fold_cells``, under
``mapInArrow``, for DataFrames: ``spark_replay.frames``) -- decodes the stored msgpack, and
runs
``projections.runner.ProjectionRunner`` in fold mode over it -- the same runner and pure
projectors as the embedded rebuild and the stream workers. Its folded tables go:

* ``sqlite``: into a *run*, a fresh SQLite tables file of the task's own
  (``<spool>/run-<fold>-<partition>-<attempt>.sqlite``, bulk loaded in key order by the runner's
  fold path); the driver merges the runs of the successful attempts into the fresh tables
  (``SqliteTableStore.merge_runs``). A failed attempt's run is never merged.
* ``hbase``: straight into the fresh HBase tables through the project's HBase table store
  (happybase batches, every cell at its version): a retried task writes the same cells
  again, which changes nothing (the counters projection reads its row back and skips what
  it applied already, as under at-least-once delivery).

No task reads or writes the tracking table: a task's position says nothing about another
task's accounts (a task that read a finished task's position would skip its own events up
to there). The driver records the rebuild's position after the last task.

A task yields one summary (``SUMMARY_NAMES``); nothing else comes back to the driver.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from pyspark import TaskContext

from adapters.bootstrap.spark import (
    page_hook,
    row_decoder,
    row_pages,
    run_tables,
    uuid_from_int,
)
from projections import names as n
from projections.counters import (
    CounterPartialFold,
    CounterRow,
    counter_mutations,
    merge_counter_parts,
)
from projections.registry import select
from projections.runner import ProjectionRunner, teed
from spark_replay.settings import open_event_log, open_tables

BY_ACCOUNT = "by_account"
BY_POSITION = "by_position"
COUNTERS_MERGE = "counters_merge"
SUMMARY_KEY = (b"", 0)
"""The shuffle key a range task's summary travels under to the ``merge_counters`` tasks,
which hand it on (no account id is empty)."""
PAGE = 2000
CELLS = "table string, row binary, column binary, value binary, version long"


class InjectedFault(RuntimeError):
    """Raised by the first attempt of the task chosen by ``fail_partition`` (tests)."""


def _events(batches: Iterable[Any], decode: Callable[..., tuple[int, Any]],
            seen: list[int]) -> Iterator[tuple[int, Any]]:
    for batch in batches:
        positions = batch.column(0).to_pylist()
        aggregates = batch.column(1).to_pylist()
        versions = batch.column(2).to_pylist()
        topics = batch.column(3).to_pylist()
        states = batch.column(4).to_pylist()
        hook = page_hook(states)  # the batch's keys in one query (ADR 0117)
        for i, position in enumerate(positions):
            seen[0] += 1
            if seen[1] == 0:
                seen[1] = position
            seen[2] = position
            aggregate = uuid_from_int(int.from_bytes(aggregates[i], "big"))
            yield decode((position, aggregate, versions[i], topics[i], states[i]), hook)


def fold_cells(wire: dict[str, Any], names: list[str]) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """The function ``mapInArrow`` runs on each partition of ``source.SCHEMA`` batches (every
    event of its accounts, in position order): the fold's visible cells as ``CELLS``
    batches (``spark_replay.frames``; nothing written)."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        def events(log: Any, seen: list[int]) -> Iterator[tuple[int, Any]]:
            return _events(batches, row_decoder(log), seen)

        yield from _fold_task(wire, names, {}, "cells", None, None, BY_ACCOUNT, events)

    return run


def fold_ranges(wire: dict[str, Any], names: list[str], physical: dict[str, str],
                target: str, spool: str | None, fail_partition: int | None = None,
                counters: bool = False) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """The function ``RDD.mapPartitions`` runs on each ``(start, stop)`` position range:
    the task reads its range from the log itself (``row_pages``, as the single process
    does: no Arrow, no JVM in between), folds it (``BY_POSITION``) and yields its summary
    as a tuple in ``SUMMARY_NAMES``' order. With ``counters``, the same pass also folds
    the range's counters as mergeable parts (``projections.counters.CounterPartialFold``,
    ADR 0061) and yields them as ``((account, start), part)`` for ``merge_counters``, and
    its summary as ``(SUMMARY_KEY, summary)``."""

    def run(ranges: Iterable[tuple[int, int]]) -> Iterator[Any]:
        for start, stop in ranges:
            partial = _counter_parts() if counters else None

            def events(log: Any, seen: list[int], start: int = start, stop: int = stop,
                       partial: Any = partial) -> Iterator[tuple[int, Any]]:
                found = _range_events(log, start, stop, seen)
                return teed(found, partial)

            for out in _fold_task(wire, names, physical, target, spool, fail_partition,
                                  BY_POSITION, events):
                summary = tuple(out[name] for name in SUMMARY_NAMES)
                if partial is None:
                    yield summary
                    continue
                for account, part in partial.parts.items():
                    yield (account, start), part
                yield SUMMARY_KEY, summary

    return run


def _counter_parts() -> Any:
    return CounterPartialFold()


def merge_counters(wire: dict[str, Any], physical: dict[str, str], target: str,
                   spool: str | None, first: int
                   ) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """The function ``RDD.mapPartitions`` runs after the shuffle of ``fold_ranges``' counters
    parts by account (sorted by account, then range): merges each account's parts in log
    order into its row (``merge_counter_parts``), writes the rows to the target as
    ``_fold_task`` does, hands the range tasks' summaries on, and yields its own
    (``COUNTERS_MERGE``, partition ``first`` + its index)."""

    def run(pairs: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, ...]]:
        context = TaskContext.get()
        assert context is not None
        part, attempt = first + context.partitionId(), context.attemptNumber()
        t0 = time.perf_counter()
        store, run_path, mapping = _target_store(wire, physical, target, spool,
                                                 COUNTERS_MERGE, part, attempt)
        merged = 0
        try:
            runner = ProjectionRunner(store, select(["counters"]),
                                      physical=_named(mapping), track=False)
            runner.create_tables()
            table = _named(mapping)(n.COUNTERS)
            batch: list[Any] = []
            account, row = None, CounterRow()
            for (key, _), value in pairs:
                if key == SUMMARY_KEY[0]:
                    yield value
                    continue
                if key != account:
                    if account is not None:
                        batch += counter_mutations(table, account, row)
                    account, row = key, CounterRow()
                    if len(batch) >= 50_000:
                        store.apply(batch)
                        batch = []
                merge_counter_parts(row, value)
                merged += 1
            if account is not None:
                batch += counter_mutations(table, account, row)
            if batch:
                store.apply(batch)
        finally:
            store.close()
        _finished(run_path)
        yield (COUNTERS_MERGE, part, attempt, merged, 0, 0, run_path,
               time.perf_counter() - t0)

    return run


def fold_accounts(wire: dict[str, Any], names: list[str], physical: dict[str, str],
                  target: str, spool: str | None,
                  fail_partition: int | None = None) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """The function ``RDD.mapPartitions`` runs on a partition of ``source.keyed_ranges``'
    pairs after the shuffle by account (sorted by account, then position): folds them
    (``BY_ACCOUNT``) and yields the summary tuple."""

    def run(pairs: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, ...]]:
        def events(log: Any, seen: list[int]) -> Iterator[tuple[int, Any]]:
            decode = row_decoder(log)
            for _, row in pairs:
                seen[0] += 1
                seen[1] = seen[1] or row[0]
                seen[2] = max(seen[2], row[0])
                yield decode(row)

        for out in _fold_task(wire, names, physical, target, spool, fail_partition,
                              BY_ACCOUNT, events):
            yield tuple(out[name] for name in SUMMARY_NAMES)

    return run


def _range_events(log: Any, start: int, stop: int, seen: list[int]) -> Iterator[tuple[int, Any]]:
    decode = row_decoder(log)
    for rows in row_pages(log, start, stop, PAGE):
        if seen[1] == 0:
            seen[1] = rows[0][0]
        seen[0] += len(rows)
        seen[2] = rows[-1][0]
        hook = page_hook([row[4] for row in rows])  # the page's keys in one query (ADR 0117)
        for row in rows:
            yield decode(row, hook)


def _fold_task(wire: dict[str, Any], names: list[str], physical: dict[str, str], target: str,
               spool: str | None, fail_partition: int | None, kind: str,
               events: Callable[[Any, list[int]], Iterable[tuple[int, Any]]]) -> Iterator[Any]:
    """One task: ``events(log, seen)`` folded by ``ProjectionRunner`` into the target;
    yields the cells (``target="cells"``: Arrow batches), else one summary dict."""
    context = TaskContext.get()
    assert context is not None
    part, attempt = context.partitionId(), context.attemptNumber()
    if fail_partition == part and attempt == 0:
        raise InjectedFault(f"injected failure: partition {part}, attempt {attempt}")
    t0 = time.perf_counter()
    log = open_event_log(wire)
    seen = [0, 0, 0]  # events, first position, last position
    try:
        store, run_path, mapping = _target_store(wire, physical, target, spool, kind, part,
                                                 attempt)
        try:
            # untracked: the tasks share the fresh tables (HBase), and one task's
            # position must not make another skip its accounts' events; the driver
            # records the rebuild's position once every task is done
            runner = ProjectionRunner(store, select(names), physical=_named(mapping),
                                      track=False)
            runner.create_tables()
            runner.apply_events(events(log, seen), fold=True)
            if target == "cells":
                yield from _cells(store, runner)
                return
        finally:
            store.close()
    finally:
        log.close()
    _finished(run_path)
    yield {"fold": kind, "partition": part, "attempt": attempt, "events": seen[0],
           "first": seen[1], "last": seen[2], "run": run_path,
           "seconds": time.perf_counter() - t0}


DONE = ".done"


def _finished(run_path: str) -> None:
    """Marks a run file complete (``<run>.done``, after it is closed): the driver may merge
    it while the job goes on (``job._Merger``). Any complete run of a task is a fold of
    the same events, so merging one of an attempt that is not the one kept changes
    nothing."""
    if run_path:
        Path(run_path + DONE).touch()


def _target_store(wire: dict[str, Any], physical: dict[str, str], target: str,
                  spool: str | None, kind: str, part: int, attempt: int
                  ) -> tuple[Any, str, Callable[[str], str | None]]:
    """Where a task writes: ``(store, run file or "", table names)``."""
    if target == "cells":
        return run_tables(None), "", _identity
    if target == "sqlite":
        assert spool is not None
        run_path = str(Path(spool) / f"run-{kind}-{part}-{attempt}.sqlite")
        return run_tables(run_path), run_path, _identity

    return open_tables(wire), "", physical.get


SUMMARY_NAMES = ("fold", "partition", "attempt", "events", "first", "last", "run", "seconds")


def _cells(store: Any, runner: Any) -> Iterator[Any]:
    """The visible cells of a fold, as Arrow batches of ``CELLS``."""
    # local: pyarrow is not on a rebuild's executors (a packaged letterlog), only an export's
    import pyarrow as pa

    for spec in runner.table_specs[:-1]:  # not the tracking table
        rows: list[list[Any]] = [[], [], [], [], []]
        for row, cells in store.scan_cells(spec.name):
            for column, (value, version) in cells.items():
                for i, item in enumerate((spec.name, row, column, value, version)):
                    rows[i].append(item)
        if rows[0]:
            yield pa.RecordBatch.from_arrays(
                [pa.array(rows[0], pa.string()), pa.array(rows[1], pa.binary()),
                 pa.array(rows[2], pa.binary()), pa.array(rows[3], pa.binary()),
                 pa.array(rows[4], pa.int64())],
                names=["table", "row", "column", "value", "version"])


def _identity(name: str) -> str:
    return name


def _named(mapping: Callable[[str], str | None]) -> Callable[[str], str]:
    def physical(table: str) -> str:
        return mapping(table) or table

    return physical
