"""``letterlog bench ingest --hosts``: single deliveries on the scale-out path from one
application host and from two at once, same run, same servers.

The deployment of docs/operations.md ("Many application hosts"): the log in PostgreSQL, the
key-encryption keys in the key cluster, payloads over the inline limit and the tables in
HBase. An application host is a process of its own with a data directory of its own (on one
machine a network namespace per host would change where the packets go, not the CPU they
cost: tests/services/test_multihost.py covers the network). Each leg delivers ``messages``
in all into a fresh log database, key database and HBase table prefix, to the same accounts:
one host delivers them all, or two hosts deliver half each at once (they start together).
The legs run one, two, two, one, so that the machine's drift falls on both. Reported: the
legs' messages/s (all the hosts' deliveries over the wall time from the common start to the
last host's end), the hosts' CPU per delivery, and the ratio two / one. The two hosts share
this machine's cores with each other and with the servers: the ratio says what a second host
costs or gains here, the CPU per delivery what a delivery costs wherever it runs.
"""

from __future__ import annotations

import multiprocessing
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from adapters.demo.benchmail import bench_messages
from adapters.demo.mailgen import PEOPLE
from devtools.bench.common import rate
from devtools.bench.scaleout import _database

LEGS = (1, 2, 2, 1)  # hosts delivering at once


def _settings(data: Path, servers: dict[str, Any]) -> Any:
    from adapters.config.settings import load_settings

    return load_settings(data=data, event_store="postgres", postgres_dsn=servers["dsn"],
                         key_store_dsn=servers["key_dsn"], table_store="hbase",
                         hbase_host=servers["hbase"][0], hbase_port=servers["hbase"][1],
                         hbase_table_prefix=servers["prefix"], durability="full")


def _host(data: str, servers: dict[str, Any], blobs: list[bytes], start: Any,
          results: Any) -> None:
    """One application host: opens the store on its own data directory, waits for the
    others, delivers ``blobs`` one by one; puts (seconds, CPU seconds, deliveries)."""
    from adapters.bootstrap import letterlog
    from adapters.embedded import Letterlog

    store = letterlog(_settings(Path(data), servers), facade=Letterlog, read_models=False)
    try:
        recipients = [f"{p}@example.org" for p in PEOPLE]
        start.wait()
        t0, c0 = time.perf_counter(), time.process_time()
        for i, blob in enumerate(blobs):
            store.deliver(account=recipients[i % len(recipients)], raw=blob)
        results.put((time.perf_counter() - t0, time.process_time() - c0, len(blobs)))
    finally:
        store.close()


def _leg(hosts: int, blobs: list[bytes], servers: dict[str, Any],
         root: Path) -> dict[str, float]:
    from adapters.bootstrap import letterlog
    from adapters.embedded import Letterlog

    setup = root / f"setup-{secrets.token_hex(3)}"
    store = letterlog(_settings(setup, servers), facade=Letterlog, read_models=False)
    try:  # the accounts, and the first connections to every server (untimed)
        for person in PEOPLE:
            store.create_mailbox(f"{person}@example.org", "Bench", create_account=True)
        store.deliver(account=f"{PEOPLE[0]}@example.org", raw=blobs[0])
    finally:
        store.close()
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(hosts + 1), ctx.Queue()
    shares = [blobs[1:][i::hosts] for i in range(hosts)]
    procs = [ctx.Process(target=_host, args=(str(root / f"host-{i}-{secrets.token_hex(3)}"),
                                               servers, share, start, results))
             for i, share in enumerate(shares)]
    for p in procs:
        p.start()
    start.wait(timeout=600)
    t0 = time.perf_counter()
    measured = [results.get(timeout=3600) for _ in procs]
    wall = time.perf_counter() - t0
    for p in procs:
        p.join(timeout=120)
    if any(p.exitcode != 0 for p in procs):
        raise RuntimeError(f"a host failed: exit codes {[p.exitcode for p in procs]}")
    n = sum(m[2] for m in measured)
    return {"msgs_per_s": rate(n, wall),
            "cpu_ms_per_delivery": round(sum(m[1] for m in measured) * 1000 / n, 3),
            "hosts_msgs_per_s": [rate(m[2], m[0]) for m in measured]}


def bench_hosts(messages: int = 1000, *, plot: Path | None = None,
                progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """See the module docstring. Starts PostgreSQL, the key cluster and HBase (dev
    servers) for the run."""
    from adapters.tables.hbase import HBaseTableStore
    from devtools.devservers import HBaseServer, PostgresServer
    from devtools.devservers.keycluster import KeyClusterServer

    blobs = bench_messages(messages + 1)
    tag = secrets.token_hex(3)
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    with ExitStack() as stack:
        progress("starting PostgreSQL, the key cluster and HBase")
        pg = stack.enter_context(PostgresServer())
        keys = stack.enter_context(KeyClusterServer())
        hb = stack.enter_context(HBaseServer())
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-hosts-")))
        prefixes = []
        try:
            for leg, hosts in enumerate(LEGS, 1):
                progress(f"leg {leg}/{len(LEGS)}: {hosts} host(s), {messages} messages")
                prefix = f"bh{tag}{leg}"
                prefixes.append(prefix)
                with _database(pg.admin_dsn, pg.user, pg.dsn) as dsn, \
                        _database(keys.admin_dsn, keys.user, keys.dsn) as key_dsn:
                    servers = {"dsn": dsn, "key_dsn": key_dsn, "prefix": prefix,
                               "hbase": (hb.thrift_host, int(hb.thrift_port))}
                    runs[hosts].append(_leg(hosts, blobs, servers, root))
        finally:
            for prefix in prefixes:
                tables = HBaseTableStore(hb.thrift_host, int(hb.thrift_port),
                                         table_prefix=prefix)
                for table in tables.list_tables():
                    tables.drop_table(table)
                tables.close()
    result: dict[str, Any] = {"benchmark": "ingest-hosts", "messages": messages,
                              "durability": "full", "legs": list(LEGS), "hosts": {}}
    for hosts, measured in runs.items():
        result["hosts"][str(hosts)] = {
            "runs_msgs_per_s": [leg["msgs_per_s"] for leg in measured],
            "msgs_per_s": round(statistics.fmean(leg["msgs_per_s"] for leg in measured), 1),
            "cpu_ms_per_delivery": round(statistics.fmean(
                leg["cpu_ms_per_delivery"] for leg in measured), 3),
            "per_host_msgs_per_s": [leg["hosts_msgs_per_s"] for leg in measured]}
    result["ratio_two_to_one"] = round(
        result["hosts"]["2"]["msgs_per_s"] / result["hosts"]["1"]["msgs_per_s"], 3)
    if plot is not None:
        from devtools.bench.ingest import bar_plot

        bar_plot(plot, "scale-out single deliveries: one application host vs two at once", {
            f"{hosts} host{'s' if hosts > 1 else ''}": result["hosts"][str(hosts)]["msgs_per_s"]
            for hosts in (1, 2)}, "messages/s")
        result["plot"] = str(plot)
    return result
