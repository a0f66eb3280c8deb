"""The HBase load of a rebuild against raw happybase (``bench rebuild --engine spark``).

The cells a fold of the first ``events`` events leaves, written through the project's HBase
table store (Thrift2: every cell at its version; what each Spark task does) and through
plain happybase batches of the same cells (``devtools.bench.stream``'s baselines:
unversioned, and one batch per version), on an HBase started here.
"""

from __future__ import annotations

import time
from typing import Any


def _rate(n: float, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else 0.0


def hbase_load(reader: Any, events: int) -> dict[str, Any]:
    """The fold's cells through HBaseTableStore.apply vs plain happybase batch puts."""
    import secrets

    from adapters.tables.hbase import HBaseTableStore
    from devtools.bench.stream import _baselines
    from devtools.devservers import HBaseServer
    from projections.registry import ALL, TRACKING_SPEC
    from projections.runner import ProjectionRunner
    from projections.tablestore import Put

    captured: list[Any] = []

    class _Capture:
        def get_cells(self, table: str, row: bytes, columns: Any = None) -> dict[Any, Any]:
            return {}

        def create_table(self, spec: Any) -> None:
            pass

        def get(self, table: str, row: bytes, columns: Any = None) -> dict[Any, Any]:
            return {}

        def apply(self, mutations: Any) -> None:
            captured.extend(m for m in mutations if type(m) is Put)

    runner = ProjectionRunner(_Capture(), ALL, fold_max_cells=10**9)  # type: ignore[arg-type]
    runner.apply_events(reader.events(start=1, stop=events), fold=True)
    puts = [m for m in captured if m.table != TRACKING_SPEC.name]
    specs = [spec for p in ALL for spec in p.tables]
    with HBaseServer() as hbase:
        prefix = "sb" + secrets.token_hex(3)
        store = HBaseTableStore(hbase.thrift_host, hbase.thrift_port, table_prefix=prefix,
                                thrift2_port=hbase.thrift2_port)
        try:
            for spec in specs:
                store.create_table(spec)
            t0 = time.perf_counter()
            for i in range(0, len(puts), 20_000):
                store.apply(puts[i:i + 20_000])
            seconds = time.perf_counter() - t0
        finally:
            for table in store.list_tables():
                store.drop_table(table)
            store.close()
        raw = _baselines(puts, specs, hbase.thrift_host, hbase.thrift_port, prefix + "r",
                         5000, events, versioned=True)
    rate = _rate(len(puts), seconds)
    return {"events": events, "cells": len(puts), "write_path": "thrift2",
            "letterlog_store_cells_per_s": rate,
            "letterlog_store_seconds": round(seconds, 2), "raw": raw,
            "hbase_load_ratio": round(rate / raw["raw_batch"]["cells_per_s"], 3)
            if raw["raw_batch"]["cells_per_s"] else None,
            "hbase_load_ratio_versioned": round(
                rate / raw["raw_batch_versioned"]["cells_per_s"], 3)
            if raw["raw_batch_versioned"]["cells_per_s"] else None}
