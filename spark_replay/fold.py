"""Transform + load, in the executors: one partition's events folded by the projection runner.

Each task gets one partition of the log, every event of its accounts in position order
(``job.py`` partitions by account and sorts within), decodes the stored msgpack, and runs
``projections.runner.ProjectionRunner`` in fold mode over it -- the same runner and pure
projectors as the embedded rebuild and the stream workers. Its folded tables go:

* ``sqlite``: into a *run*, a fresh SQLite tables file of the task's own
  (``<spool>/run-<partition>-<attempt>.sqlite``, bulk loaded in key order by the runner's
  fold path); the driver merges the runs of the successful attempts into the fresh tables
  (``SqliteTableStore.merge_runs``). A failed attempt's run is never merged.
* ``hbase``: straight into the fresh HBase tables through the project's HBase table store
  (happybase batches, every cell at its version): a retried task writes the same cells
  again, which changes nothing (the counters projection reads its row back and skips what
  it applied already, as under at-least-once delivery).

No task reads or writes the tracking table: a task's position says nothing about another
task's accounts (a task that read a finished task's position would skip its own events up
to there). The driver records the rebuild's position after the last task.

A task yields one summary row; nothing else comes back to the driver.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

SUMMARY = ("partition int, attempt int, events long, first long, last long, run string, "
           "seconds double")
CELLS = "table string, row binary, column binary, value binary, version long"


class InjectedFault(RuntimeError):
    """Raised by the first attempt of the task chosen by ``fail_partition`` (tests)."""


def _events(batches: Iterable[Any], decode: Callable[[Any], tuple[int, Any]],
            seen: list[int]) -> Iterator[tuple[int, Any]]:
    from adapters.eventlog.transcoder import uuid_from_int

    for batch in batches:
        positions = batch.column(0).to_pylist()
        aggregates = batch.column(1).to_pylist()
        versions = batch.column(2).to_pylist()
        topics = batch.column(3).to_pylist()
        states = batch.column(4).to_pylist()
        for i, position in enumerate(positions):
            seen[0] += 1
            if seen[1] == 0:
                seen[1] = position
            seen[2] = position
            aggregate = uuid_from_int(int.from_bytes(aggregates[i], "big"))
            yield decode((position, aggregate, versions[i], topics[i], states[i]))


def fold_partitions(wire: dict[str, Any], names: list[str], physical: dict[str, str],
                    target: str, spool: str | None,
                    fail_partition: int | None = None) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """The function ``mapInArrow`` runs on each partition (see the module docstring)."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext

        from adapters.eventlog.reader import row_decoder
        from projections.registry import select
        from projections.runner import ProjectionRunner
        from spark_replay.settings import open_event_log, open_tables

        context = TaskContext.get()
        part, attempt = context.partitionId(), context.attemptNumber()
        if fail_partition == part and attempt == 0:
            raise InjectedFault(f"injected failure: partition {part}, attempt {attempt}")
        t0 = time.perf_counter()
        log = open_event_log(wire)
        run_path = ""
        try:
            if target == "cells":
                from adapters.tables.memory import InMemoryTableStore

                store = InMemoryTableStore()
                mapping = _identity
            elif target == "sqlite":
                from adapters.tables.sqlite import SqliteTableStore

                assert spool is not None
                run_path = str(Path(spool) / f"run-{part}-{attempt}.sqlite")
                store: Any = SqliteTableStore(run_path, synchronous="OFF")
                mapping: Callable[[str], str] = _identity
            else:
                store = open_tables(wire)
                mapping = physical.get  # type: ignore[assignment]
            try:
                seen = [0, 0, 0]
                # untracked: the tasks share the fresh tables (HBase), and one task's
                # position must not make another skip its accounts' events; the driver
                # records the rebuild's position once every task is done
                runner = ProjectionRunner(store, select(names), physical=_named(mapping),
                                          track=False)
                runner.create_tables()
                runner.apply_events(_events(batches, row_decoder(log), seen), fold=True)
                if target == "cells":
                    yield from _cells(store, runner)
                    return
            finally:
                store.close()
        finally:
            log.close()
        yield pa.RecordBatch.from_arrays(
            [pa.array([part], pa.int32()), pa.array([attempt], pa.int32()),
             pa.array([seen[0]], pa.int64()), pa.array([seen[1]], pa.int64()),
             pa.array([seen[2]], pa.int64()), pa.array([run_path], pa.string()),
             pa.array([time.perf_counter() - t0], pa.float64())],
            names=["partition", "attempt", "events", "first", "last", "run", "seconds"])

    return run


def _cells(store: Any, runner: Any) -> Iterator[Any]:
    """The visible cells of a fold, as Arrow batches of ``CELLS``."""
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
