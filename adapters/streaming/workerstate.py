"""A stream worker's state (``adapters.streaming.worker``): the projector and the threads
it is applied and decoded in, the stalls it reports, and the partitions' offsets and lag as
this worker knows them. Built by ``create_worker`` from the parts the entry point hands over
(``WorkerParts``); nothing here connects before the first batch (or ``warm_up``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from tenacity import AsyncRetrying, RetryCallState, wait_random_exponential

from adapters.config.settings import Settings, StreamOptions
from adapters.eventlog.reader import read_events
from adapters.operations.outages import dependency_of
from adapters.readside.catalog import Catalog
from adapters.streaming.projector import BatchResult, Decoded, Record, StreamProjector, Written
from adapters.streaming.telemetry import Stall, logger
from adapters.streaming.workerweb import count_batch
from projections.tablestore import TableStore

log = logging.getLogger("letterlog.stream")

__all__ = ["WORKER_HBASE_TIMEOUT", "WorkerParts", "WorkerState", "worker_tables"]

#: a stream worker's HBase calls wait at least this long (a batch's write is large)
WORKER_HBASE_TIMEOUT = 60.0


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
        self.store_factory = store_factory or (lambda: worker_tables(settings, parts))
        self.after_write = after_write or _hold(options.test_hold)
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="stream-apply")
        self.decoder = ThreadPoolExecutor(1, thread_name_prefix="stream-decode")
        #: waits for a batch's plain tables and writes its tracking rows (``settle``) while
        #: the apply thread goes on with the next batch
        self.settler = ThreadPoolExecutor(1, thread_name_prefix="stream-settle")
        self.projector: StreamProjector | None = None
        self.log: Any = None  # the event log, opened for a handover's replay only
        self.batches = 0
        self.records = 0

        self.slog = logger("letterlog.stream")
        what = "hbase" if settings.table_store == "hbase" else "the table store"
        self.store_stall = Stall(what, self.slog)
        self.kafka_stall = Stall("kafka", self.slog)
        self.keys_stall = Stall("the event store", self.slog)  # the data keys beside the log
        #: the partitions' end offsets as the broker last gave them (``refresh_highwaters``):
        #: the consumer's own stop moving while it does not fetch (a stalled store)
        self.highwaters: dict[tuple[str, int], int] = {}
        self._reported = (time.monotonic(), 0)
        #: when each store call now in progress started: a batch's ``write`` and the batch
        #: before it's ``settle`` run at once, and each fails, succeeds or hangs on its own
        self._calls: dict[int, float] = {}
        self._call_ids = itertools.count()
        #: the offsets this worker committed, per (topic, partition): the next to read
        self.committed: dict[tuple[str, int], int] = {}

    def watch(self) -> None:
        """Warns when a write to the table store has hung for a while (a frozen HBase does not
        fail a call: it never answers)."""
        started = self.inflight
        if started is not None:
            self.store_stall.waiting(started)

    @property
    def inflight(self) -> float | None:
        """When the oldest store call now in progress started (``time.monotonic()``)."""
        return min(self._calls.values(), default=None)

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
        if self.log is None:
            self.log = self.parts.event_log(self.settings)
        return read_events(self.log, first, last)

    def _write(self, records: list[Record], decoded: Decoded | None) -> Written:
        return self._open().write(records, decoded)

    def decode(self, records: list[Record]) -> asyncio.Future[Decoded] | None:
        """Starts decoding ``records`` in a thread of its own (``StreamProjector.decode`` reads
        and writes nothing), so that a batch decodes while the one before it is written;
        None before the projector exists."""
        if self.projector is None:
            return None
        return asyncio.get_running_loop().run_in_executor(self.decoder, self.projector.decode,
                                                          records)

    async def apply(self, records: list[Record], decoded: Decoded | None = None) -> BatchResult:
        """``write`` and then ``settle``: returns once every cell, dead letter and tracking
        row of the batch is written."""
        return await self.settle(await self.write(records, decoded))

    async def write(self, records: list[Record], decoded: Decoded | None = None) -> Written:
        """Applies the batch in the apply thread (``StreamProjector.write``: its plain tables
        are written behind, ``settle`` waits for them); a failing store is retried with
        backoff, for ever (tenacity: exponential with full jitter from ``retry_delay`` up to
        30 s). ``decoded``: the records decoded already (``decode``)."""
        started = time.perf_counter()
        written: Written = await self._retried(self.executor, self._write, records, decoded)
        written.started = started
        return written

    async def settle(self, written: Written) -> BatchResult:
        """Waits, in the settle thread, for the batch's plain tables and writes its tracking
        rows (``Written.settle``), retried as ``write`` is; then the batch is written."""
        result: BatchResult = await self._retried(self.settler, written.settle)
        self.batches += 1
        self.records += result.records
        seconds = time.perf_counter() - written.started
        log.info("batch %d: %d records (%d new, %d duplicates, %d dead letters) in %.2fs, "
                 "%.0f records/s", self.batches, result.records, result.applied,
                 result.duplicates, result.dead_letters, seconds,
                 result.records / seconds if seconds else 0.0)
        count_batch(result.applied, result.dead_letters)
        return result

    async def _retried(self, executor: ThreadPoolExecutor, call: Callable[..., Any],
                       *args: Any) -> Any:
        """``call(*args)`` in ``executor``; a failing store is retried with backoff, for ever
        (nothing can progress without it), its stall reported."""
        loop = asyncio.get_running_loop()

        def failed(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome else None
            if error is None:
                return
            # the tables, or the key store in the log's database (sealed records)
            stall = self.keys_stall if dependency_of(error) == "the event store" \
                else self.store_stall
            stall.failed(error, self._calls.pop(call_id, None))
            # said once by the stall (and every minute while it lasts), not per try
            log.debug("writing a batch failed (%s: %s); retrying in %.1fs",
                      type(error).__name__, error,
                      state.next_action.sleep if state.next_action else 0.0)

        delay = self.options.retry_delay
        call_id = next(self._call_ids)
        try:
            async for attempt in AsyncRetrying(  # poison never gets here: the store's failures
                    wait=wait_random_exponential(multiplier=delay, min=delay, max=30.0),
                    before_sleep=failed):
                with attempt:
                    self._calls[call_id] = time.monotonic()
                    outcome = await loop.run_in_executor(executor, call, *args)
        finally:
            self._calls.pop(call_id, None)
        # answering again only once no other call has been waiting for as long as a stall
        # takes to be said: one call that came back says nothing of one still hanging
        oldest = self.inflight
        if oldest is None or time.monotonic() - oldest < self.store_stall.after:
            self.store_stall.ok()
            self.keys_stall.ok()
        return outcome

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


def worker_tables(settings: Settings, parts: WorkerParts) -> TableStore:
    return parts.stream_tables(settings,
                               timeout=max(WORKER_HBASE_TIMEOUT, settings.hbase_timeout))
