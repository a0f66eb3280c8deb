"""``letterlog bench purge``: due messages purged per second, against intake and raw deletes.

Set-up (not timed): ``messages`` deliveries in batches, a tenth of them large and sharing
a few payloads, then every one expunged. Timed: one ``purge`` run at a time when all are due
(the ``deleted`` job, then the ``payloads`` job). Two references measured in the same run:

* the single-command delivery rate (a store of its own): the purger has to keep up with
  intake, or a store grows for ever (``ratio_purge_over_delivery``, target >= 1.0);
* raw SQLite deletes of the same message rows from a copy of the read-model file taken
  before the purge, in transactions of the purger's batch size, same ``synchronous``: what
  the table work alone costs.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from adapters.demo.benchmail import bench_messages
from adapters.demo.mailgen import PEOPLE
from adapters.lifecycle.jobs import BATCH
from devtools.bench.ingest import bar_plot

SHARED_PAYLOADS = 20


def _rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else float("inf")


def _mail(messages: int) -> list[bytes]:
    small = bench_messages(messages)
    large = [b"Subject: shared %d\r\nFrom: bench@example.org\r\n\r\n" % i + os.urandom(8)
             .hex().encode() * 1500 for i in range(SHARED_PAYLOADS)]
    return [large[(i // 10) % SHARED_PAYLOADS] if i % 10 == 0 else raw
            for i, raw in enumerate(small)]


def _single_deliveries(root: Path, blobs: list[bytes], durability: str) -> float:
    from adapters.embedded import Letterlog

    with Letterlog.open(root / "single", durability=durability) as store:
        for p in PEOPLE:
            store.create_mailbox(f"{p}@example.org", "Bench", create_account=True)
        t0 = time.perf_counter()
        for i, raw in enumerate(blobs):
            store.deliver(account=f"{PEOPLE[i % len(PEOPLE)]}@example.org", raw=raw)
        return _rate(len(blobs), time.perf_counter() - t0)


def _raw_deletes(tables: Path, rows: list[bytes], synchronous: str) -> float:
    con = sqlite3.connect(tables, isolation_level=None)
    con.execute(f"PRAGMA synchronous={synchronous}")
    con.execute("PRAGMA secure_delete=ON")
    t0 = time.perf_counter()
    for i in range(0, len(rows), BATCH):
        con.execute("BEGIN IMMEDIATE")
        con.executemany('DELETE FROM "cells:messages" WHERE row = ?',
                        [(r,) for r in rows[i:i + BATCH]])
        con.execute("COMMIT")
    seconds = time.perf_counter() - t0
    con.close()
    return _rate(len(rows), seconds)


def bench_purge(messages: int = 50_000, *, durability: str = "full", single: int = 2000,
                plot: Path | None = None) -> dict[str, Any]:
    from adapters.embedded import Letterlog
    from projections.keys import message_row

    blobs = _mail(messages)
    sync = {"full": "FULL", "normal": "NORMAL"}[durability]
    with tempfile.TemporaryDirectory(prefix="letterlog-bench-purge-") as tmp:
        root = Path(tmp)
        with Letterlog.open(root / "store", durability=durability) as store:
            deliveries = []
            for i in range(0, len(blobs), 500):
                deliveries += store.deliver_many(
                    {"account": f"{PEOPLE[(i + j) % len(PEOPLE)]}@example.org", "raw": raw}
                    for j, raw in enumerate(blobs[i:i + 500]))
            ids = [d.message_id for d in deliveries]
            for i in range(0, len(ids), 500):
                store.expunge(ids[i:i + 500])
            payloads = len(list(store.payloads.list()))
            sqlite: Any = store.read_side().tables  # embedded SQLite's
            sqlite.checkpoint("TRUNCATE")
            shutil.copy(root / "store" / "tables.sqlite", root / "raw-tables.sqlite")
            now = datetime.now(UTC) + timedelta(days=store.settings.deleted_retention_days + 1)
            t0 = time.perf_counter()
            report = store.purge(now, ["deleted", "payloads"]).as_dict()
            seconds = time.perf_counter() - t0
        rows = [message_row(d.mailbox_id, d.uid) for d in deliveries]
        raw_deletes = _raw_deletes(root / "raw-tables.sqlite", rows, sync)
        delivery = _single_deliveries(root, blobs[:single], durability)
    purge_rate = _rate(report["purged"], seconds)
    result: dict[str, Any] = {
        "benchmark": "purge",
        "messages": len(blobs),
        "shared_payload_messages": len(blobs[::10]),
        "payloads_stored": payloads,
        "durability": durability,
        "sqlite_synchronous": sync,
        "purged": report["purged"],
        "payloads_freed": report["payloads_freed"],
        "purge_seconds": round(seconds, 3),
        "purge_msgs_per_s": purge_rate,
        "single_delivery_msgs_per_s": delivery,
        "single_deliveries_timed": min(single, len(blobs)),
        "raw_sqlite_row_deletes_per_s": raw_deletes,
        "ratio_purge_over_delivery": round(purge_rate / delivery, 3),
        "ratio_purge_over_raw_deletes": round(purge_rate / raw_deletes, 4),
        "target_ratio_purge_over_delivery": 1.0,
        "cpu_count": os.cpu_count(),
    }
    result["meets_target"] = result["ratio_purge_over_delivery"] >= 1.0
    if plot is not None:
        bar_plot(plot, "letterlog purge vs intake and raw deletes", {
            "letterlog purge": purge_rate, "letterlog single delivery": delivery,
            "raw SQLite row deletes": raw_deletes}, "messages/s")
        result["plot"] = str(plot)
    return result
