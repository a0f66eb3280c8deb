"""The faust app: one thin agent feeding ``StreamProjector`` (``adapters.streaming.projector``).

Run N workers (same group id, topic with at least N partitions; ``docs/streaming.md``) through
the entry point ``adapters.cli.worker``, which builds the app from the settings::

    faust -A adapters.cli.worker worker -l info            # settings from LETTERLOG_* variables
    python -m adapters.cli.worker                          # the same, through its main()

Records reach the agent a batch at a time: faust's Kafka consumer is ``BatchConsumer``, whose
fetch loop hands the records of the letterlog topic over as lists of up to ``batch`` faust
messages (or what came within ``within`` seconds), tracked by the consumer, through an
in-memory channel that faust suspends during a rebalance and clears when it starts
(``BatchFeed``) -- instead of faust's per-message path (a task and four futures per message in
its fetch loop, then an event, sensors and a stream step each), which took about a third of a
busy worker's CPU. Each batch is decoded in a thread of its own while the batch before it is
written, then applied in the apply thread (``loop.run_in_executor``: happybase blocks;
``Pipeline``: batches applied one at a time, in order), and only when ``apply`` has returned --
every cell, dead letter and tracking row written -- are the batch's records acknowledged
(``Consumer.ack``), which is what lets faust commit their offsets. A worker that dies before
that has committed nothing of the batch; the next owner of the partitions gets it again and the
idempotent tables absorb the repeat. A batch fetched before a rebalance (another generation) is
dropped unapplied and unacknowledged. A failing table store is retried (backoff, forever:
nothing can progress without it) without acknowledging anything.

Nothing here connects, reads settings or builds a part: ``create_app`` is handed ``parts``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import faust
from faust.transport.consumer import CONSUMER_FETCHING
from faust.transport.drivers.aiokafka import Consumer as AIOKafkaConsumer
from faust.transport.drivers.aiokafka import Transport as AIOKafkaTransport

from adapters.filemodes import private_dir
from adapters.settings import Settings, StreamOptions
from adapters.streaming.projector import BatchResult, Decoded, Record, StreamProjector
from projections.tablestore import TableStore

log = logging.getLogger("letterlog.stream")

__all__ = ["WorkerParts", "create_app", "kafka_lag", "publish_lag"]

AGENT_NAME = "letterlog-projector"


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

    def stream_tables(self, settings: Settings, timeout: float | None = None) -> TableStore: ...


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

    def watch(self) -> None:
        """Warns when a write to the table store has hung for a while (a frozen HBase does not
        fail a call: it never answers)."""
        started = self.inflight
        if started is not None:
            self.store_stall.waiting(started)

    def report(self, app: faust.App) -> None:
        """One ``progress`` line: batches and records so far, the rate since the last line,
        the lag of the partitions this worker holds."""
        now, records = time.monotonic(), self.records
        then, before = self._reported
        self._reported = (now, records)
        lag = self.lag(app)
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
        """Connects and creates the tables before the first batch arrives: the app calls it
        when it starts, before its consumer joins the group (a worker given partitions while
        it still creates tables held their first batch back for seconds). A store that is
        not there yet is retried by the first batch."""
        try:
            await asyncio.get_running_loop().run_in_executor(self.executor, self._open)
        except Exception as error:  # noqa: BLE001 - the first batch retries it
            log.warning("table store not ready yet (%s: %s)", type(error).__name__, error)

    async def refresh_highwaters(self, app: faust.App, timeout: float = 4.0) -> None:
        """Asks the broker for the end offsets of the partitions this worker holds (bounded
        by ``timeout``), so the lag gauges stay live while the consumer does not fetch; a
        broker that does not answer is reported (``kafka not answering``), once."""
        consumer = app.consumer
        try:
            assigned = consumer.assignment()
        except Exception:  # noqa: BLE001 - not started, or rebalancing
            return
        if not assigned:
            return
        started = time.monotonic()
        try:
            ends = await asyncio.wait_for(consumer.highwaters(*assigned), timeout)
        except Exception as error:  # noqa: BLE001 - KafkaError, a timeout: the broker's silence
            if isinstance(error, asyncio.TimeoutError | TimeoutError):
                error = TimeoutError(f"no end offsets from the broker in {timeout:.0f} s")
            self.kafka_stall.failed(error, started)
            return
        self.kafka_stall.ok()
        self.highwaters.update({(tp.topic, tp.partition): int(end)
                                for tp, end in ends.items() if end is not None})

    def lag(self, app: faust.App) -> dict[str, Any]:
        if self.projector is None:
            return {"events": None, "seconds": None, "partitions": {}}
        consumer = app.consumer
        highwaters: dict[tuple[str, int], int] = {}
        committed: dict[tuple[str, int], int | None] = {}
        known = getattr(consumer, "_committed_offset", {})
        try:
            assigned = consumer.assignment()
        except Exception:  # noqa: BLE001 - not started (agent.test_context) or rebalancing
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
                committed[(tp.topic, tp.partition)] = known.get(tp)
        return self.projector.lag(highwaters, committed)

    def forget(self, revoked: Any) -> None:
        for tp in revoked:
            self.highwaters.pop((tp.topic, tp.partition), None)
        if self.projector is not None:
            self.projector.forget((tp.topic, tp.partition) for tp in revoked)


class Pipeline:
    """One batch applying while the consumer fetches the next: ``submit(messages)`` starts
    applying a batch as soon as the one before it is done (batches are applied one at a time,
    in order), and returns the result of the batch before, once it is written and its records
    acknowledged. A batch's records are acknowledged the moment its ``apply`` returns, by
    the batch's own task -- not when the next batch arrives: a rebalance waits for them.

    ``messages`` are faust ``Message``s the consumer tracks (``BatchFeed``); acknowledging
    one (``Consumer.ack``) is what lets faust commit its offset. Messages fetched before the
    latest rebalance (another ``generation_id``) are neither applied nor acknowledged: the
    partition's owner now starts from the committed offset and gets them again."""

    def __init__(self, state: WorkerState, app: faust.App) -> None:
        self.state = state
        self.app = app
        self._inflight: asyncio.Future[BatchResult | None] | None = None

    async def submit(self, messages: list[Any]) -> BatchResult | None:
        previous = self._inflight
        self._inflight = asyncio.ensure_future(self._run(previous, messages))
        # shielded: a cancelled caller (the agent stopping) leaves the batch to finish
        return None if previous is None else await asyncio.shield(previous)

    async def _run(self, previous: asyncio.Future[BatchResult | None] | None,
                   messages: list[Any]) -> BatchResult | None:
        records = [_record(m) for m in messages]
        decoding = self.state.decode(records)  # while the batch before is written
        if previous is not None:
            await asyncio.wait({previous})
            if previous.cancelled() or previous.exception() is not None \
                    or previous.result() is None:
                return None  # shutting down: leave this batch unacknowledged
        generation = self.app.consumer_generation_id
        current = [m for m in messages if m.generation_id in (None, generation)]
        if not current:
            return BatchResult()
        decoded = None
        if decoding is not None:
            try:
                decoded = await decoding
            except Exception as error:  # noqa: BLE001 - apply decodes them again
                log.warning("decoding ahead failed (%s: %s)", type(error).__name__, error)
        if len(current) < len(messages):
            records, decoded = [_record(m) for m in current], None
        result = await self.state.apply(records, decoded)
        ack = self.app.consumer.ack
        for message in current:  # the offsets may be committed from here on
            ack(message)
        try:
            publish_lag(self.state.lag(self.app))
        except Exception as error:  # noqa: BLE001 - metrics never stop the projection
            log.warning("lag: %s", error)
        return result


def _record(message: Any) -> Record:
    return Record(message.topic, message.partition, message.offset, message.value,
                  message.key, message.timestamp)


class BatchFeed:
    """Where ``BatchConsumer`` hands the records of ``topics``: lists of up to ``batch``
    faust ``Message``s, sent to ``channel`` (the agent's in-memory channel, whose queue faust
    suspends during a rebalance and clears when it starts). The messages are tracked by the
    consumer before they are sent (a rebalance waits for tracked messages to be acknowledged,
    or dropped: the consumer holds them weakly)."""

    def __init__(self, channel: Any, topics: Collection[str], batch: int, within: float) -> None:
        self.channel = channel
        self.topics = frozenset(topics)
        self.batch = max(1, batch)
        self.within = within

    async def send(self, consumer: Any, messages: list[Any]) -> None:
        track = consumer.track_message
        for message in messages:
            track(message)
        try:
            while not self.channel.subscriber_count:  # the agent not iterating yet
                await asyncio.sleep(0.05)
            await self.channel.send(value=messages)
        except BaseException:
            unacked = consumer._unacked_messages
            for message in messages:
                unacked.discard(message)
            raise


class BatchConsumer(AIOKafkaConsumer):
    """faust's aiokafka consumer, but the records of the feed's topics (``app.letterlog_feed``,
    a ``BatchFeed``) are handed over a fetch at a time instead of one message at a time
    through the conductor (a task and four futures per message in ``_drain_messages``, an
    event, sensors and a stream step each). What the fetch loop does otherwise is faust's:
    flow control and rebalances (``_wait_next_records``, ``suspend_flow``, the generation
    id), paused and buffered partitions, read offsets and gaps, the commit-every counter;
    records of any other topic still go through ``callback`` one by one."""

    async def _drain_messages(self, fetcher: Any) -> None:
        feed: BatchFeed | None = getattr(self.app, "letterlog_feed", None)
        if feed is None:
            await super()._drain_messages(fetcher)
            return
        callback = self.callback
        consumer_should_stop = self._stopped.is_set
        fetcher_should_stop = fetcher._stopped.is_set
        read_offset = self._read_offset
        acks_enabled_for = self.app.topics.acks_enabled_for
        to_message = self._to_message
        pending: list[Any] = []
        since = 0.0
        try:
            while not (consumer_should_stop() or fetcher_should_stop()):
                self.diag.set_flag(CONSUMER_FETCHING)
                wait = max(0.0, since + feed.within - time.monotonic()) if pending else 1.0
                records, active = await self._wait_next_records(wait)
                self.diag.unset_flag(CONSUMER_FETCHING)
                if self.should_stop:
                    return
                if not self.flow_active:  # a rebalance: what was fetched is read again
                    pending.clear()
                    try:
                        await self.perform_seek()
                    except Exception as error:  # noqa: BLE001 - as faust's getmany
                        self.log.warning("exception performing seek when flow not active %r",
                                         error)
                    continue
                generation = self.app.consumer_generation_id
                for tp, batch in (records or {}).items():
                    if self.app.consumer_generation_id != generation:
                        break
                    if (active is not None and tp not in active
                            and tp not in self._buffered_partitions):
                        continue
                    self.app.monitor.track_tp_end_offset(tp, self.highwater(tp))
                    ours = tp.topic in feed.topics
                    acks = acks_enabled_for(tp.topic)
                    r_offset = read_offset[tp]
                    for record in batch:
                        offset = record.offset
                        if r_offset is not None and offset < r_offset:
                            continue  # read already (faust drops it too)
                        if acks and r_offset and offset - r_offset > 1:
                            await self._add_gap(tp, r_offset + 1, offset)
                        message = to_message(tp, record)
                        if ours:
                            if not pending:
                                since = time.monotonic()
                            pending.append(message)
                        else:
                            await self.wait_first(callback(message), self.suspend_flow.wait())
                        r_offset = offset
                    read_offset[tp] = r_offset
                # full batches go at once; the rest waits for more records until ``within``
                # has passed since the first of them came, or a fetch brings nothing new
                due = not records or time.monotonic() - since >= feed.within
                while len(pending) >= feed.batch or (pending and due):
                    chunk, pending = pending[:feed.batch], pending[feed.batch:]
                    await self.wait_first(feed.send(self, chunk), self.suspend_flow.wait())
                    if self.suspend_flow.is_set():
                        pending.clear()
                    elif pending and not due:
                        since = time.monotonic()
                commit_every = self._commit_every
                if commit_every is not None and self._n_acked >= commit_every:
                    self._n_acked = 0
                    await self.commit()
        except self.consumer_stopped_errors:
            if self.transport.app.should_stop:
                self.log.info("Broker stopped consumer, shutting down...")
                return
            raise
        except asyncio.CancelledError:
            if self.transport.app.should_stop:
                self.log.info("Consumer shutting down for user cancel.")
                return
            raise
        except Exception as exc:
            self.log.exception("Drain messages raised: %r", exc)
            raise
        finally:
            self.diag.unset_flag(CONSUMER_FETCHING)


class _App(faust.App):
    """A faust app whose Kafka consumer is ``BatchConsumer``, and which opens its table
    store (``WorkerState.warm_up``: connections, tables, catalog) before its consumer starts,
    i.e. before the worker joins the group and is given partitions."""

    async def on_start(self) -> None:
        await super().on_start()
        from adapters.streaming.telemetry import quiet_libraries

        quiet_libraries()  # on the handlers faust's worker installed by now
        state: WorkerState | None = getattr(self, "letterlog", None)
        if state is not None:
            await state.warm_up()

    def _new_transport(self) -> Any:
        transport = super()._new_transport()
        if isinstance(transport, AIOKafkaTransport):
            transport.Consumer = BatchConsumer  # type: ignore[misc]
        return transport


#: a stream worker's HBase calls wait at least this long (a batch's write is large)
WORKER_HBASE_TIMEOUT = 60.0


def _stream_tables(settings: Settings, parts: WorkerParts) -> TableStore:
    return parts.stream_tables(settings,
                               timeout=max(WORKER_HBASE_TIMEOUT, settings.hbase_timeout))


def create_app(settings: Settings, options: StreamOptions | None = None, *,
               parts: WorkerParts,
               store_factory: Callable[[], TableStore] | None = None,
               after_write: Callable[[BatchResult], None] | None = None) -> faust.App:
    """The faust app for ``settings``; ``parts`` builds the key store, the log and the table
    store (``adapters.bootstrap``). ``store_factory`` replaces the table store from
    settings (``parts.stream_tables``); ``options`` replace ``settings.stream``;
    ``after_write`` is ``StreamProjector``'s hook. Without ``kafka_bootstrap`` the app can
    only be driven through ``agent.test_context()`` (faust's default broker address, never
    contacted)."""
    options = options or settings.stream
    from adapters.streaming.telemetry import pace_kafka_metadata

    pace_kafka_metadata()  # aiokafka's fetcher would spin while the broker is gone
    broker = f"kafka://{settings.kafka_bootstrap or 'localhost:9092'}"
    faust_dir = Path(settings.data) / "faust"  # faust's own files, not the working directory
    private_dir(faust_dir)
    app = _App(
        options.group,
        broker=broker,
        autodiscover=False,
        key_serializer="raw",
        value_serializer="raw",
        consumer_auto_offset_reset="earliest",
        broker_commit_interval=options.commit_interval,
        broker_session_timeout=options.session_timeout,
        # static membership (KIP-345): a worker restarted under the same instance id gets its
        # partitions back without waiting out the session of the one that died
        consumer_group_instance_id=options.instance or None,
        broker_heartbeat_interval=max(1.0, options.session_timeout / 10),
        broker_rebalance_timeout=max(options.session_timeout, 10.0),
        topic_disable_leader=True,
        stream_wait_empty=True,
        stream_buffer_maxsize=max(4096, 2 * options.batch),
        stream_processing_timeout=3600.0,
        web_enabled=bool(options.web_port),
        web_port=options.web_port or 6066,
        web_bind="127.0.0.1",
        store="memory://",
        datadir=str(faust_dir),
    )
    topic = app.topic(settings.kafka_topic, key_type=bytes, value_type=bytes,
                      key_serializer="raw", value_serializer="raw")
    app.topics.add(topic)  # subscribed; its records reach the agent through the feed
    batches = app.channel(maxsize=1)  # lists of messages; faust clears it on a rebalance
    app.letterlog_feed = BatchFeed(batches, [settings.kafka_topic],  # type: ignore[attr-defined]
                                   options.batch, options.within)
    state = WorkerState(settings, options, parts, store_factory, after_write)

    @app.agent(batches, name=AGENT_NAME)
    async def project(stream: Any) -> Any:  # a faust.Stream of lists of messages
        pipeline = Pipeline(state, app)
        async for messages in stream:
            done = await pipeline.submit(list(messages))  # the batch before: written, acked
            if done is not None:
                yield done.as_dict()

    async def report_lag() -> None:
        state.watch()
        try:
            await state.refresh_highwaters(app)
            publish_lag(state.lag(app))
        except Exception as error:  # noqa: BLE001 - metrics never stop the projection
            log.warning("lag: %s", error)

    app.timer(5.0)(report_lag)

    async def report_progress() -> None:
        try:
            state.report(app)
        except Exception as error:  # noqa: BLE001 - reporting never stops the projection
            log.warning("progress: %s", error)

    app.timer(10.0)(report_progress)

    async def on_revoked(sender: Any, revoked: Any, **kwargs: Any) -> None:
        state.forget(revoked)

    app.on_partitions_revoked.connect(on_revoked)  # type: ignore[arg-type]

    @app.page("/metrics/")
    async def metrics(web: Any, request: Any) -> Any:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        _metrics()
        return web.bytes(generate_latest(), content_type=CONTENT_TYPE_LATEST.split(";")[0])

    @app.page("/lag/")
    async def lag(web: Any, request: Any) -> Any:
        return web.json(state.lag(app))

    app.letterlog = state  # type: ignore[attr-defined]
    app.letterlog_agent = project  # type: ignore[attr-defined]
    return app
