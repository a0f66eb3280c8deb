"""``letterlog bench ingest --key-store``: single deliveries on the scale-out log
(PostgreSQL, read models left to the workers) with the KEKs in the vault file and in the
key cluster (ADR 0073), in the same run, in the order A B B A so that a drift of the
machine's pace falls on both alike. Throw-away servers: a PostgreSQL for the log, a key
cluster for the KEKs."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from adapters.demo.benchmail import bench_messages
from adapters.demo.mailgen import PEOPLE
from devtools.bench.scaleout import _database

ROUNDS = 2


def _run(blobs: list[bytes], data: Path, dsn: str, key_dsn: str | None) -> dict[str, float]:
    from adapters.bootstrap import letterlog
    from adapters.config.settings import load_settings
    from adapters.embedded import Letterlog

    data.mkdir(parents=True)
    # no HBase here: the bench isolates the keys; the few payloads go to this host's files
    settings = load_settings(data=data, event_store="postgres", postgres_dsn=dsn,
                             key_store_dsn=key_dsn, table_store="hbase", payload_store="files")
    store = letterlog(settings, facade=Letterlog, read_models=False)
    recipients = [f"{p}@example.org" for p in PEOPLE]
    try:
        for r in recipients:
            store.create_mailbox(r, "Bench", create_account=True)
        wall, cpu = time.perf_counter(), time.process_time()
        for i, blob in enumerate(blobs):
            store.deliver(account=recipients[i % len(recipients)], raw=blob)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        keys: Any = store.log.keys  # the hierarchy's (WrappedKeyStore): its key counts
        keks = keys.count()["keks"]
    finally:
        store.close()
    return {"msgs_per_s": round(len(blobs) / wall, 1),
            "cpu_ms_per_delivery": round(cpu / len(blobs) * 1000, 3), "keks": keks}


def bench_keystore(messages: int = 1000, *, plot: Path | None = None,
                   progress: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    from devtools.devservers.keycluster import KeyClusterServer
    from devtools.devservers.postgres import PostgresServer

    blobs = bench_messages(messages)
    runs: dict[str, list[dict[str, float]]] = {"vault_file": [], "key_cluster": []}
    with PostgresServer() as pg, KeyClusterServer() as keys, \
            tempfile.TemporaryDirectory(prefix="letterlog-bench-keys-") as tmp:
        for n in range(ROUNDS):
            for kind in (list(runs) if n % 2 == 0 else list(runs)[::-1]):  # A B, then B A
                progress(f"round {n + 1}: {kind}")
                with ExitStack() as dbs:  # fresh databases, the scale-out bench's helper
                    dsn = dbs.enter_context(_database(pg.admin_dsn, pg.user, pg.dsn))
                    key_dsn = (dbs.enter_context(_database(keys.admin_dsn, keys.user, keys.dsn))
                               if kind == "key_cluster" else None)
                    runs[kind].append(_run(blobs, Path(tmp) / f"{kind}-{n}", dsn, key_dsn))
    summary: dict[str, dict[str, Any]] = {
               kind: {"msgs_per_s": statistics.median(r["msgs_per_s"] for r in rs),
                      "cpu_ms_per_delivery": statistics.median(
                          r["cpu_ms_per_delivery"] for r in rs),
                      "keks": rs[0]["keks"], "runs": rs}
               for kind, rs in runs.items()}
    result: dict[str, Any] = {
        "benchmark": "ingest-key-store",
        "messages": len(blobs),
        "path": "scale-out: PostgreSQL log, read models left to the workers, durability full",
        **summary,
        "ratio_key_cluster_to_vault_file": round(
            summary["key_cluster"]["msgs_per_s"] / summary["vault_file"]["msgs_per_s"], 3),
    }
    if plot is not None:
        from devtools.bench.ingest import bar_plot

        bar_plot(plot, "single deliveries on scale-out: KEKs in the vault file vs the key "
                       "cluster", {k: v["msgs_per_s"] for k, v in summary.items()},
                 "messages/s")
        result["plot"] = str(plot)
    return result
