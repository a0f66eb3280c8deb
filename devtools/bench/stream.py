"""``bench_stream``: events/s end to end (relay -> Kafka -> stream worker -> HBase) against raw
happybase batch writes of the same cells, in the same run.

* **End to end**: the cached benchmark log (``devtools.bench.benchlog.bench_log``: at least
  ``events`` events through the real aggregates) is published by an ``OutboxRelay`` to a
  fresh topic while ``workers`` stream workers (``python -m adapters.cli.worker``
  subprocesses, one consumer group, their data directory holding a copy of the log's data
  keys: ``worker_data``) project it into fresh HBase tables. The clock runs from
  the relay's start until Kafka reports every record committed by the group (offsets are
  committed only after the cells are written). The tables are then checked cell for cell
  against a fold of the log (``verify_tables``). Workers write through Thrift2 (a timestamp
  per cell) when the HBase server has a Thrift2 gateway, else through Thrift1 (one call per
  version); ``write_path`` in the result says which.
* **Baseline**: the very cells a live ``ProjectionRunner`` writes for the same events
  (captured from ``apply``), written through plain happybase ``table.batch(batch_size=...)``
  into fresh tables with the same families:

  - ``raw_batch``: no explicit timestamps, one batch per table -- the fastest HBase writes
    happybase can do on this machine (what the target is measured against);
  - ``raw_batch_versioned``: the cells with their versions, one ``table.batch(timestamp=v)``
    per (table, version) -- Thrift1 carries one timestamp per call, so this is what writing
    letterlog's versioned cells costs through happybase, whoever does it.

Servers are started here through ``devtools.devservers`` unless ``bootstrap`` / ``hbase``
(``host:port`` of a Thrift1 server) are given; ``running_servers(settings)`` gives them from
the ``LETTERLOG_*`` settings (``letterlog bench stream --use-running``). Results are a
JSON-able dict.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from adapters.config.settings import StreamOptions

log = logging.getLogger("letterlog")
TARGET_RATIO = 0.6  # end to end over the raw happybase batch of the same cells (issue 44)
WARM_UP_EVENTS = 20_000  # untimed, before the timed run (see bench_stream)
STREAM_BATCH = StreamOptions().batch  # the workers' default
ROOT = Path(__file__).resolve().parents[2]


def _rate(n: float, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else 0.0


class _Capture:
    """A table store whose ``apply`` keeps the puts and forwards everything."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.puts: list[Any] = []
        self.deletes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def apply(self, mutations: Any) -> None:
        from projections.tablestore import Put

        mutations = list(mutations)
        for m in mutations:
            if type(m) is Put:
                self.puts.append(m)
            else:
                self.deletes += 1
        self.store.apply(mutations)


def _wait(condition: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"bench_stream: timed out waiting for {what}")
        time.sleep(0.2)


def _describe_group(bootstrap: str, group: str) -> dict[str, Any] | None:
    """The group as its coordinator describes it (state, members with their raw assignment),
    or ``None`` when it is not known yet."""
    async def ask() -> dict[str, Any] | None:
        from aiokafka.admin import AIOKafkaAdminClient

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            [described] = await admin.describe_consumer_groups([group])
        finally:
            await admin.close()
        for g in described.to_object()["groups"]:  # the raw DescribeGroups response
            if g["group"] == group:
                return dict(g)
        return None

    return asyncio.run(asyncio.wait_for(ask(), 30))


def group_assignment(described: dict[str, Any], topic: str) -> dict[str, list[int]]:
    """The partitions of ``topic`` each member of a described group was given: ``{member id:
    sorted partitions}``, decoded from the members' assignments as the coordinator keeps them
    (the consumer protocol's ``MemberAssignment``, which aiokafka's assignors send)."""
    from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment

    out: dict[str, list[int]] = {}
    for m in described["members"]:
        raw = m["member_assignment"]
        partitions: list[int] = []
        if raw:
            decoded = ConsumerProtocolMemberAssignment.decode(raw)
            partitions = sorted(p for t, ps in decoded.assignment if t == topic for p in ps)
        out[str(m["member_id"])] = partitions
    return out


def worker_balance(records_per_partition: dict[int, int],
                   assignment: dict[str, list[int]]) -> dict[str, Any]:
    """How the records were shared out: per worker (in the order of ``assignment``) the
    records of the partitions it was assigned, and ``busiest_worker_share``, the busiest
    worker's part of all records (``1/workers`` is perfect balance, 1.0 one worker did
    everything). A partition assigned to no worker is counted under ``unassigned``."""
    owner = {p: w for w, ps in assignment.items() for p in ps}
    per_worker = {w: sum(records_per_partition.get(p, 0) for p in ps)
                  for w, ps in assignment.items()}
    unassigned = sum(n for p, n in records_per_partition.items() if p not in owner)
    total = sum(records_per_partition.values())
    busiest = max(per_worker.values(), default=0)
    return {"records_per_worker": sorted(per_worker.values(), reverse=True),
            "partitions_per_worker": [sorted(assignment[w]) for w in
                                      sorted(assignment, key=lambda w: -per_worker[w])],
            "unassigned_records": unassigned,
            "busiest_worker_share": round(busiest / total, 3) if total else None}


def _described(bootstrap: str, group: str) -> dict[str, Any]:
    """``_describe_group`` for the balance figures: a group that cannot be described (yet, or
    any more) is an empty one, so a finished run is never lost to it."""
    try:
        found = _describe_group(bootstrap, group)
    except Exception as error:  # noqa: BLE001 - the figures are extra; the run stands
        log.warning("bench stream: describing group %s failed: %s", group, error)
        found = None
    return found or {"members": [], "state": None}


def _group_stable(bootstrap: str, group: str, members: int) -> bool:
    try:
        g = _describe_group(bootstrap, group)
    except Exception:  # noqa: BLE001 - not there yet
        return False
    return bool(g and g["state"] == "Stable" and len(g["members"]) >= members)


class _CommittedProbe:
    """The group's committed offsets, summed over the topic's partitions, through one
    long-lived admin client (one OffsetFetch request to the group's coordinator per call):
    what the benchmark polls for its end time. Starting a client per poll (``kafka_lag``: an
    admin client and a consumer, metadata, end offsets and a fetched record) costs this
    process far more CPU than the question needs, CPU the pipeline it times is short of on
    two cores."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self._runner = asyncio.Runner()
        self._admin: Any = None
        self._coordinator: int | None = None

    def committed(self) -> int:
        return self._runner.run(asyncio.wait_for(self._committed(), 30))

    async def _committed(self) -> int:
        if self._admin is None:
            from aiokafka.admin import AIOKafkaAdminClient

            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
            await admin.start()
            self._admin = admin
        if self._coordinator is None:
            self._coordinator = await self._admin.find_coordinator(self.group)
        try:
            offsets = await self._admin.list_consumer_group_offsets(
                self.group, group_coordinator_id=self._coordinator)
        except Exception:
            self._coordinator = None  # moved, or not there yet: ask again next time
            raise
        return sum(o.offset for tp, o in offsets.items()
                   if tp.topic == self.topic and o.offset > 0)

    def close(self) -> None:
        try:
            if self._admin is not None:
                self._runner.run(self._admin.close())
        finally:
            self._admin = None
            self._runner.close()


def worker_data(events_path: Path, data: Path) -> Path:
    """``data``, a workers' data directory holding a copy of the data keys of the log at
    ``events_path`` (``keys.sqlite`` and ``vault.sqlite`` beside it, copied with SQLite's
    backup so a reader's open WAL is included). A stream worker opens the key store beside its
    data (``adapters.bootstrap.key_store``) to open sealed events (a move's or a copy's
    ``personal``, ADR 0081): in a fresh directory it finds none, dead-letters every sealed
    record, and the tables differ from a fold of the log."""
    import sqlite3

    from adapters.files.datadir import KEYS, VAULT
    from adapters.files.filemodes import DIR_MODE

    data.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    os.chmod(data, DIR_MODE)
    for name in (KEYS, VAULT):
        source = events_path.parent / name
        if not source.exists():
            continue
        target = data / name
        target.touch(mode=0o600)
        os.chmod(target, 0o600)
        src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
        finally:
            dst.close()
            src.close()
    return data


def _workers(n: int, env: dict[str, str], logs: Path) -> list[subprocess.Popen[bytes]]:
    procs = []
    for i in range(n):
        out = open(logs / f"worker-{i}.log", "wb")  # noqa: SIM115 - the child owns it
        procs.append(subprocess.Popen([sys.executable, "-m", "adapters.cli.worker"],
                                      cwd=ROOT, env={**os.environ, **env},
                                      stdout=out, stderr=subprocess.STDOUT))
        out.close()
    return procs


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process so far (``/proc``; ``None`` elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine_cpu() -> tuple[float, float] | None:
    """(busy, idle) CPU seconds of the whole machine since boot, all cores (``/proc/stat``;
    ``None`` elsewhere). Idle counts iowait."""
    try:
        with open("/proc/stat") as fh:
            ticks = [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    hz = os.sysconf("SC_CLK_TCK")
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    busy = sum(ticks[:8]) - idle  # guest time is already inside user
    return busy / hz, idle / hz


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(30)


def running_servers(settings: Any) -> dict[str, Any]:
    """``bench_stream``'s server arguments from settings (``LETTERLOG_KAFKA_BOOTSTRAP``,
    ``LETTERLOG_HBASE_HOST``/``_PORT``/``_THRIFT2_PORT``): the servers already running, as
    ``python -m devtools.devservers up`` writes them into ``services.env``. A missing one is
    a ``SettingsError`` naming the variable."""
    from domain.errors import SettingsError

    if not settings.kafka_bootstrap:
        raise SettingsError("LETTERLOG_KAFKA_BOOTSTRAP: --use-running needs the running Kafka "
                            "(host:port; `set -a; . services.env; set +a`)")
    if settings.table_store != "hbase":
        raise SettingsError("LETTERLOG_TABLE_STORE: --use-running needs hbase (and "
                            "LETTERLOG_HBASE_HOST/LETTERLOG_HBASE_PORT of the running gateway)")
    return {"bootstrap": settings.kafka_bootstrap,
            "hbase": f"{settings.hbase_host}:{settings.hbase_port}",
            "thrift2_port": settings.hbase_thrift2_port}


def _baselines(puts: list[Any], specs: list[Any], host: str, port: int, prefix: str,
               batch_size: int, events: int, versioned: bool = False) -> dict[str, Any]:
    """Writes ``puts`` through plain happybase: unversioned, and with ``versioned`` again with
    each cell's version."""
    import happybase

    from adapters.tables.hbase import HBaseTableStore

    out: dict[str, Any] = {}
    legs = (("raw_batch", False), ("raw_batch_versioned", True))[:2 if versioned else 1]
    for label, versioned in legs:
        tag = f"{prefix}{'v' if versioned else 'u'}"
        store = HBaseTableStore(host, port, table_prefix=tag)
        try:
            for spec in specs:
                store.create_table(spec)
            conn = happybase.Connection(host, port, timeout=120_000)
            try:
                groups: dict[tuple[str, int | None], list[Any]] = {}
                for m in puts:
                    groups.setdefault((m.table, m.version if versioned else None), []).append(m)
                t0 = time.perf_counter()
                for (table, version), cells in groups.items():
                    t = conn.table(store.physical_name(table))
                    with t.batch(timestamp=version, batch_size=batch_size) as b:
                        for m in cells:
                            b.put(m.row, {m.column: m.value})
                seconds = time.perf_counter() - t0
            finally:
                conn.close()
            out[label] = {"seconds": round(seconds, 2), "cells": len(puts),
                          "calls": len(groups) if versioned else None,
                          "cells_per_s": _rate(len(puts), seconds),
                          "events_per_s": _rate(events, seconds)}
        finally:
            for table in store.list_tables():
                store.drop_table(table)
            store.close()
    return out


def _projector_in_process(reader: Any, head: int, host: str, port: int,
                          thrift2_port: int | None, prefix: str, partitions: int,
                          batch: int) -> dict[str, Any]:
    """The workers' ``StreamProjector`` alone, in this process, on the same records (keyed and
    partitioned as the relay does, in batches of ``batch``) into fresh tables on the same
    HBase: what one worker could do with Kafka and the relay taking no CPU."""
    from aiokafka.partitioner import DefaultPartitioner

    from adapters.bootstrap.tables import stream_tables
    from adapters.config.settings import load_settings
    from adapters.eventlog.records import account_key, record_from_notification
    from adapters.readside.catalog import Catalog
    from adapters.streaming.projector import Record, StreamProjector

    recorder = reader.log.recorder
    choose, ids, offsets = DefaultPartitioner(), list(range(partitions)), [0] * partitions
    records: list[Any] = []
    start = 1
    while True:
        notes = recorder.select_notifications(start=start, limit=10_000, stop=head)
        if not notes:
            break
        for n in notes:
            key = account_key(n.originator_id, n.topic, bytes(n.state))
            p = choose(key, ids, ids)
            records.append(Record(topic="bench", partition=p, offset=offsets[p],
                                  value=record_from_notification(n).encode(), key=key,
                                  timestamp=0.0))
            offsets[p] += 1
        start = notes[-1].id + 1
    # the table store a worker builds from its settings (pool, Thrift2 gateway)
    store = stream_tables(load_settings(table_store="hbase", hbase_host=host, hbase_port=port,
                                        hbase_table_prefix=prefix,
                                        hbase_thrift2_port=thrift2_port or 0))
    try:
        projector = StreamProjector(store, ["bench"], catalog=Catalog(store))
        projector.create_tables()
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(0, len(records), batch):
            projector.apply(records[i:i + batch])
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        projector.close()
    finally:
        for table in store.list_tables():
            store.drop_table(table)
        store.close()
    return {"seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2),
            "events_per_s": _rate(len(records), seconds),
            "cpu_us_per_event": round(cpu * 1e6 / len(records), 1) if records else None}


def bench_stream(events: int = 100_000, plot: Path | None = None, *,
                 bootstrap: str | None = None, hbase: str | None = None,
                 thrift2_port: int | None = None, write_path: str = "thrift2",
                 partitions: int = 4, workers: int = 2, batch: int = STREAM_BATCH,
                 verify: bool = True, baseline_batch: int = 1000,
                 versioned_baseline: bool = False,
                 logs: Path | None = None, accounts: int | None = None,
                 warm_up: int = WARM_UP_EVENTS) -> dict[str, Any]:
    """End-to-end stream projection rate vs raw happybase batch writes of the same cells.

    ``write_path``: how the workers write HBase -- ``"thrift2"`` (a timestamp per cell, when
    the server has a Thrift2 gateway: the one started here does; for a given ``hbase`` pass
    ``thrift2_port``) or ``"thrift1"`` (one call per version). ``versioned_baseline``: also
    write the cells through happybase with their versions (one call per (table, version):
    minutes on 100k events). ``logs``: a directory to keep the workers' logs in.
    ``accounts``: accounts in the log (``None``: the bench log's default for ``events``, 6
    for 100k). The log is partitioned by account, so with few accounts (the default's are
    Zipf-weighted) one worker gets most records; ``balance`` in the result says how many.
    ``warm_up``: before anything is timed, the workers' projector writes the log's first
    ``warm_up`` events through the workers' path (Thrift2 gateway, HBase) into tables dropped
    afterwards, untimed: HBase and its gateway were started seconds before, and the timed
    run would otherwise pay their JVMs' warm-up alone (the baseline runs after it, on warm
    ones). 0: no warm-up (``warm_up`` in the result says what ran)."""
    from adapters.readside.verification import verify_tables
    from adapters.streaming.relay import FilePosition, OutboxRelay
    from adapters.streaming.worker import kafka_lag
    from adapters.tables.hbase import HBaseTableStore
    from devtools.bench.benchlog import bench_log, open_reader
    from projections.registry import ALL
    from projections.runner import ProjectionRunner, identity

    path, meta = bench_log(events, accounts)
    tag = secrets.token_hex(3)
    topic, group, prefix = f"bench-stream-{tag}", f"bench-stream-{tag}", f"bs{tag}"
    with ExitStack() as stack:
        started: dict[str, float] = {}
        if bootstrap is None:
            from devtools.devservers import KafkaServer

            kafka = stack.enter_context(KafkaServer())
            bootstrap = kafka.bootstrap
            started["kafka_s"] = round(kafka.startup_seconds or 0, 1)
        if hbase is None:
            from devtools.devservers import HBaseServer

            server = stack.enter_context(HBaseServer())
            host, port = server.thrift_host, int(server.thrift_port)
            thrift2_port = int(getattr(server, "thrift2_port", 0) or 0) or None
            started["hbase_s"] = round(server.startup_seconds or 0, 1)
        else:
            host, _, raw_port = hbase.rpartition(":")
            port = int(raw_port)
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-stream-")))
        reader = open_reader(path)
        stack.callback(reader.close)
        recorder = reader.log.recorder
        head = int(recorder.max_notification_id() or 0)

        # -- warm-up (untimed): the servers' JVMs compile their write paths ------------------
        used = "thrift2" if write_path == "thrift2" and thrift2_port else "thrift1"
        warmed: dict[str, Any] = {"events": 0}
        if warm_up > 0:
            alone = _projector_in_process(reader, min(head, warm_up), host, port,
                                          thrift2_port if used == "thrift2" else None,
                                          prefix + "w", partitions, batch)
            warmed = {"events": min(head, warm_up), "seconds": alone["seconds"],
                      "events_per_s": alone["events_per_s"]}

        # -- end to end ----------------------------------------------------------------------
        relay = OutboxRelay(lambda start, limit: recorder.select_notifications(start=start,
                                                                              limit=limit),
                            bootstrap, topic, FilePosition(tmp / "relay.position"),
                            batch=1000, partitions=partitions)
        stack.callback(relay.close)
        relay.run_once(max_events=0)  # creates the topic
        tables = HBaseTableStore(host, port, table_prefix=prefix)
        stack.callback(tables.close)
        # the workers open the log's data keys, as a deployment's workers do (sealed events)
        data = worker_data(path, tmp / "worker")
        env = {"LETTERLOG_DATA": str(data), "LETTERLOG_KAFKA_BOOTSTRAP": bootstrap,
               "LETTERLOG_KAFKA_TOPIC": topic, "LETTERLOG_TABLE_STORE": "hbase",
               "LETTERLOG_HBASE_HOST": host, "LETTERLOG_HBASE_PORT": str(port),
               "LETTERLOG_HBASE_TABLE_PREFIX": prefix, "LETTERLOG_STREAM_GROUP": group,
               "LETTERLOG_STREAM_BATCH": str(batch), "LETTERLOG_STREAM_COMMIT_INTERVAL": "0.5"}
        if used == "thrift2":
            env["LETTERLOG_HBASE_THRIFT2_PORT"] = str(thrift2_port)
        # the tables exist before the clock starts (workers would create them on start)
        ProjectionRunner(tables, ALL).create_tables()
        if logs is not None:
            Path(logs).mkdir(parents=True, exist_ok=True)
        procs = _workers(workers, env, Path(logs) if logs is not None else tmp)
        stack.callback(_stop, procs)
        _wait(lambda: _group_stable(bootstrap, group, workers), 300, "the workers to join")
        assigned_at_start = group_assignment(_described(bootstrap, group), topic)

        relay_seconds: list[float] = []

        def publish() -> None:
            t = time.perf_counter()
            relay.run_once()
            relay_seconds.append(time.perf_counter() - t)

        cpu_before = [_cpu_seconds(p.pid) for p in procs]
        machine_before, own_before = _machine_cpu(), time.process_time()
        t0 = time.perf_counter()
        thread = threading.Thread(target=publish, name="bench-relay")
        thread.start()
        samples: list[tuple[float, int]] = []
        probe = _CommittedProbe(bootstrap, topic, group)
        stack.callback(probe.close)

        def done() -> bool:
            for p in procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a worker exited ({p.returncode}); see {tmp}")
            committed = probe.committed()
            samples.append((time.perf_counter() - t0, committed))
            return bool(relay_seconds) and committed >= head

        _wait(done, 3600, "every record to be committed")
        seconds = time.perf_counter() - t0
        cpu_after = [_cpu_seconds(p.pid) for p in procs]
        machine_after, own_after = _machine_cpu(), time.process_time()
        thread.join()
        described_end = _described(bootstrap, group)
        assigned_at_end = group_assignment(described_end, topic)
        _stop(procs)
        lag_end = kafka_lag(bootstrap, topic, group)
        duplicates = sum(p["end"] for p in lag_end["partitions"].values()) - head
        # records per partition as Kafka counts them (end offsets of the fresh topic)
        per_partition = {int(name.rpartition("/")[2]): p["end"]
                         for name, p in lag_end["partitions"].items()}
        balance = worker_balance(per_partition, assigned_at_end)
        balance["rebalanced"] = (sorted(assigned_at_start.values())
                                 != sorted(assigned_at_end.values()))
        balance["group_state_at_end"] = described_end.get("state")
        # each worker process's CPU over the timed run, largest first (not matched to members)
        balance["worker_cpu_s"] = sorted(
            (round(b - a, 2) for a, b in zip(cpu_before, cpu_after, strict=True)
             if a is not None and b is not None), reverse=True)
        workers_cpu = sum(balance["worker_cpu_s"])
        cpu: dict[str, Any] = {"workers_s": round(workers_cpu, 2),
                               "relay_and_probe_s": round(own_after - own_before, 2)}
        if machine_before is not None and machine_after is not None:
            busy = machine_after[0] - machine_before[0]
            idle = machine_after[1] - machine_before[1]
            cpu.update(cores=os.cpu_count(), machine_busy_s=round(busy, 2),
                       machine_idle_s=round(idle, 2),
                       # Kafka, HBase, its Thrift gateways -- and anything else running
                       rest_s=round(busy - workers_cpu - (own_after - own_before), 2))
        result: dict[str, Any] = {
            "events": head, "partitions": partitions, "workers": workers, "batch": batch,
            "write_path": used, "accounts": meta.get("accounts"),
            "busiest_worker_share": balance["busiest_worker_share"], "balance": balance,
            "servers_started_s": started,
            "servers": "started by the benchmark" if started else "already running",
            "warm_up": warmed,
            "end_to_end": {"seconds": round(seconds, 2), "events_per_s": _rate(head, seconds),
                           "relay_seconds": round(relay_seconds[0], 2),
                           "relay_events_per_s": _rate(head, relay_seconds[0]),
                           "records_per_partition": {k: v["end"] for k, v in
                                                     lag_end["partitions"].items()},
                           "duplicates": duplicates, "cpu": cpu},
            "log": {k: meta.get(k) for k in ("events", "accounts", "messages_delivered",
                                             "cached")},
        }
        if verify:
            t = time.perf_counter()
            reports = verify_tables(tables, identity, reader.events, ALL, head)
            result["verify"] = {"identical": all(r.identical for r in reports),
                                "tables": {r.table: r.identical for r in reports},
                                "cells": sum(r.live_cells for r in reports),
                                "seconds": round(time.perf_counter() - t, 1)}
        for table in tables.list_tables():
            tables.drop_table(table)

        # -- baseline: the same cells through plain happybase ----------------------------------
        from adapters.tables.memory import InMemoryTableStore

        capture = _Capture(InMemoryTableStore())
        runner = ProjectionRunner(capture, ALL)
        runner.create_tables()
        runner.apply_events(reader.events())
        specs = list(runner.table_specs)
        baselines = _baselines(capture.puts, specs, host, port, prefix + "raw", baseline_batch,
                               head, versioned_baseline)
        del capture
        result["baselines"] = baselines
        result["end_to_end"]["cells_per_s_equivalent"] = _rate(
            baselines["raw_batch"]["cells"], seconds)
        e2e = result["end_to_end"]["events_per_s"]
        raw = baselines["raw_batch"]["events_per_s"]
        result["ratio"] = round(e2e / raw, 3) if raw else None
        # the floor: the projector alone, no Kafka or relay, on the same HBase
        alone = _projector_in_process(reader, head, host, port,
                                      thrift2_port if used == "thrift2" else None,
                                      prefix + "p", partitions, batch)
        result["projector_in_process"] = alone
        result["ratio_projector_in_process"] = (round(alone["events_per_s"] / raw, 3)
                                                if raw else None)
        if "raw_batch_versioned" in baselines:
            versioned = baselines["raw_batch_versioned"]["events_per_s"]
            result["ratio_to_versioned"] = round(e2e / versioned, 3) if versioned else None
        result["target_ratio"] = TARGET_RATIO
        result["meets_target"] = bool(result["ratio"] and result["ratio"] >= TARGET_RATIO)
        result["progress"] = [(round(s, 1), c) for s, c in _thin(samples, 40)]
    if plot is not None:
        _plot(plot, result)
    return result


def _thin(samples: list[tuple[float, int]], n: int) -> Iterator[tuple[float, int]]:
    step = max(1, len(samples) // n)
    yield from samples[::step]
    if samples and (len(samples) - 1) % step:
        yield samples[-1]


def _plot(path: Path, result: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    bars_of = [(f"end to end ({result['write_path']})\nrelay→Kafka→worker→HBase",
                result["end_to_end"]["events_per_s"], "#4c72b0")]
    if "projector_in_process" in result:
        bars_of.append(("projector alone\n(no Kafka, one process)",
                        result["projector_in_process"]["events_per_s"], "#8fa8d0"))
    bars_of.append(("happybase batch\n(same cells)",
                    result["baselines"]["raw_batch"]["events_per_s"], "#999999"))
    if "raw_batch_versioned" in result["baselines"]:
        bars_of.append(("happybase batch\nper version",
                        result["baselines"]["raw_batch_versioned"]["events_per_s"], "#cccccc"))
    bars = left.bar([b[0] for b in bars_of], [b[1] for b in bars_of],
                    color=[b[2] for b in bars_of])
    left.tick_params(axis="x", labelsize=7)
    left.bar_label(bars, fmt="%.0f")
    left.set_ylabel("events/s")
    left.set_title(f"{result['events']:,} events, {result['workers']} worker(s), "
                   f"{result['partitions']} partitions")
    xs = [s for s, _ in result["progress"]]
    ys = [c for _, c in result["progress"]]
    right.plot(xs, ys)
    right.set_xlabel("seconds")
    right.set_ylabel("records committed")
    right.set_title("progress")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":  # pragma: no cover
    import json

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    logs = os.environ.get("LETTERLOG_BENCH_LOGS")
    port2 = os.environ.get("LETTERLOG_HBASE_THRIFT2_PORT")
    print(json.dumps(bench_stream(n, bootstrap=os.environ.get("LETTERLOG_KAFKA_BOOTSTRAP"),
                                  hbase=os.environ.get("LETTERLOG_BENCH_HBASE"),
                                  thrift2_port=int(port2) if port2 else None,
                                  write_path=os.environ.get("LETTERLOG_BENCH_WRITE_PATH",
                                                            "thrift2"),
                                  verify=os.environ.get("LETTERLOG_BENCH_VERIFY", "1") == "1",
                                  workers=int(os.environ.get("LETTERLOG_BENCH_WORKERS", "2")),
                                  versioned_baseline=os.environ.get(
                                      "LETTERLOG_BENCH_VERSIONED", "0") == "1",
                                  partitions=int(os.environ.get("LETTERLOG_BENCH_PARTITIONS",
                                                                "4")),
                                  logs=Path(logs) if logs else None,
                                  accounts=int(os.environ["LETTERLOG_BENCH_ACCOUNTS"])
                                  if os.environ.get("LETTERLOG_BENCH_ACCOUNTS") else None),
                     indent=2))
