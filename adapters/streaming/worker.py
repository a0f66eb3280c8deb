"""A stream worker: an aiokafka consumer group member feeding ``StreamProjector``
(``adapters.streaming.projector``), Kafka the same way the relay uses it (ADR 0059).

Run N workers (same group id, topic with at least N partitions; ``docs/streaming.md``) through
the entry point ``adapters.cli.worker``, which builds the worker from the settings::

    letterlog worker                                       # settings from LETTERLOG_* variables
    python -m adapters.cli.worker                          # the same, through its main()

``StreamWorker.run`` collects what ``AIOKafkaConsumer.getmany`` returns into batches of up to
``batch`` records (or what came within ``within`` seconds of the first, but never less than
what came while the batch before was applied). Each batch is decoded in a thread of its own
while the batch before it is written, then applied in the apply thread
(``WorkerState.write``: happybase blocks; batches applied one at a time, in order), its plain
tables written behind while the next batch is applied; and only when ``WorkerState.settle``
has returned -- every cell, dead letter and tracking row written -- are the batch's offsets
committed (``AIOKafkaConsumer.commit``; auto-commit is off), batch after batch in order. A
worker that dies before that has committed nothing of the batch; the next owner of the
partitions gets it again and the idempotent tables absorb the repeat. On a rebalance the
listener (``Revocation``) waits for the batches being written (one, or two: the last applied
while the one before wrote behind) and commits them before the partitions go;
what was fetched but not applied is dropped (the partitions' next owner, this worker or
another, reads it again from the committed offsets). A failing table store is retried
(backoff, forever: nothing can progress without it) without committing anything.

The worker's state (the projector, its threads, offsets and lag) is in ``workerstate``; its
metrics and web page (``/metrics/``, ``/lag/``) in ``workerweb``; a consumer group's lag as
Kafka sees it (``kafka_lag``) in ``lag``. Nothing here connects, reads settings or builds a
part: ``create_worker`` is handed ``parts``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

from adapters.config.settings import Settings, StreamOptions
from adapters.streaming.lag import kafka_lag
from adapters.streaming.projector import BatchResult, Decoded, Record
from adapters.streaming.telemetry import pace_kafka_metadata
from adapters.streaming.workerstate import WorkerParts, WorkerState
from adapters.streaming.workerweb import publish_lag, serve_web
from projections.tablestore import TableStore

log = logging.getLogger("letterlog.stream")

__all__ = ["StreamWorker", "WorkerParts", "WorkerState", "create_worker", "kafka_lag",
           "publish_lag"]


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
        #: the last batch's task (applied, settled, committed: it waits for the one before)
        self.inflight: asyncio.Future[BatchResult | None] | None = None
        #: set once the last batch is applied (its plain tables may still be being written)
        self.applying: asyncio.Future[None] | None = None
        #: the task of the batch before the last
        self.behind: asyncio.Future[BatchResult | None] | None = None
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
            web = serve_web(self.options.web_port, self._lag, asyncio.get_running_loop())
            while not stop.is_set():
                collected = await self._collect(stop)
                if collected is None:
                    continue
                records, generation = collected
                decoding = state.decode(records)  # while the batch before is written
                # the batch before applied (its plain tables may still be being written
                # behind), the one before that settled and committed: at most two at once
                waiting = {f for f in (self.applying, self.behind) if f is not None}
                if waiting:
                    await asyncio.wait(waiting)
                if generation != self.generation or stop.is_set():
                    self._rewind(records)
                    continue
                applied: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self.behind, self.applying = self.inflight, applied
                self.inflight = asyncio.ensure_future(
                    self._write(records, decoding, applied, self.inflight))
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
        new -- but never before the batch before it is applied (it could not start sooner:
        a worker behind takes fuller batches instead of waiting with a small one). None when
        nothing came (or a rebalance dropped what had)."""
        batch, within = max(1, self.options.batch), self.options.within
        try:
            await asyncio.wait_for(self.joined.wait(), 1.0)
        except TimeoutError:
            return None  # not in the group yet, or rebalancing (``stop`` is checked again)
        if not self.joined.is_set():
            return None  # a revocation began while ``wait_for`` gave the loop away
        generation = self.generation  # current: a revocation from now on bumps it
        records: list[Record] = []
        since = 0.0
        while not stop.is_set():
            busy = self.applying is not None and not self.applying.done()
            wait = max(0.0, since + within - time.monotonic()) if records else 1.0
            if busy and records:
                wait = max(wait, 0.05)  # filling while the batch before is applied
            fetched = await self.consumer.getmany(timeout_ms=int(wait * 1000),
                                                  max_records=batch - len(records))
            got = [_record(m) for ms in fetched.values() for m in ms]
            if generation != self.generation:  # a rebalance while collecting
                self._rewind(records + got)
                return None
            if not got:
                if records and busy:
                    continue
                break
            if not records:
                since = time.monotonic()
            records.extend(got)
            if len(records) >= batch:
                break
            if time.monotonic() - since >= within and not (
                    self.applying is not None and not self.applying.done()):
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

    async def _write(self, records: list[Record], decoding: asyncio.Future[Decoded] | None,
                     applied: asyncio.Future[None],
                     before: asyncio.Future[BatchResult | None] | None) -> BatchResult | None:
        """Applies the batch (``WorkerState.write``: retried while the store fails; its plain
        tables written behind) and sets ``applied``; then, once the batch ``before`` it is
        settled and committed, settles it (``WorkerState.settle``: those tables written,
        then its tracking rows) and commits its offsets."""
        try:
            decoded = None
            if decoding is not None:
                try:
                    decoded = await decoding
                except Exception as error:  # noqa: BLE001 - apply decodes them again
                    log.warning("decoding ahead failed (%s: %s)", type(error).__name__, error)
            written = await self.state.write(records, decoded)
        finally:
            if not applied.done():
                applied.set_result(None)  # the next batch may be applied now
        if before is not None:
            await asyncio.wait({before})  # offsets are committed in order
        result = await self.state.settle(written)
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

    async def _lag(self) -> dict[str, Any]:
        return self.state.lag(self.consumer)


def _record(message: Any) -> Record:
    """An aiokafka ``ConsumerRecord`` as the projector takes it (timestamp in seconds)."""
    stamp = message.timestamp
    return Record(message.topic, message.partition, message.offset, message.value,
                  message.key, stamp / 1000 if stamp is not None else None)


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
        pace_kafka_metadata()  # aiokafka's fetcher would spin while the broker is gone
        consumer = _consumer(settings, options)
    return StreamWorker(state, consumer, settings.kafka_topic)


def _consumer(settings: Settings, options: StreamOptions) -> Any:
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
