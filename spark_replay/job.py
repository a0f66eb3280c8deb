"""The Spark rebuild: extract (read the log) -> transform (the projectors) -> load.

``rebuild(settings, names, master=...)`` is what ``letterlog rebuild --engine spark`` and
``spark-submit spark_replay/submit.py`` run. The read side's blue/green rebuild
(``ProjectionHost.rebuild``) does what it always does -- fresh physical tables, catch up
from the rebuild's position, switch the catalog atomically -- and the fold up to the log's
head at the start is this job:

1. *extract*: positions ``1..head`` cut into ranges, each read by a task from the log
   (``source.keyed_ranges`` / ``fold.fold_ranges``, the project's page reader);
2. *transform* (ADR 0061, which revises ADR 0019): every projection over the log's position
   ranges, no shuffle of events (``fold.fold_ranges``: each task reads its range from the
   log itself and runs the projection runner in fold mode, ``fold.py``). The projections
   that never read (all but ``counters``) fold in any order: each cell's highest version
   wins. ``counters`` reads its own rows, so the same pass folds it as *mergeable parts*
   per account (``projections.counters.CounterPartialFold``): sums of per-event deltas,
   with what depends on the row the earlier ranges leave kept apart. Only the parts are
   shuffled (``repartitionAndSortWithinPartitions`` by account, then range), and a small
   task per core merges each account's parts in log order (``fold.merge_counters``). An
   account holding the whole log is spread over every range task like any other.

   Plain RDDs (pickled rows between Python workers): measured 2.8x faster than the
   DataFrame route (Python data source, Arrow, DataFrame shuffle) for the shuffled part.
   ``by_account_only=True`` is the layout before: every event keyed by account
   (``source.keyed_ranges``), shuffled, and every projection folded per account partition
   (``fold.fold_accounts``); one account is then one task. The benchmark compares both.
3. *load*: each task loads its folded tables (a run file for SQLite, merged by the driver
   inside SQLite afterwards; HBase directly, idempotent). Only one summary row per task
   comes back to the driver.

An event that cannot be decoded fails the job with ``CorruptEvent`` naming its position,
aggregate and version; the catalog is untouched and the old tables stay live.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from adapters.bootstrap.spark import (
    Settings,
    rebuild_lock,
    rebuilding,
    remove_stale_runs,
    require_store,
    run_directory,
)
from domain.errors import CorruptEvent, InvalidCommand
from projections import names as n
from projections.keys import tracking_position
from projections.registry import ALL, Projection
from projections.runner import ProjectionRunner
from projections.tablestore import TableStore
from spark_replay.executors import attempts, registered
from spark_replay.fold import (
    BY_ACCOUNT,
    BY_POSITION,
    COUNTERS_MERGE,
    DONE,
    SUMMARY_NAMES,
    fold_accounts,
    fold_ranges,
    merge_counters,
)
from spark_replay.session import effective_conf, spark_session
from spark_replay.settings import to_wire
from spark_replay.source import account_partition, keyed_ranges, ranges
from spark_replay.watch import counting, started, watching

_CORRUPT = re.compile(r"CorruptEvent: (.*)")
TAIL_RANGE = 2.0
"""When the driver merges only in the job's tail (``_idle_core``), the last position range
is this many times each other one: its task ends last, alone, and the other cores' runs are
merged meanwhile (1M events, 2 cores, A/B: the merge after the job 7.2-8.2 s with none during
it, 5.0 s in the tail of equal ranges, 1.2-1.5 s with this; the rebuild 33.9-34.3 ->
29.9-32.4 s, ADR 0061)."""
PARTITIONS_PER_CORE = 4
"""Fold partitions per core: tasks of unequal size (accounts of unequal size, hashed) even
out when each core takes the next task as it finishes (measured: 2 hashed partitions on
local[2] held 18% and 82% of a 4-account log's events)."""


@dataclass
class SparkFold:
    """A ``Fold`` for ``ProjectionHost.rebuild`` that runs the Spark job; keeps its figures."""

    spark: Any
    settings: Settings
    partitions: int | None = None
    fail_partition: int | None = None
    by_account_only: bool | None = None  # True: the old layout (every event by account)
    merge_during_job: bool | None = None
    """SQLite: merge each run as its task ends (``_Merger``); ``False``: none during the job;
    ``None``: so when the driver has a core the executors do not use (a cluster master, or
    a local one with fewer cores than the machine), else only in the job's tail, while fewer
    tasks are left than the executors have cores (on 2 cores busy with tasks the merge only
    slowed them, measured)."""
    stats: dict[str, Any] = field(default_factory=dict)
    last_range: float = 1.0  # the last position range's size over each other one's

    def __call__(self, store: TableStore, projections: tuple[Projection, ...],
                 physical: Any, stop: int, progress: Any = None) -> ProjectionRunner:
        ProjectionRunner(store, projections, physical=physical).create_tables()
        tables = {t.name: physical(t.name) for p in projections for t in p.tables}
        target = "hbase" if self.settings.table_store == "hbase" else "sqlite"
        spool = None
        runs = contextlib.ExitStack()
        if target == "sqlite":
            remove_stale_runs(Path(self.settings.data))  # a killed driver's
            spool = runs.enter_context(run_directory(Path(self.settings.data)))
        merger, self.last_range = None, 1.0
        if spool is not None and stop > 0 and self.merge_during_job is not False:
            idle = None if self._overlap() else _idle_core(self.spark.sparkContext,
                                                           self.stats["cores"])
            merger = runs.enter_context(_Merger(store, tables, Path(spool), idle))
            if idle is not None:  # a long last task: the tail the merge runs in
                self.last_range = TAIL_RANGE
        try:
            t0 = time.perf_counter()
            tasks = self.run(projections, {**tables, n.TRACKING: physical(n.TRACKING)},
                             target, spool, stop) if stop > 0 else []
            t1 = time.perf_counter()
            merged: set[str] = set()
            if merger is not None:
                merger.stop()
                merged = merger.merged
                self.stats.update(merged_during_job=len(merged),
                                  merge_during_job_s=round(merger.seconds, 3),
                                  merge_during_job_when="always" if merger.idle is None
                                  else "tail")
            rest = [t["run"] for t in tasks if t["run"] and t["run"] not in merged]
            if target == "sqlite" and (rest or merged):  # the covered puts go here, once
                store.merge_runs(rest, tables)  # type: ignore[attr-defined]
            self.stats.update(_figures(tasks, t1 - t0, time.perf_counter() - t1,
                                       self.stats.get("cores") or 1))
            store.apply([tracking_position(physical(n.TRACKING), p.name, stop)
                         for p in projections])
        finally:
            runs.close()  # the run files go, whatever happened
        return ProjectionRunner(store, projections, physical=physical)

    def _overlap(self) -> bool:
        if self.merge_during_job is not None:
            return self.merge_during_job
        sc = self.spark.sparkContext
        if "cores" not in self.stats:
            self.stats.update(registered(sc))
        if not str(sc.master).startswith("local"):
            return True  # the driver's cores are not the executors'

        return len(os.sched_getaffinity(0)) > int(self.stats["cores"])

    def run(self, projections: tuple[Projection, ...], physical: dict[str, str], target: str,
            spool: str | None, stop: int) -> list[dict[str, Any]]:
        """The Spark job proper; one summary per task (successful attempts only). The
        partitions follow the cores of the executors registered (``executors.registered``:
        a bounded wait for those expected)."""
        sc = self.spark.sparkContext
        if "cores" not in self.stats:
            self.stats.update(registered(sc))
        cores = self.stats["cores"]
        parts = self.partitions or PARTITIONS_PER_CORE * cores
        wire = to_wire(self.settings)
        by_account_only = bool(self.by_account_only)
        self.stats["layout"] = "by_account_only" if by_account_only else "by_position"
        last_range = 1.0 if by_account_only else self.last_range
        spans = ranges(1, stop, parts, last_range)
        self.stats["last_range"] = last_range
        names = [p.name for p in projections]
        folds = []
        counted = sc.accumulator(0)  # the positions folded, for the progress lines
        if by_account_only:  # every projection, every event of an account in one task
            folds.append(sc.parallelize(spans, len(spans))
                         .mapPartitions(counting(keyed_ranges(wire, ()), counted))
                         .repartitionAndSortWithinPartitions(parts, account_partition)
                         .mapPartitions(fold_accounts(wire, names, physical, target, spool,
                                                      self.fail_partition)))
        else:  # every projection by position range; counters as mergeable parts
            counters = n.COUNTERS in names
            others = [name for name in names if name != n.COUNTERS]
            folded_ranges = sc.parallelize(spans, len(spans)).mapPartitions(counting(
                fold_ranges(wire, others, physical, target, spool, self.fail_partition,
                            counters=counters), counted))
            if counters:  # the parts of an account meet in one (small) task, in log order
                merges = max(1, min(parts, cores))
                folded_ranges = (folded_ranges
                                 .repartitionAndSortWithinPartitions(merges, account_partition)
                                 .mapPartitions(merge_counters(wire, physical, target, spool,
                                                               len(spans))))
            folds.append(folded_ranges)
        folded = sc.union(folds)
        group = f"letterlog-rebuild-{uuid.uuid4().hex}"
        sc.setJobGroup(group, "letterlog rebuild")
        try:
            with watching(sc, events=stop, counted=counted):
                rows = folded.collect()
        except Exception as error:
            raise _translated(error) from None
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
        self.stats.update(attempts(sc, group))
        return sorted((dict(zip(SUMMARY_NAMES, r, strict=True)) for r in rows),
                      key=lambda r: r["partition"])


class _Merger:
    """Merges each run into the fresh tables as soon as its task has written it whole
    (``<run>.done``), in a driver thread, while the job goes on (SQLite works outside the
    GIL): the driver's load overlaps the tasks instead of following them. With ``idle``
    (when the executors take every core), only while it says a core is free: the job's
    tail, which ``TAIL_RANGE`` lengthens. After the job
    the driver merges what is left of the kept attempts' runs; merging is a union in which
    the later version and the higher tombstone win, so the order does not matter."""

    def __init__(self, store: Any, tables: dict[str, str], spool: Path,
                 idle: Callable[[], bool] | None = None) -> None:
        self.store, self.tables, self.spool, self.idle = store, tables, spool, idle
        self.merged: set[str] = set()
        self.seconds = 0.0
        self._stopping = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="letterlog-merge",
                                        daemon=True)

    def __enter__(self) -> _Merger:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._thread.join()

    def _loop(self) -> None:
        try:
            while not self._stopping.wait(0.25):
                for marker in sorted(self.spool.glob(f"run-*.sqlite{DONE}")):
                    run = str(marker)[:-len(DONE)]
                    if run in self.merged or self._stopping.is_set():
                        continue
                    if self.idle is not None and not self.idle():
                        break  # every core has a task: look again later
                    t0 = time.perf_counter()
                    self.store.merge_runs([run], self.tables, last=False)
                    self.seconds += time.perf_counter() - t0
                    self.merged.add(run)
        except BaseException as error:  # handed to the driver's thread by ``stop``
            self._error = error

    def stop(self) -> None:
        """Waits for the merge under way; raises what the thread failed with."""
        self.__exit__()
        if self._error is not None:
            raise self._error


def _idle_core(sc: Any, cores: int) -> Callable[[], bool]:
    """Whether a core is free for the driver's merge: fewer tasks are left in the running
    stages (running or waiting) than the executors have cores -- the job's tail."""
    tracker = sc.statusTracker()

    def idle() -> bool:
        left = 0
        for stage in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage)
            if info is not None:
                left += info.numTasks - info.numCompletedTasks
        return left < cores

    return idle


def warm_up(spark: Any, settings: Settings, events: int) -> int:
    """A first small job: the rebuild's own job (both folds, the same Python workers and
    imports) over the first ``events`` events, into run files in a scratch directory that
    is then removed (nothing merged, nothing switched). Returns the events folded."""
    physical = {t.name: t.name for p in ALL for t in p.tables}
    physical[n.TRACKING] = n.TRACKING
    with run_directory(Path(settings.data), ".spark-warm-up-") as spool:
        tasks = SparkFold(spark, settings).run(ALL, physical, "sqlite", spool, events)
    return sum(t["events"] for t in tasks if t["fold"] == BY_POSITION)


def _translated(error: Exception) -> Exception:
    """A task's ``CorruptEvent`` as the same error on the driver (Spark wraps it in text)."""
    found = _CORRUPT.search(str(error))
    if found is not None:
        return CorruptEvent(found.group(1).strip())
    return error


def _skew(counts: list[int]) -> float | None:
    """The largest partition over the mean of all of them, empty ones included (1: even;
    the number of partitions: one partition holds everything)."""
    return round(max(counts) * len(counts) / sum(counts), 3) if sum(counts) else None


def _figures(tasks: list[dict[str, Any]], job_s: float, merge_s: float,
             cores: int) -> dict[str, Any]:
    """The job's figures: per task, per fold (``partition_events``, the event skew
    ``skew_max_over_mean``), and ``longest_task_over_fair_share``: the longest task's
    seconds over the task seconds per core (above 1, one task bounds the job)."""
    seconds = [t["seconds"] for t in tasks]
    folds = {}
    for kind in (BY_ACCOUNT, BY_POSITION, COUNTERS_MERGE):
        mine = [t for t in tasks if t["fold"] == kind]
        if mine:
            folds[kind] = {"partition_events": [t["events"] for t in mine],
                           "skew_max_over_mean": _skew([t["events"] for t in mine]),
                           "task_seconds": [round(t["seconds"], 2) for t in mine]}
    merges = sum(1 for t in tasks if t["fold"] == COUNTERS_MERGE)
    return {"spark_partitions": len(tasks) - merges, "merge_partitions": merges,
            "spark_job_s": round(job_s, 3),
            "task_seconds": [round(s, 2) for s in seconds],
            "merge_s": round(merge_s, 3), "partition_events": [t["events"] for t in tasks],
            "folds": folds,
            "skew_max_over_mean": folds.get(BY_ACCOUNT, {}).get("skew_max_over_mean"),
            "longest_task_over_fair_share":
                round(max(seconds) * cores / sum(seconds), 3) if sum(seconds) else None,
            # the largest task's share of the job's task seconds, beside a fair share (one
            # core's): the "largest task's share of the work"
            "largest_task_share": round(max(seconds) / sum(seconds), 3) if sum(seconds) else None,
            "fair_share": round(1 / cores, 3),
            "kept_attempts": {t["partition"]: t["attempt"] for t in tasks}}


def _instant(text: str | None) -> datetime:
    try:
        when = datetime.fromisoformat(text or "")
    except ValueError:
        raise InvalidCommand(f"--as-of: {text!r} is not an ISO 8601 date-time") from None
    if when.tzinfo is None:
        raise InvalidCommand(f"--as-of: {text!r} needs a timezone (e.g. +00:00)")
    return when


def rebuild(settings: Settings, names: list[str] | None = None, *, master: str | None = None,
            spark: Any = None, partitions: int | None = None,
            fail_partition: int | None = None, progress: Any = None,
            until: int | None = None, as_of: str | None = None,
            view: str | None = None, by_account_only: bool | None = None,
            merge_during_job: bool | None = None) -> dict[str, Any]:
    """Rebuilds ``names`` (default all) on Spark, blue/green through the catalog; with
    ``until`` (a position) or ``as_of`` (ISO 8601), builds the read-only view ``view``
    (default ``p<position>``) as the projections were then, and switches nothing.
    ``by_account_only``: every projection folded by account (the layout before ADR 0061),
    else (the default) by position range, counters as mergeable parts;
    ``merge_during_job``: see ``SparkFold``. A data directory
    holding no store is ``StoreUnavailable``, another rebuild of the store running
    ``RebuildRunning``, both before Spark starts."""
    require_store(settings)  # before Spark starts: a missing store is the user's mistake
    with rebuild_lock(settings.data):  # one at a time; the kernel frees it if we are killed
        session = spark or spark_session(master)
        started(session.sparkContext)  # or one line saying why it cannot (ADR 0093)
        fold = SparkFold(session, settings, partitions, fail_partition, by_account_only,
                         merge_during_job)
        with rebuilding(settings) as store:  # the log and the read side: no facade
            if until is None and as_of is None:
                result = dict(store.host.rebuild(names, progress, fold=fold))
            else:
                stop = until if until is not None else store.position_at(_instant(as_of))
                result = dict(store.host.build_view(view or f"p{stop}", names, stop, fold))
                store.erase_from_views()  # messages purged since ``stop`` leave the view
    result.update(fold.stats, engine="spark", master=session.sparkContext.master,
                  spark_conf=effective_conf(session))
    return result
