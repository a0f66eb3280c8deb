"""``letterlog bench rebuild``: a fold rebuild against reading the log alone.

Returns (and the CLI prints) one JSON object holding letterlog's numbers, the raw
baseline measured in the same run on the same machine, their ratio and the target.
The log is ``devtools.bench.benchlog.bench_log``.

``bench_rebuild``: one process folds the whole log (read + decode from the SQLite event
store, ``fold=True``) into a fresh table store. Baseline: reading and decoding the same log
(``Letterlog.events``) with no projection.

Every phase is timed in wall-clock and in process CPU seconds. The target is the wall-clock
ratio to the floor; on a machine other work keeps busy, a long phase (the rebuild) waits for
a core longer than a short one (the floor), so ``ratio_to_floor_cpu`` (the same ratio of
CPU seconds) is given beside it, with each phase's CPU share and the load average.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import tempfile
from functools import partial
from io import StringIO
from pathlib import Path
from typing import Any

from devtools.bench.benchlog import (
    bench_log,
    mapper_events,
    open_reader,
    range_reader,
    select_unpack,
    warm,
)
from devtools.bench.common import (
    SYNCHRONOUS,
    PhaseClock,
    bar_panels,
    counted,
    load_avg,
    max_rss_mb,
    progress_bars,
    rate,
)
from devtools.bench.raw_sqlite import WriteRecorder

TARGET_REBUILD_EVENTS_PER_S = 100_000
TARGET_RATIO_TO_FLOOR = 0.3  # the rebuild's rate over the SELECT + unpack floor, same run


def _rebuild_host(store: Any, reader: Any, log_path: Path | None = None,
                  spool: Path | None = None) -> Any:
    """A ``ProjectionHost`` on ``store`` reading the log of ``reader``: what ``letterlog
    rebuild --all`` runs (fold into fresh tables, catch up, switch the catalog); with
    ``log_path``, its fold over several processes as well (``RangeFold``, each opening the
    log at ``log_path`` itself; run files in ``spool``)."""
    from adapters.readside.host import ProjectionHost

    parallel = None
    if log_path is not None:
        assert spool is not None
        parallel = partial(_range_fold, log_path, spool)
    return ProjectionHost(store, reader.events, None, reader.max_position, parallel=parallel)


def _range_fold(log_path: Path, spool: Path, workers: int, single: Any) -> Any:
    from adapters.readside.rangefold import RangeFold

    return RangeFold(partial(range_reader, log_path), spool, workers, single)


def bench_rebuild(events: int = 1_000_000, plot: Path | None = None,
                  workers: int = 0) -> dict[str, Any]:
    """``ProjectionHost.rebuild`` of every projection from the log into a fresh
    SqliteTableStore, over ``workers`` processes (0: the cores, at most 4; ADR 0113) and
    in this process alone, vs reading and decoding the same log with no projection, through
    the same reader (``Letterlog.events``), in the same run."""
    from adapters.tables.sqlite import SqliteTableStore
    from projections.registry import ALL

    log_path, meta = bench_log(events)
    reader = open_reader(log_path)
    warm(log_path)
    total = reader.max_position()
    load_before = load_avg()
    with progress_bars() as progress, tempfile.TemporaryDirectory(prefix="letterlog-bench-") as tmp:
        task = progress.add_task("baseline: read + decode", total=total)
        read = PhaseClock()
        n = 0
        for _ in counted(reader.events(), progress, task):
            n += 1
        read_s = read.stop()

        task = progress.add_task("floor: SELECT + msgpack unpack, no events", total=total)
        floor = PhaseClock()
        unpacked = select_unpack(log_path, lambda done: progress.update(task, completed=done))
        floor_s = floor.stop()

        task = progress.add_task("reference: eventsourcing mapper read + decode", total=total)
        mapper = PhaseClock()
        for _ in counted(mapper_events(reader), progress, task):
            pass
        mapper_s = mapper.stop()

        store = SqliteTableStore(Path(tmp) / "single.sqlite", synchronous=SYNCHRONOUS)
        host = _rebuild_host(store, reader)
        recorder = WriteRecorder(store, keep=False)
        task = progress.add_task("one process: read + decode + fold + write + switch",
                                 total=total)
        single = PhaseClock()
        host.rebuild(progress=lambda done, _: progress.update(task, completed=done))
        single_s = single.stop()
        host.close()

        store = SqliteTableStore(Path(tmp) / "tables.sqlite", synchronous=SYNCHRONOUS)
        host = _rebuild_host(store, reader, log_path, Path(tmp))
        fold = host.default_fold(workers or None)
        task = progress.add_task(f"rebuild over {getattr(fold, 'workers', 1)} processes",
                                 total=total)
        rebuild = PhaseClock(children=True)
        report = host.rebuild(progress=lambda done, _: progress.update(task, completed=done),
                              fold=fold)
        rebuild_s = rebuild.stop()
        position = report["position"]
        host.close()
    reader.close()
    single_rate = rate(n, single_s)
    rebuild_rate = rate(n, rebuild_s)
    read_rate = rate(n, read_s)
    project_s = max(0.0, single_s - read_s - recorder.seconds)  # the one process's
    result: dict[str, Any] = {
        "benchmark": "rebuild",
        "events": n,
        "position": position,
        "log": {k: meta[k] for k in ("key", "messages_delivered", "accounts", "cached")},
        "projections": [p.name for p in ALL],
        "mode": "fold",
        "entry_point": "ProjectionHost.rebuild",
        "table_store": "SqliteTableStore",
        "sqlite_synchronous": SYNCHRONOUS,
        "workers": getattr(fold, "stats", {}).get("workers", 1),
        "fold": getattr(fold, "stats", {}),
        "rebuild_events_per_s": rebuild_rate,
        "rebuild_seconds": round(rebuild_s, 2),
        "one_process_events_per_s": single_rate,
        "one_process_seconds": round(single_s, 2),
        "one_process_cpu_us_per_event": round(single.cpu / n * 1e6, 2) if n else 0.0,
        "speed_up_over_one_process": round(rebuild_rate / single_rate, 3) if single_rate else None,
        "read_decode_events_per_s": read_rate,
        "read_decode_seconds": round(read_s, 2),
        "mapper_read_decode_events_per_s": rate(n, mapper_s),
        "select_unpack_events_per_s": rate(unpacked, floor_s),
        "cells_written": recorder.puts,
        "deletes_written": recorder.deletes,
        "write_seconds": round(recorder.seconds, 2),
        "project_fold_seconds": round(project_s, 2),
        "split": {k: round(v / single_s, 3) if single_s else 0.0 for k, v in (
            ("read_decode", read_s), ("project_fold", project_s),
            ("write", recorder.seconds))},
        "ratio": round(rebuild_rate / read_rate, 3) if read_rate else 0.0,
        "target_events_per_s": TARGET_REBUILD_EVENTS_PER_S,
        "cpu_share": {"read_decode": read.share, "floor": floor.share,
                      "mapper": mapper.share, "rebuild": rebuild.share,
                      "one_process": single.share},
        "cpu_seconds": {"read_decode": round(read.cpu, 2), "floor": round(floor.cpu, 2),
                        "rebuild": round(rebuild.cpu, 2), "one_process": round(single.cpu, 2)},
        "rebuild_cpu_us_per_event": round(rebuild.cpu / n * 1e6, 2) if n else 0.0,
        "max_rss_mb": max_rss_mb(),
        "load_avg_1m": [load_before, load_avg()],
        "cpu_count": os.cpu_count(),
    }
    result["meets_target"] = rebuild_rate >= TARGET_REBUILD_EVENTS_PER_S
    floor_rate = result["select_unpack_events_per_s"]
    result["ratio_to_floor"] = round(rebuild_rate / floor_rate, 3) if floor_rate else 0.0
    result["target_ratio_to_floor"] = TARGET_RATIO_TO_FLOOR
    result["meets_ratio_to_floor"] = result["ratio_to_floor"] >= TARGET_RATIO_TO_FLOOR
    # the same ratio in CPU seconds (every process's): what the rebuild costs, whatever
    # else ran meanwhile
    result["ratio_to_floor_cpu"] = (round((n / rebuild.cpu) / (unpacked / floor.cpu), 3)
                                    if floor.cpu > 0 and rebuild.cpu > 0 and unpacked else 0.0)
    result["one_process_ratio_to_floor"] = round(single_rate / floor_rate, 3) if floor_rate else 0.0
    result["one_process_ratio_to_floor_cpu"] = (
        round((n / single.cpu) / (unpacked / floor.cpu), 3)
        if floor.cpu > 0 and single.cpu > 0 and unpacked else 0.0)
    # Every rebuild reads and unpacks each event at least once: what the target leaves per
    # event beyond that floor is all projectors, fold and writes may take to meet it.
    result["target_budget_beyond_floor_us_per_event"] = round(
        1e6 / TARGET_REBUILD_EVENTS_PER_S - 1e6 / floor_rate, 2) if floor_rate else None
    result["write_us_per_event"] = round(recorder.seconds / n * 1e6, 2) if n else 0.0
    if plot is not None:
        bar_panels(plot, f"rebuild of all projections from {n:,} events", [
            ("events / s", {f"letterlog rebuild, {result['workers']} processes": rebuild_rate,
                            "letterlog rebuild, one process": single_rate,
                            "read + decode only": read_rate,
                            "floor: SELECT + unpack only": result["select_unpack_events_per_s"],
                            "eventsourcing mapper read + decode": result[
                                "mapper_read_decode_events_per_s"],
                            "target": TARGET_REBUILD_EVENTS_PER_S,
                            f"target: {TARGET_RATIO_TO_FLOOR} x floor":
                                TARGET_RATIO_TO_FLOOR * result["select_unpack_events_per_s"]}),
            ("seconds, one process", {"read + decode": read_s,
                         "project + fold": project_s,
                         "write": recorder.seconds}),
        ])
        result["plot"] = str(plot)
    return result


def profile_rebuild(events: int = 1_000_000, limit: int | None = 200_000,
                    top: int = 40) -> str:
    """cProfile of a fold rebuild (``ProjectionHost.rebuild``) of the first ``limit`` events
    of the ``events`` log."""
    from adapters.tables.sqlite import SqliteTableStore

    log_path, _ = bench_log(events)
    reader = open_reader(log_path)
    warm(log_path)
    if limit is not None:
        reader.max_position = lambda: min(limit, reader.log.recorder.max_notification_id())
    with tempfile.TemporaryDirectory(prefix="letterlog-bench-") as tmp:
        store = SqliteTableStore(Path(tmp) / "tables.sqlite", synchronous=SYNCHRONOUS)
        host = _rebuild_host(store, reader)
        profiler = cProfile.Profile()
        profiler.enable()
        host._fold(store, host.runner.projections, lambda t: t, reader.max_position(), None)
        profiler.disable()
        host.close()
    reader.close()
    out = StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()
