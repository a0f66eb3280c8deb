"""``letterlog bench project``: catch-up projection against raw SQLite writes.

Returns (and the CLI prints) one JSON object holding letterlog's numbers, the raw
baseline measured in the same run on the same machine, their ratio and the target.
The log is ``devtools.bench.benchlog.bench_log``.

``bench_project``: catch-up projection. A ``ProjectionRunner`` (every projection, live
mode, default batch size) applies a realistic log to a fresh ``SqliteTableStore``
(``synchronous=NORMAL``, the embedded default). Baseline: the very cells the runner wrote
(captured from ``apply``), inserted with plain ``executemany`` upserts into ``WITHOUT ROWID``
tables, one transaction per runner batch, same pragmas. Decoding the log is timed apart.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from devtools.bench.benchlog import bench_log, open_reader, warm
from devtools.bench.common import (
    SYNCHRONOUS,
    PhaseClock,
    bar_panels,
    counted,
    load_avg,
    progress_bars,
    rate,
)
from devtools.bench.raw_sqlite import WriteRecorder, raw_cell_writes

TARGET_PROJECT_RATIO = 0.30


def bench_project(events: int = 200_000, plot: Path | None = None) -> dict[str, Any]:
    """Live-mode projection of a realistic log into a fresh SqliteTableStore vs raw SQLite
    writes of the same cells in equal-sized transactions."""
    from adapters.tables.sqlite import SqliteTableStore
    from projections.registry import ALL
    from projections.runner import ProjectionRunner

    log_path, meta = bench_log(events)
    reader = open_reader(log_path)
    warm(log_path)
    load_before = load_avg()
    with progress_bars() as progress, tempfile.TemporaryDirectory(prefix="letterlog-bench-") as tmp:
        task = progress.add_task("reading + decoding the log", total=reader.max_position())
        decode = PhaseClock()
        items = list(counted(reader.events(), progress, task))
        decode_s = decode.stop()
        reader.close()
        n = len(items)

        store = SqliteTableStore(Path(tmp) / "tables.sqlite", synchronous=SYNCHRONOUS)
        runner = ProjectionRunner(store, ALL)
        runner.create_tables()
        recorder = WriteRecorder(store, keep=True)
        task = progress.add_task("projecting (live mode)", total=len(items))
        project = PhaseClock()
        runner.apply_events(counted(items, progress, task))
        project_s = project.stop()
        store.close()
        del items

        task = progress.add_task("raw SQLite: same cells", total=None)
        raw = raw_cell_writes(recorder.batches, Path(tmp) / "raw.sqlite")
        strict = raw_cell_writes(recorder.batches, Path(tmp) / "raw-bytearray.sqlite",
                                 binding="bytearray")
        progress.update(task, completed=raw["cells"])
    cells_per_s = rate(recorder.puts, project_s)
    result: dict[str, Any] = {
        "benchmark": "project",
        "events": n,
        "log": {k: meta[k] for k in ("key", "messages_delivered", "accounts", "cached")},
        "event_kinds": meta["event_kinds"],
        "table_store": "SqliteTableStore",
        "sqlite_synchronous": SYNCHRONOUS,
        "mode": "live",
        "batch_size": runner.batch_size,
        "batches": len(recorder.batches),
        "cells_written": recorder.puts,
        "deletes_written": recorder.deletes,
        "cells_per_event": round(recorder.puts / n, 2) if n else 0,
        "decode_events_per_s": rate(n, decode_s),
        "project_events_per_s": rate(n, project_s),
        "project_cells_per_s": cells_per_s,
        "project_write_share": round(recorder.seconds / project_s, 3) if project_s else 0,
        "catch_up_events_per_s": rate(n, decode_s + project_s),
        "raw_sqlite_cells_per_s": raw["cells_per_s"],
        "raw_sqlite_transactions": raw["transactions"],
        "raw_sqlite_bytearray_cells_per_s": strict["cells_per_s"],
        "ratio": round(cells_per_s / raw["cells_per_s"], 3) if raw["cells_per_s"] else 0.0,
        "ratio_vs_bytearray_raw": (round(cells_per_s / strict["cells_per_s"], 3)
                                   if strict["cells_per_s"] else 0.0),
        "target_ratio": TARGET_PROJECT_RATIO,
        "cpu_share": {"decode": decode.share, "project": project.share, "raw": raw["cpu_share"],
                      "raw_bytearray": strict["cpu_share"]},
        "load_avg_1m": [load_before, load_avg()],
        "cpu_count": os.cpu_count(),
    }
    result["meets_target"] = result["ratio"] >= TARGET_PROJECT_RATIO
    if plot is not None:
        bar_panels(plot, f"catch-up projection, {n:,} events, SQLite synchronous={SYNCHRONOUS}", [
            ("cells written / s", {"letterlog projection": cells_per_s,
                                   "raw SQLite executemany": raw["cells_per_s"],
                                   "raw, blobs as bytearray": strict["cells_per_s"]}),
            ("events / s", {"letterlog decode": result["decode_events_per_s"],
                            "letterlog project": result["project_events_per_s"],
                            "letterlog decode + project": result["catch_up_events_per_s"]}),
        ])
        result["plot"] = str(plot)
    return result
