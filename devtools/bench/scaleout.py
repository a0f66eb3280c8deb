"""``letterlog bench ingest --scale-out``: deliveries on the scale-out path (log in PostgreSQL,
tables in HBase: the command side alone, as an MTA-facing host runs it) with payloads in this
host's files vs in HBase's payload table (ADR 0072), same run, same servers.

Two mixes: the ingest benchmark's mail (~4 KiB median, every 20th with a 30-60 KiB
attachment: a payload) and mail that is all payloads (those attachments alone); two ways:
one message per command, and an import's batches of 100 (``deliver_many``: a batch's
payloads are put together). Each leg delivers into a fresh PostgreSQL database and HBase
table prefix (no dedup between legs); the legs alternate files, HBase, files, HBase so that
the machine's drift falls on both. Reported: messages/s per run and their mean, this
process's CPU per delivery, and the ratio HBase / files.

Servers: PostgreSQL and HBase are started through ``devtools.devservers`` unless
``use_running`` names running ones (``LETTERLOG_POSTGRES_DSN`` is then an admin's DSN that
may create databases).
"""

from __future__ import annotations

import hashlib
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from adapters.demo.benchmail import bench_messages
from adapters.demo.mailgen import PEOPLE
from devtools.bench.common import rate

LEGS = ("files", "hbase", "files", "hbase")
WAYS = ("single", "batched")  # one delivery per command; deliver_many of BATCH
BATCH = 100
INLINE = 10 * 1024  # LETTERLOG_INLINE_LIMIT's default: a larger message is a payload


def _mixes(messages: int) -> dict[str, list[bytes]]:
    mail = bench_messages(messages)
    return {"bench_mail": mail,
            "all_payloads": bench_messages(messages * 20, seed=2)[::20]}


@contextmanager
def _database(admin_dsn: str, user: str, base_dsn: str) -> Iterator[str]:
    import psycopg
    from psycopg import sql

    name = f"bench_{secrets.token_hex(5)}"
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
            sql.Identifier(name), sql.Identifier(user)))
    try:
        yield base_dsn.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))


def _leg(blobs: list[bytes], where: str, way: str, dsn: str, hbase: tuple[str, int],
         prefix: str, root: Path) -> dict[str, float]:
    from adapters.bootstrap import letterlog
    from adapters.config.settings import load_settings
    from adapters.embedded import Letterlog

    data = root / f"{where}-{secrets.token_hex(3)}"
    settings = load_settings(data=data, event_store="postgres", postgres_dsn=dsn,
                             table_store="hbase", hbase_host=hbase[0], hbase_port=hbase[1],
                             hbase_table_prefix=prefix, payload_store=where,
                             durability="full")
    store = letterlog(settings, facade=Letterlog, read_models=False)
    try:
        recipients = [f"{p}@example.org" for p in PEOPLE]
        for r in recipients:
            store.create_mailbox(r, "Bench", create_account=True)
        store.deliver(account=recipients[0], raw=blobs[0])  # connects HBase (untimed)
        t0, c0 = time.perf_counter(), time.process_time()
        if way == "single":
            for i, blob in enumerate(blobs[1:], 1):
                store.deliver(account=recipients[i % len(recipients)], raw=blob)
        else:  # an import's batches: their payloads are put together (put_many's threads)
            for start in range(1, len(blobs), BATCH):
                store.deliver_many([{"account": recipients[i % len(recipients)], "raw": blob}
                                    for i, blob in enumerate(blobs[start:start + BATCH],
                                                             start)])
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        stored = sum(1 for _ in store.payloads.list())
    finally:
        store.close()
    in_files = sum(1 for _ in (data / "payloads").glob("??/*"))
    if stored != len({hashlib.sha256(b).digest() for b in blobs if len(b) > INLINE}) or (
            in_files != (stored if where == "files" else 0)):
        raise RuntimeError(f"payloads in {where}: {stored} stored, {in_files} files")
    n = len(blobs) - 1
    return {"msgs_per_s": rate(n, seconds), "cpu_ms_per_delivery": round(cpu * 1000 / n, 3)}


def bench_scaleout_payloads(messages: int = 1000, *, plot: Path | None = None,
                            use_running: Any = None,
                            progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """See the module docstring. ``use_running``: settings naming running servers."""
    from adapters.tables.hbase import HBaseTableStore

    mixes = _mixes(messages)
    tag = secrets.token_hex(3)
    prefix = f"bp{tag}"
    started: dict[str, float] = {}
    with ExitStack() as stack:
        if use_running is None:
            from devtools.devservers import HBaseServer, PostgresServer

            pg = stack.enter_context(PostgresServer())
            admin, user, base = pg.admin_dsn, pg.user, pg.dsn
            hb = stack.enter_context(HBaseServer())
            hbase = (hb.thrift_host, int(hb.thrift_port))
            started = {"postgres_s": round(pg.startup_seconds or 0, 1),
                       "hbase_s": round(hb.startup_seconds or 0, 1)}
        else:
            admin = base = str(use_running.postgres_dsn)
            user = admin.split("://", 1)[1].split(":", 1)[0].split("@", 1)[0]
            hbase = (use_running.hbase_host, int(use_running.hbase_port))
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-scaleout-")))
        runs: dict[tuple[str, str, str], list[dict[str, float]]] = {}
        legs = 0
        try:
            for mix, blobs in mixes.items():
                for way in WAYS:
                    for where in LEGS:  # each leg its own database and HBase tables: no dedup
                        progress(f"{mix}, {way}: payloads in {where}")
                        legs += 1
                        with _database(admin, user, base) as dsn:
                            runs.setdefault((mix, way, where), []).append(_leg(
                                blobs, where, way, dsn, hbase, f"{prefix}{legs}", root))
        finally:
            for leg in range(1, legs + 1):
                tables = HBaseTableStore(*hbase, table_prefix=f"{prefix}{leg}")
                for table in tables.list_tables():
                    tables.drop_table(table)
                tables.close()
    result: dict[str, Any] = {"benchmark": "ingest-scale-out-payloads", "messages": messages,
                              "durability": "full", "servers_started": started, "mixes": {}}
    for mix, blobs in mixes.items():
        over = sum(len(b) > INLINE for b in blobs)
        summary: dict[str, Any] = {
            "median_message_bytes": int(statistics.median(len(b) for b in blobs)),
            "with_payload": over}
        for way in WAYS:
            part: dict[str, Any] = {}
            for where in ("files", "hbase"):
                measured = runs[mix, way, where]
                part[where] = {
                    "runs_msgs_per_s": [leg["msgs_per_s"] for leg in measured],
                    "msgs_per_s": round(statistics.fmean(
                        leg["msgs_per_s"] for leg in measured), 1),
                    "cpu_ms_per_delivery": round(statistics.fmean(
                        leg["cpu_ms_per_delivery"] for leg in measured), 3)}
            part["ratio_hbase_to_files"] = round(
                part["hbase"]["msgs_per_s"] / part["files"]["msgs_per_s"], 3)
            summary[way] = part
        result["mixes"][mix] = summary
    if plot is not None:
        from devtools.bench.ingest import bar_plot

        bar_plot(plot, "scale-out deliveries: payloads in files vs in HBase", {
            f"{mix}, {way}, {where}": result["mixes"][mix][way][where]["msgs_per_s"]
            for mix in mixes for way in WAYS for where in ("files", "hbase")}, "messages/s")
        result["plot"] = str(plot)
    return result
