"""A stream worker: an aiokafka consumer group member feeding ``StreamProjector``
(``adapters.streaming.projector``), Kafka the same way the relay uses it (ADR 0059).

Run N workers (same group id, topic with at least N partitions; ``docs/streaming.md``) through
the entry point ``adapters.cli.worker``, which builds the worker from the settings::

    letterlog worker                                       # settings from LETTERLOG_* variables
    python -m adapters.cli.worker                          # the same, through its main()

``StreamWorker.run`` collects what ``AIOKafkaConsumer.getmany`` returns into batches of up to
``batch`` records (or what came within ``within`` seconds of the first). Each batch is decoded
in a thread of its own while the batch before it is written, then applied in the apply thread
(``loop.run_in_executor``: happybase blocks; batches applied one at a time, in order), and
only when ``apply`` has returned -- every cell, dead letter and tracking row written -- are
the batch's offsets committed (``AIOKafkaConsumer.commit``; auto-commit is off). A worker that
dies before that has committed nothing of the batch; the next owner of the partitions gets it
again and the idempotent tables absorb the repeat. On a rebalance the listener
(``Revocation``) waits for the batch being written and commits it before the partitions go;
what was fetched but not applied is dropped (the partitions' next owner, this worker or
another, reads it again from the committed offsets). A failing table store is retried
(backoff, forever: nothing can progress without it) without committing anything.

Nothing here connects, reads settings or builds a part: ``create_worker`` is handed ``parts``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from aiokafka import ConsumerRebalanceListener

from adapters.settings import Settings, StreamOptions
from adapters.streaming.projector import BatchResult, Decoded, Record, StreamProjector
from projections.tablestore import TableStore

log = logging.getLogger("letterlog.stream")

__all__ = ["StreamWorker", "WorkerParts", "create_worker", "kafka_lag", "publish_lag"]


# -- metrics ------------------------------------------------------------------------------------

_gauges: dict[str, Any] = {}
_gauges_lock = threading.Lock()


def _metrics() -> dict[str, Any]:
    with _gauges_lock:
        if not _gauges:
            from prometheus_client import Counter, Gauge

            labels = ("topic", "partition")
            _gauges["events"] = Gauge("letterlog_stream_lag_events",
                                      "Records in Kafka not yet applied", labels)
            _gauges["seconds"] = Gauge("letterlog_stream_lag_seconds",
                                       "Age of the last applied event while records wait",
                                       labels)
            _gauges["applied"] = Counter("letterlog_stream_events_applied",
                                         "Events applied to the tables")
            _gauges["dead"] = Counter("letterlog_stream_dead_letters",
                                      "Records written to dead_letters")
        return _gauges


def publish_lag(lag: Mapping[str, Any]) -> None:
    """Sets the prometheus gauges from ``StreamProjector.lag``'s dict."""
    metrics = _metrics()
    for name, part in lag.get("partitions", {}).items():
        topic, _, partition = name.rpartition("/")
        metrics["events"].labels(topic, partition).set(part["events"])
        metrics["seconds"].labels(topic, partition).set(part["seconds"])


def kafka_lag(bootstrap: str, topic: str, group: str, *,
              timeout: float = 30.0) -> dict[str, Any]:
    """A consumer group's lag as Kafka sees it (any process can ask; no worker needed):
    per partition ``events`` = end offset - committed offset (from the log start when the
    group never committed), ``seconds`` = age of the oldest record not yet committed
    (its Kafka timestamp; 0 when caught up)."""
    return asyncio.run(asyncio.wait_for(_kafka_lag(bootstrap, topic, group), timeout))


async def _kafka_lag(bootstrap: str, topic: str, group: str) -> dict[str, Any]:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        committed = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                group_id=None)
    await consumer.start()
    try:
        await consumer.topics()  # fetches the cluster's metadata
        numbers = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(numbers)]
        ends = await consumer.end_offsets(tps) if tps else {}
        starts = await consumer.beginning_offsets(tps) if tps else {}
        parts: dict[str, dict[str, Any]] = {}
        now = time.time()
        for tp in tps:
            found = committed.get(tp)
            done = found.offset if found is not None and found.offset >= 0 else None
            events = ends[tp] - (done if done is not None else starts[tp])
            seconds = 0.0
            if events > 0:
                consumer.assign([tp])
                consumer.seek(tp, done if done is not None else starts[tp])
                fetched = await consumer.getmany(tp, timeout_ms=5000, max_records=1)
                for message in fetched.get(tp, [])[:1]:
                    seconds = max(0.0, now - message.timestamp / 1000)
            parts[f"{topic}/{tp.partition}"] = {"end": ends[tp], "committed": done,
                                                "events": events, "seconds": round(seconds, 3)}
    finally:
        await consumer.stop()
    return {"group": group, "topic": topic,
            "events": sum(p["events"] for p in parts.values()),
            "seconds": max((p["seconds"] for p in parts.values()), default=0.0),
            "partitions": parts}


# -- the worker's state -------------------------------------------------------------------------


def _hold(spec: str) -> Callable[[BatchResult], None] | None:
    """The ``test_hold`` hook: after the n-th batch's data is written (tracking and offsets
    not yet), create the file and hang until killed."""
    if not spec:
        return None
    path, _, count = spec.rpartition(":")
    remaining = [int(count)]

    def after_write(result: BatchResult) -> None:
        remaining[0] -= 1
        if remaining[0] == 0:
            Path(path).write_text(f"{os.getpid()} {result.as_dict()}\n")
            threading.Event().wait()

    return after_write


class WorkerParts(Protocol):
    """What a worker needs built from its settings (``adapters.bootstrap`` is one): handed
    over by the entry point (``adapters.cli.worker``), never fetched from here."""

    def key_store(self, settings: Settings) -> Any: ...

    def event_log(self, settings: Settings) -> Any: ...

    def stream_tables(self, settings: Settings, *,
                      timeout: float | None = None) -> TableStore: ...


class WorkerState:
    """The projector and its thread, built on first use (in the thread: it connects)."""

    def __init__(self, settings: Settings, options: StreamOptions, parts: WorkerParts,
                 store_factory: Callable[[], TableStore] | None = None,
                 after_write: Callable[[BatchResult], None] | None = None) -> None:
        self.settings = settings
        self.options = options
        self.parts = parts
        self.store_factory = store_factory or (lambda: _stream_tables(settings, parts))
        self.after_write = after_write or _hold(options.test_hold)
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="stream-apply")
        self.decoder = ThreadPoolExecutor(1, thread_name_prefix="stream-decode")
        self.projector: StreamProjector | None = None
        self.log: Any = None  # the event log, opened for a handover's replay only
        self.batches = 0
        self.records = 0
        from adapters.streaming.telemetry import Stall, logger

        self.slog = logger("letterlog.stream")
        what = "hbase" if settings.table_store == "hbase" else "the table store"
        self.store_stall = Stall(what, self.slog)
        self.kafka_stall = Stall("kafka", self.slog)
        self.keys_stall = Stall("the event store", self.slog)  # the data keys beside the log
        #: the partitions' end offsets as the broker last gave them (``refresh_highwaters``):
        #: the consumer's own stop moving while it does not fetch (a stalled store)
        self.highwaters: dict[tuple[str, int], int] = {}
        self._reported = (time.monotonic(), 0)
        self.inflight: float | None = None  # when the write now in progress started
        #: the offsets this worker committed, per (topic, partition): the next to read
        self.committed: dict[tuple[str, int], int] = {}

    def watch(self) -> None:
        """Warns when a write to the table store has hung for a while (a frozen HBase does not
        fail a call: it never answers)."""
        started = self.inflight
        if started is not None:
            self.store_stall.waiting(started)

    def report(self, consumer: Any) -> None:
        """One ``progress`` line: batches and records so far, the rate since the last line,
        the lag of the partitions this worker holds."""
        now, records = time.monotonic(), self.records
        then, before = self._reported
        self._reported = (now, records)
        lag = self.lag(consumer)
        self.slog.info("progress", batches=self.batches, records=records,
                       per_s=round((records - before) / (now - then), 1) if now > then else 0.0,
                       behind_events=lag["events"], behind_seconds=lag["seconds"],
                       partitions=len(lag["partitions"]))

    def _open(self) -> StreamProjector:
        if self.projector is None:
            from adapters.readside.catalog import Catalog

            # Records carry personal data sealed: their keys are in the key store beside the log.
            self.keys = self.parts.key_store(self.settings)
            store = self.store_factory()
            # physical table names through the catalog, as the read side resolves them: a
            # rebuild switched in (blue/green) is followed from the next batch on
            projector = StreamProjector(store, [self.settings.kafka_topic],
                                        attempts=self.options.attempts,
                                        threads=self.options.threads,
                                        after_write=self.after_write, catalog=Catalog(store),
                                        replay=self._replay)
            projector.create_tables()
            self.projector = projector
        return self.projector

    def _replay(self, first: int, last: int) -> Iterator[tuple[int, Any]]:
        """Events ``first..last`` from the log itself: what a partition that applied them to
        tables a rebuild switched out replays into the new ones (the projector's handover).
        The log is opened on first use (a worker that never meets a gap never opens it)."""
        from adapters.eventlog.reader import read_events

        if self.log is None:
            self.log = self.parts.event_log(self.settings)
        return read_events(self.log, first, last)

    def _apply(self, records: list[Record], decoded: Decoded | None) -> BatchResult:
        return self._open().apply(records, decoded)

    def decode(self, records: list[Record]) -> asyncio.Future[Decoded] | None:
        """Starts decoding ``records`` in a thread of its own (``StreamProjector.decode`` reads
        and writes nothing), so that a batch decodes while the one before it is written;
        None before the projector exists."""
        if self.projector is None:
            return None
        return asyncio.get_running_loop().run_in_executor(self.decoder, self.projector.decode,
                                                          records)

    async def apply(self, records: list[Record], decoded: Decoded | None = None) -> BatchResult:
        """Applies in the worker thread; a failing store is retried with backoff, for ever
        (tenacity: exponential with full jitter from ``retry_delay`` up to 30 s).
        ``decoded``: the records decoded already (``decode``)."""
        from tenacity import AsyncRetrying, RetryCallState, wait_random_exponential

        loop = asyncio.get_running_loop()

        def failed(state: RetryCallState) -> None:
            from adapters.outages import dependency_of

            error = state.outcome.exception() if state.outcome else None
            if error is None:
                return
            # the tables, or the key store in the log's database (sealed records)
            stall = self.keys_stall if dependency_of(error) == "the event store" \
                else self.store_stall
            stall.failed(error, self.inflight)
            self.inflight = None
            # said once by the stall (and every minute while it lasts), not per try
            log.debug("applying %d records failed (%s: %s); retrying in %.1fs",
                      len(records), type(error).__name__, error,
                      state.next_action.sleep if state.next_action else 0.0)

        delay = self.options.retry_delay
        async for attempt in AsyncRetrying(  # poison never gets here: the store's failures
                wait=wait_random_exponential(multiplier=delay, min=delay, max=30.0),
                before_sleep=failed):
            with attempt:
                started = time.perf_counter()
                self.inflight = time.monotonic()
                result = await loop.run_in_executor(self.executor, self._apply, records,
                                                    decoded)
        self.inflight = None
        self.store_stall.ok()
        self.keys_stall.ok()
        self.batches += 1
        self.records += result.records
        seconds = time.perf_counter() - started
        log.info("batch %d: %d records (%d new, %d duplicates, %d dead letters) in %.2fs, "
                 "%.0f records/s", self.batches, result.records, result.applied,
                 result.duplicates, result.dead_letters, seconds,
                 result.records / seconds if seconds else 0.0)
        metrics = _metrics()
        metrics["applied"].inc(result.applied)
        metrics["dead"].inc(result.dead_letters)
        return result

    async def warm_up(self) -> None:
        """Connects and creates the tables before the first batch arrives: the worker calls
        it when it starts, before its consumer joins the group (a worker given partitions while
        it still creates tables held their first batch back for seconds). A store that is
        not there yet is retried by the first batch."""
        try:
            await asyncio.get_running_loop().run_in_executor(self.executor, self._open)
        except Exception as error:  # noqa: BLE001 - the first batch retries it
            log.warning("table store not ready yet (%s: %s)", type(error).__name__, error)

    async def refresh_highwaters(self, consumer: Any, timeout: float = 4.0) -> None:
        """Asks the broker for the end offsets of the partitions this worker holds (bounded
        by ``timeout``), so the lag gauges stay live while the consumer does not fetch; a
        broker that does not answer is reported (``kafka not answering``), once."""
        try:
            assigned = consumer.assignment()
        except Exception:  # noqa: BLE001 - not started, or rebalancing
            return
        if not assigned:
            return
        started = time.monotonic()
        try:
            ends = await asyncio.wait_for(consumer.end_offsets(list(assigned)), timeout)
        except Exception as error:  # noqa: BLE001 - KafkaError, a timeout: the broker's silence
            if isinstance(error, asyncio.TimeoutError | TimeoutError):
                error = TimeoutError(f"no end offsets from the broker in {timeout:.0f} s")
            self.kafka_stall.failed(error, started)
            return
        self.kafka_stall.ok()
        self.highwaters.update({(tp.topic, tp.partition): int(end)
                                for tp, end in ends.items() if end is not None})

    def lag(self, consumer: Any) -> dict[str, Any]:
        """The lag of the partitions ``consumer`` holds: its highwaters (or the broker's end
        offsets, ``refresh_highwaters``) against the offsets this worker committed."""
        if self.projector is None:
            return {"events": None, "seconds": None, "partitions": {}}
        highwaters: dict[tuple[str, int], int] = {}
        committed: dict[tuple[str, int], int | None] = {}
        known = self.committed
        try:
            assigned = consumer.assignment()
        except Exception:  # noqa: BLE001 - not started, or rebalancing
            assigned = set()
        for tp in assigned:
            try:
                highwater = consumer.highwater(tp)
            except Exception:  # noqa: BLE001 - not fetched yet
                highwater = None
            asked = self.highwaters.get((tp.topic, tp.partition))
            if asked is not None:
                highwater = max(asked, highwater or 0)
            if highwater is not None:
                highwaters[(tp.topic, tp.partition)] = int(highwater)
                committed[(tp.topic, tp.partition)] = known.get((tp.topic, tp.partition))
        return self.projector.lag(highwaters, committed)

    async def recall(self, consumer: Any, assigned: Any, timeout: float = 4.0) -> None:
        """The group's committed offsets of ``assigned`` partitions this worker has not
        committed in yet (the log's start for a partition the group never committed in),
        so that after a restart the lag gauges count from where the group is, as ``letterlog
        lag`` does, not from offset 0 until the first record (issue 42, item 10). A broker
        that does not answer in ``timeout`` leaves them as they were."""
        wanted = [tp for tp in assigned if (tp.topic, tp.partition) not in self.committed]
        if not wanted:
            return

        async def ask() -> dict[Any, int | None]:
            found = {tp: await consumer.committed(tp) for tp in wanted}
            never = [tp for tp, offset in found.items() if offset is None]
            starts = await consumer.beginning_offsets(never) if never else {}
            return {tp: offset if offset is not None else starts.get(tp)
                    for tp, offset in found.items()}

        try:
            offsets = await asyncio.wait_for(ask(), timeout)
        except Exception as error:  # noqa: BLE001 - KafkaError, a timeout: lag stays as it was
            log.warning("lag: the group's offsets not known yet (%s: %s)",
                        type(error).__name__, error)
            return
        for tp, offset in offsets.items():
            if offset is not None:
                self.committed.setdefault((tp.topic, tp.partition), int(offset))

    def forget(self, revoked: Any) -> None:
        for tp in revoked:
            self.highwaters.pop((tp.topic, tp.partition), None)
            self.committed.pop((tp.topic, tp.partition), None)
        if self.projector is not None:
            self.projector.forget((tp.topic, tp.partition) for tp in revoked)


class Revocation(ConsumerRebalanceListener):  # type: ignore[misc]
    """The consumer's rebalance listener (aiokafka's ``ConsumerRebalanceListener``):
    before partitions go, the batch being written finishes and its offsets are committed
    (the group waits for that, up to its rebalance timeout), what was fetched and not yet
    applied is dropped (``StreamWorker.generation``), and the projector forgets the revoked
    partitions' runners (they re-read their tracking if the partitions come back)."""

    def __init__(self, worker: StreamWorker) -> None:
        self.worker = worker

    async def on_partitions_revoked(self, revoked: Any) -> None:
        worker = self.worker
        worker.generation += 1  # what was collected before now is dropped, not applied
        worker.joined.clear()  # and nothing is fetched until the new assignment
        inflight = worker.inflight
        if inflight is not None:
            await asyncio.wait({inflight})  # written and committed (or failed: not committed)
        worker.state.forget(revoked)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.worker.joined.set()
        log.info("partitions assigned: %s",
                 ", ".join(f"{tp.topic}/{tp.partition}" for tp in sorted(assigned)) or "none")
        # where the group is in each partition, for the lag gauges (not awaited here: the
        # rebalance goes on while the broker answers)
        self.worker.recalling = asyncio.ensure_future(
            self.worker.state.recall(self.worker.consumer, assigned))


class StreamWorker:
    """One member of the workers' consumer group: ``run(stop)`` until ``stop`` is set.

    ``consumer`` is an ``AIOKafkaConsumer`` (or anything with its ``subscribe``, ``start``,
    ``stop``, ``getmany``, ``commit``, ``assignment``, ``highwater``, ``end_offsets`` and
    ``seek``), not yet started; the worker subscribes it to the topic with ``Revocation`` as
    its listener."""

    def __init__(self, state: WorkerState, consumer: Any, topic: str) -> None:
        self.state = state
        self.consumer = consumer
        self.topic = topic
        self.options = state.options
        #: bumped when partitions are revoked: a batch collected in an older generation is
        #: dropped unapplied and uncommitted
        self.generation = 0
        self.inflight: asyncio.Future[BatchResult | None] | None = None
        #: set while the worker holds an assignment (cleared from a revocation to the next)
        self.joined = asyncio.Event()
        self.recalling: asyncio.Future[None] | None = None  # StreamState.recall, assigned
        self.results: list[BatchResult] = []  # what each batch did (tests, the last few)

    async def run(self, stop: asyncio.Event) -> None:
        """Opens the table store, joins the group, projects until ``stop`` is set; then
        finishes (and commits) the batch being written and leaves."""
        state = self.state
        await state.warm_up()  # before joining: partitions go to a worker that is ready
        timers: list[asyncio.Future[None]] = []
        web = None
        try:
            self.consumer.subscribe([self.topic], listener=Revocation(self))
            await self.consumer.start()
            timers = [asyncio.ensure_future(self._every(5.0, self._report_lag, stop)),
                      asyncio.ensure_future(self._every(10.0, self._report_progress, stop))]
            web = await self._serve_web()
            while not stop.is_set():
                collected = await self._collect(stop)
                if collected is None:
                    continue
                records, generation = collected
                decoding = state.decode(records)  # while the batch before is written
                if self.inflight is not None:
                    await asyncio.wait({self.inflight})
                if generation != self.generation or stop.is_set():
                    self._rewind(records)
                    continue
                self.inflight = asyncio.ensure_future(self._write(records, decoding))
            if self.inflight is not None:
                await asyncio.wait({self.inflight})
        finally:
            for timer in timers:
                timer.cancel()
            if web is not None:
                web.close()
            await self.consumer.stop()

    async def _collect(self, stop: asyncio.Event) -> tuple[list[Record], int] | None:
        """Up to ``batch`` records, in order per partition: what came until the batch was
        full, ``within`` seconds passed since its first record, or a fetch brought nothing
        new. None when nothing came (or a rebalance dropped what had)."""
        batch, within = max(1, self.options.batch), self.options.within
        try:
            await asyncio.wait_for(self.joined.wait(), 1.0)
        except TimeoutError:
            return None  # not in the group yet, or rebalancing (``stop`` is checked again)
        generation = self.generation
        records: list[Record] = []
        since = 0.0
        while not stop.is_set():
            wait = max(0.0, since + within - time.monotonic()) if records else 1.0
            fetched = await self.consumer.getmany(timeout_ms=int(wait * 1000),
                                                  max_records=batch - len(records))
            got = [_record(m) for ms in fetched.values() for m in ms]
            if generation != self.generation:  # a rebalance while collecting
                self._rewind(records + got)
                return None
            if not got:
                break
            if not records:
                since = time.monotonic()
            records.extend(got)
            if len(records) >= batch or time.monotonic() - since >= within:
                break
        return (records, generation) if records else None

    def _rewind(self, records: list[Record]) -> None:
        """Drops ``records`` unapplied: a partition this worker still holds is read again
        from its first dropped record (one given back in a rebalance starts from its
        committed offset anyway)."""
        first: dict[tuple[str, int], int] = {}
        for r in records:
            key = (r.topic, r.partition)
            first[key] = min(first.get(key, r.offset), r.offset)
        if not first:
            return
        assigned = {(tp.topic, tp.partition): tp for tp in self.consumer.assignment()}
        for key, offset in first.items():
            if key in assigned:
                self.consumer.seek(assigned[key], offset)
        log.info("dropped %d records fetched before a rebalance", len(records))

    async def _write(self, records: list[Record],
                     decoding: asyncio.Future[Decoded] | None) -> BatchResult | None:
        """Applies the batch (``WorkerState.apply``: retried while the store fails), then
        commits its offsets."""
        decoded = None
        if decoding is not None:
            try:
                decoded = await decoding
            except Exception as error:  # noqa: BLE001 - apply decodes them again
                log.warning("decoding ahead failed (%s: %s)", type(error).__name__, error)
        result = await self.state.apply(records, decoded)
        offsets: dict[tuple[str, int], int] = {}
        for r in records:
            key = (r.topic, r.partition)
            offsets[key] = max(offsets.get(key, -1), r.offset + 1)
        await self._commit(offsets)
        self.results.append(result)
        del self.results[:-100]
        try:
            publish_lag(self.state.lag(self.consumer))
        except Exception as error:  # noqa: BLE001 - metrics never stop the projection
            log.warning("lag: %s", error)
        return result

    async def _commit(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Commits ``offsets`` (the next offset to read per partition). A commit the group
        refuses (the partitions moved meanwhile) is logged: the records come again to their
        next owner, and the idempotent tables absorb them."""
        from aiokafka import TopicPartition

        try:
            await self.consumer.commit({TopicPartition(t, p): o
                                        for (t, p), o in offsets.items()})
        except Exception as error:  # noqa: BLE001 - CommitFailedError, a broker gone
            log.warning("committing %d partitions' offsets failed (%s: %s); their records "
                        "will be read again", len(offsets), type(error).__name__, error)
            return
        self.state.committed.update(offsets)

    async def _every(self, seconds: float, job: Callable[[], Any],
                     stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), seconds)
            except TimeoutError:
                pass
            else:
                return
            try:
                await job()
            except Exception as error:  # noqa: BLE001 - reporting never stops the projection
                log.warning("%s: %s", getattr(job, "__name__", "timer"), error)

    async def _report_lag(self) -> None:
        self.state.watch()
        if self.recalling is not None and not self.recalling.done():
            await asyncio.wait({self.recalling}, timeout=5.0)  # where the group is, first
        await self.state.refresh_highwaters(self.consumer)
        publish_lag(self.state.lag(self.consumer))

    async def _report_progress(self) -> None:
        self.state.report(self.consumer)

    async def _serve_web(self) -> asyncio.AbstractServer | None:
        """``/metrics/`` (Prometheus) and ``/lag/`` (JSON) on 127.0.0.1:``web_port``; none
        when it is 0."""
        if not self.options.web_port:
            return None
        return await asyncio.start_server(self._answer, "127.0.0.1", self.options.web_port)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10.0)
            path = request.split(b" ", 2)[1].decode("latin-1").split("?")[0].rstrip("/")
            if path == "/metrics":
                from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

                _metrics()
                status, kind, body = "200 OK", CONTENT_TYPE_LATEST, generate_latest()
            elif path == "/lag":
                status, kind = "200 OK", "application/json"
                body = json.dumps(self.state.lag(self.consumer)).encode()
            else:
                status, kind, body = "404 Not Found", "text/plain", b"not found\n"
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: "
                         f"{len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except Exception as error:  # noqa: BLE001 - a bad request never stops the worker
            log.debug("web: %s", error)
        finally:
            writer.close()


def _record(message: Any) -> Record:
    """An aiokafka ``ConsumerRecord`` as the projector takes it (timestamp in seconds)."""
    stamp = message.timestamp
    return Record(message.topic, message.partition, message.offset, message.value,
                  message.key, stamp / 1000 if stamp is not None else None)


#: a stream worker's HBase calls wait at least this long (a batch's write is large)
WORKER_HBASE_TIMEOUT = 60.0


def _stream_tables(settings: Settings, parts: WorkerParts) -> TableStore:
    return parts.stream_tables(settings,
                               timeout=max(WORKER_HBASE_TIMEOUT, settings.hbase_timeout))


def create_worker(settings: Settings, options: StreamOptions | None = None, *,
                  parts: WorkerParts,
                  store_factory: Callable[[], TableStore] | None = None,
                  after_write: Callable[[BatchResult], None] | None = None,
                  consumer: Any = None) -> StreamWorker:
    """The worker for ``settings``; ``parts`` builds the key store, the log and the table
    store (``adapters.bootstrap``). ``store_factory`` replaces the table store from
    settings (``parts.stream_tables``); ``options`` replace ``settings.stream``;
    ``after_write`` is ``StreamProjector``'s hook; ``consumer`` replaces the
    ``AIOKafkaConsumer`` built from the settings (tests). Nothing connects before ``run``."""
    options = options or settings.stream
    state = WorkerState(settings, options, parts, store_factory, after_write)
    if consumer is None:
        from adapters.streaming.telemetry import pace_kafka_metadata

        pace_kafka_metadata()  # aiokafka's fetcher would spin while the broker is gone
        consumer = _consumer(settings, options)
    return StreamWorker(state, consumer, settings.kafka_topic)


def _consumer(settings: Settings, options: StreamOptions) -> Any:
    from aiokafka import AIOKafkaConsumer

    session = options.session_timeout
    return AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap or "localhost:9092",
        group_id=options.group,
        # static membership (KIP-345): a worker restarted under the same instance id gets its
        # partitions back without waiting out the session of the one that died
        group_instance_id=options.instance or None,
        client_id=f"letterlog-worker-{options.instance or os.getpid()}",
        enable_auto_commit=False,  # offsets are committed after their batch is written
        auto_offset_reset="earliest",
        session_timeout_ms=int(session * 1000),
        heartbeat_interval_ms=int(max(1.0, session / 10) * 1000),
        rebalance_timeout_ms=int(max(session, 10.0) * 1000),
        # a batch retried while the table store is down keeps the worker from fetching:
        # it stays in the group for an hour of that
        max_poll_interval_ms=3_600_000,
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )
