"""The stream projector: Kafka records in, table mutations out (no Kafka client in here).

``StreamProjector.apply(records)`` takes one batch of event records (see
``adapters.eventlog.records``: key = account id, value = msgpack record) from any number of
partitions, decodes them, runs the same pure projectors as every other host through
``ProjectionRunner``, and writes the table store in batches. The worker in
``adapters.streaming.worker`` only feeds it and commits the records' offsets once ``apply`` has
returned. Why it is built this way (``docs/streaming.md`` has the long form):

Tracking per partition
    A runner skips events at or below the position it tracks per projection name. Partitions
    are consumed independently, so one global position would skip the lower positions of a
    partition that lags behind another. Every partition gets its own runners, whose
    projections are renamed ``f"{name}@{topic}/{partition}"`` (their own tracking rows).
    Within a partition records arrive in log order (the relay publishes in order, keyed by
    account); a republished duplicate has a position at or below the tracked one and is
    skipped.

Tracking after the data
    ``apply`` writes tracking rows only after every data write of the batch has returned
    (``BatchStore`` holds them back). On HBase one ``apply`` is several independent
    ``mutateRowsTs`` calls (one per version) sent concurrently, so a tracking row written in
    the same call could land before the cells it vouches for; a worker killed in between
    would then skip events whose cells never arrived.

Plain projections folded per batch
    Projections that only write absolute, versioned cells (all but ``counters``) run over a
    partition's whole batch in fold mode: only each cell's final put and the highest deletes
    are written, with the same versions a live projection gives (``ProjectionRunner``'s fold
    is digest-equal to live). On HBase every distinct version of a table is its own Thrift1
    call, so folding (e.g. a mailbox row rewritten by every delivery) saves most calls.

Plain tables written behind (``write``: what the workers use)
    The plain projections' folds go to the store as they are (``BatchStore.load``; on HBase
    straight into Thrift2 calls, ``HBaseWrites.load``). ``write`` keeps every partition's
    folds until the batch is projected and hands them, as one write (per table, calls filled
    across partitions), to a writer thread; it returns once the rows projections read and the
    dead letters are written. Nothing a projection reads is in that write, so the next batch
    may be applied meanwhile. ``Written.settle()`` waits for the write (or writes again after
    a failure), then writes the batch's tracking rows; only then are its offsets committed.
    Before the tables switch (the catalog), every unsettled batch is settled first: the
    handover reads the tracking rows. ``apply`` is ``write`` without the writer thread.

Read-modify-write projections (``counters``) with a redo record
    ``counters`` reads its row, adds, and writes absolute values plus the row's guard
    position ``c:pos``; it is exact under redelivery only if the row's cells and its guard
    land together. HBase makes one row mutation atomic, but Thrift1 carries one timestamp per
    call, so a row whose cells have several versions (a batch folds many events into it) is
    several calls, and a crash between them would leave counts ahead of or behind their
    guard. So before such a row is written, its complete set of mutations goes into one
    cell of the ``stream_redo`` table (one atomic write); then the row is written, then the
    redo record deleted. Whoever next reads the row (a restarted worker, the next owner of
    the partition) first finds any redo record left by a crash and completes it; absolute
    values and versions make completing it twice harmless. Rows of these tables are read
    once per batch and kept current in a batch-local cache.

Following the catalog (``catalog=``: what the workers pass)
    Physical table names are resolved through the catalog, as the read side does, and its
    generation is read at the start of every batch: after a blue/green rebuild switched
    tables, the next batch writes the new ones. What a partition applied to the old tables
    after the rebuild read the log is replayed into the new ones first (``handover``).

Poison records
    A record from a topic this projector does not consume, a value that is not an event
    record (``CorruptEvent`` from ``decode_record``) or an event a projector fails on
    (``CorruptEvent`` from the runner) is retried ``attempts`` times and then written to the
    ``dead_letters`` table (row ``topic/partition/offset``; cells: error, raw key and value,
    first and last seen, how often, every attempt); the batch goes on without it. Errors of
    the table store itself are *not* poison: they propagate, nothing is acknowledged, and the
    caller retries. ``adapters.streaming.deadletters`` shows, discards and redrives them.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import Any

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from adapters.eventlog.records import decode_record
from adapters.eventlog.sealing import keys_read_ahead
from adapters.eventlog.transcoder import ext_hook, ext_hook_for, sealed_key_ids
from adapters.streaming.batchstore import REDO, BatchStore
from adapters.streaming.deadletters import (
    DEAD_LETTERS,
    DeadLetter,
    discard_dead_letter,
    list_dead_letters,
    record_failures,
)
from adapters.streaming.handover import Handover
from adapters.streaming.partitions import (
    TP,
    BatchResult,
    Decoded,
    HandoverGap,
    Item,
    Physical,
    Poison,
    Record,
    _event_time,
    _Partition,
    _Progress,
    lag,
    partition_projections,
)
from domain.errors import CorruptEvent
from projections import names as n
from projections.registry import ALL, Projection
from projections.runner import ProjectionRunner, identity
from projections.tablestore import Put, TableLoad, TableStore

log = logging.getLogger("letterlog.stream")

__all__ = [
    "DEAD_LETTERS",
    "REDO",
    "BatchResult",
    "DeadLetter",
    "Decoded",
    "HandoverGap",
    "Record",
    "StreamProjector",
    "Written",
    "discard_dead_letter",
    "list_dead_letters",
    "partition_projections",
]

# -- the projector ----------------------------------------------------------------------------


class Written:
    """A batch ``StreamProjector.write`` applied, its plain tables being written behind:
    ``settle()`` waits for that write (or, after it failed, writes them again), calls the
    ``after_write`` hook, then writes the batch's tracking rows, and returns the result;
    only then is the batch written (its offsets may be committed). Safe to call from any
    thread, again after a failure, and again once settled (it does nothing then)."""

    def __init__(self, result: BatchResult, store: BatchStore, loads: list[TableLoad],
                 held: list[Put], pending: Future[None] | None,
                 after_write: Callable[[BatchResult], None] | None) -> None:
        self.result = result
        self._store = store
        self._loads = loads
        self._held = held
        self._pending = pending
        self._after_write = after_write
        self._lock = threading.Lock()
        self._stage = 0  # 0: plain tables being written, 1: written, 2: tracked (settled)
        self.started = 0.0  # when the batch's write began (``perf_counter``; the worker's log)

    @property
    def settled(self) -> bool:
        return self._stage == 2

    def settle(self) -> BatchResult:
        with self._lock:
            if self._stage == 0:
                pending, self._pending = self._pending, None
                if pending is not None:
                    pending.result()  # raises the write's failure; the next call writes again
                else:
                    self._store.write_loads(self._loads)
                self._loads = []
                self._stage = 1
                if self._after_write is not None:
                    self._after_write(self.result)
            if self._stage == 1:
                self._store.write_tracking(self._held)
                self._stage = 2
        return self.result


class StreamProjector:
    """Applies batches of Kafka event records to a table store; see the module docstring.

    ``topics``: the Kafka topics it consumes (records of any other go to dead letters).
    ``threads``: partitions of one batch are applied concurrently (different rows).
    ``after_write(result)``: called once the batch's data is written, before tracking rows
    and before ``apply`` returns (a test hook: a worker killed there has written cells whose
    offsets are not committed and whose tracking is not recorded).
    """

    def __init__(
        self,
        store: TableStore,
        topics: Collection[str],
        projections: Sequence[Projection] = ALL,
        physical: Physical = identity,
        *,
        attempts: int = 3,
        backoff: float = 0.05,
        threads: int = 4,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        after_write: Callable[[BatchResult], None] | None = None,
        catalog: Any = None,
        replay: Callable[[int, int], Iterable[tuple[int, Any]]] | None = None,
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts: must be at least 1")
        self.store = store
        self.topics = frozenset(topics)
        self.projections = tuple(projections)
        self.attempts = attempts
        self.backoff = backoff
        self.clock = clock
        self.sleep = sleep
        self.after_write = after_write
        self.catalog = catalog  # a ``Catalog`` over ``store``: names follow its switches
        self.replay = replay  # (first, last) -> the log's (position, event)s: repairs a gap
        self._plain = tuple(p for p in self.projections if not p.reads)
        self._rmw = tuple(p for p in self.projections if p.reads)
        self._progress: dict[TP, _Progress] = {}
        self._threads = max(1, threads)
        self._pool: ThreadPoolExecutor | None = None
        self._behind: ThreadPoolExecutor | None = None  # writes a batch's plain tables behind
        self._unsettled: list[Written] = []  # batches ``write`` returned, oldest first
        if catalog is not None:
            catalog.refresh()
            physical = catalog.physical
        self._bind(physical)

    def _bind(self, physical: Physical) -> None:
        """Writes to ``physical``'s tables from now on (runners rebuilt on first use)."""
        self.physical = physical
        cached = frozenset(physical(t) for p in self._rmw for t in p.reads)
        generation = None if self.catalog is None else self.catalog.generation
        self._store = BatchStore(self.store, physical(n.TRACKING), cached,
                                  physical(REDO.name), generation)
        self._partitions: dict[TP, _Partition] = {}
        self._handover = Handover(self.store, physical, self.projections, self.replay)
        self.dead_letters_table = physical(DEAD_LETTERS.name)

    def create_tables(self) -> None:
        """Creates every projection table, tracking, ``dead_letters`` and ``stream_redo``
        (no-op if they exist)."""
        ProjectionRunner(self.store, self.projections, self.physical).create_tables()
        self.store.create_table(replace(DEAD_LETTERS, name=self.dead_letters_table))
        self.store.create_table(replace(REDO, name=self.physical(REDO.name)))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._behind is not None:
            self._behind.shutdown(wait=True)
            self._behind = None

    def forget(self, partitions: Iterable[TP]) -> None:
        """Drops the runners of partitions no longer assigned (their tracked positions are
        read again from the store if they come back)."""
        for tp in partitions:
            self._partitions.pop(tuple(tp), None)  # type: ignore[arg-type]

    # -- applying ---------------------------------------------------------------------------

    def decode(self, records: Sequence[Record]) -> Decoded:
        """The batch's records decoded, by partition (pure: reads and writes nothing, so a
        caller may decode the next batch while ``apply`` writes this one)."""
        by_tp: dict[TP, list[Record]] = {}
        for r in records:
            by_tp.setdefault((r.topic, r.partition), []).append(r)
        # the keys of the batch's sealed parts in one query per key store (ADR 0117: one
        # round trip to the log's database per batch, not one per sealed record)
        hook = ext_hook_for(keys_read_ahead(sealed_key_ids([r.value for r in records])))
        return Decoded(records, by_tp,
                       {tp: self._decode_all(rs, hook) for tp, rs in by_tp.items()})

    def apply(self, records: Sequence[Record], decoded: Decoded | None = None) -> BatchResult:
        """Applies a batch; returns once every cell, dead letter and tracking row is written.
        Raises only errors of the table store (nothing then is known to be written).
        ``decoded``: ``decode(records)``, if the caller decoded them already."""
        result = self._project(records, decoded, behind=False)
        if self.after_write is not None:
            self.after_write(result)
        self._store.flush()
        return result

    def write(self, records: Sequence[Record], decoded: Decoded | None = None) -> Written:
        """Applies a batch with its plain tables written behind (see the module docstring):
        returns once the rows projections read (``counters``) and the dead letters are
        written, with every partition's folds of the other tables handed to a writer thread
        as one write; ``Written.settle()`` waits for that write, then writes the tracking
        rows. The next batch may be applied meanwhile: nothing it reads is in that write.
        Raises only errors of the table store."""
        result = self._project(records, decoded, behind=True)
        loads, held = self._store.detach()
        pending = self._behind_pool().submit(self._store.write_loads, loads) if loads else None
        written = Written(result, self._store, loads, held, pending, self.after_write)
        self._unsettled = [w for w in self._unsettled if not w.settled] + [written]
        return written

    def _project(self, records: Sequence[Record], decoded: Decoded | None,
                 behind: bool) -> BatchResult:
        if decoded is None or decoded.records is not records:
            decoded = self.decode(records)
        by_tp = decoded.by_tp
        result = BatchResult(records=len(records))
        self._follow_catalog()
        for tp in by_tp:  # every partition's handover checked before anything is written
            self._partition(tp)
        # a failed attempt's folds and tracking rows stay in the batch store: the runners
        # that made them have moved past those events, the next attempt writes them
        self._store.begin(behind=behind)
        parts = decoded.items
        self._prefetch([item for items, _ in parts.values() for item in items])
        if len(by_tp) <= 1 or self._threads == 1:
            outcomes = [self._apply_partition(tp, rs, *parts[tp]) for tp, rs in by_tp.items()]
        else:
            pool = self._executor()
            futures = [pool.submit(self._apply_partition, tp, rs, *parts[tp])
                       for tp, rs in by_tp.items()]
            wait(futures)  # all of them, even if one failed: no thread outlives the call
            outcomes = [f.result() for f in futures]
        for (tp, rs), (applied, duplicates, dead) in zip(by_tp.items(), outcomes, strict=True):
            result.applied += applied
            result.duplicates += duplicates
            result.dead_letters += dead
            result.offsets[f"{tp[0]}/{tp[1]}"] = rs[-1].offset
        return result

    def settle_all(self) -> None:
        """Settles every batch written behind and not settled yet, oldest first (before the
        tables switch: a partition's handover reads the tracking rows they hold)."""
        for written in self._unsettled:
            written.settle()
        self._unsettled = []

    def _behind_pool(self) -> ThreadPoolExecutor:
        if self._behind is None:
            self._behind = ThreadPoolExecutor(1, thread_name_prefix="stream-write-behind")
        return self._behind

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="stream-partition")
        return self._pool

    def _partition(self, tp: TP) -> _Partition:
        part = self._partitions.get(tp)
        if part is None:
            if self.catalog is not None:
                gaps = self._handover.gaps(tp)
                if gaps and self.replay is None:
                    raise HandoverGap(gaps[0].describe(tp))
                if gaps:
                    self._handover.repair(tp, gaps, self._store)
            part = _Partition(self._store, tp, self._plain, self._rmw, self.physical)
            self._partitions[tp] = part
        return part

    # -- following the catalog (see the module docstring) ------------------------------------

    def _follow_catalog(self) -> None:
        if self.catalog is None or not self.catalog.refresh():
            return
        # what earlier batches wrote behind lands (in the old tables) and is tracked first,
        # and what a failed attempt kept: the handover reads the tracking rows
        self.settle_all()
        self._store.drain()
        log.warning("catalog generation %d: tables switched; writing %s from now on",
                    self.catalog.generation,
                    ", ".join(sorted({self.physical(t.name) for p in self.projections
                                      for t in p.tables})))
        self._bind(self.catalog.physical)
        self.create_tables()

    def _decode_all(self, records: list[Record], hook: Callable[[int, bytes], Any]
                    ) -> tuple[list[Item], list[Poison]]:
        items: list[Item] = []
        poison: list[Poison] = []
        for record in records:
            try:
                position, event = self._decode(record, hook)
            except CorruptEvent as error:
                poison.append((record, str(error), None))
                continue
            items.append((record, position, event))
        return items, poison

    def _prefetch(self, items: list[Item]) -> None:
        """Reads, all at once before any write, the rows the read-modify-write projections
        will read, found by running them on an empty row (they are pure), once per Kafka key
        (``counters`` reads its account's row). Only an optimisation: a row missed here is
        read when the projection asks for it."""
        if not self._rmw:
            return
        wanted: set[tuple[str, bytes]] = set()

        def record(table: str, row: bytes) -> dict[bytes, bytes]:
            wanted.add((self.physical(table), row))
            return {}

        handles = {p: p.handles for p in self._rmw}
        done: set[bytes] = set()  # Kafka keys (accounts) whose rows are found already
        for r, position, event in items:
            if r.key is not None and r.key in done:
                continue  # the rows read are the account's: one event per account suffices
            before = len(wanted)
            for p, classes in handles.items():
                if type(event) in classes:
                    with contextlib.suppress(Exception):  # the real run reports it
                        p.project(event, position, record)
            if r.key is not None and len(wanted) > before:
                done.add(r.key)
        if len(wanted) <= 1 or self._threads == 1:
            for table, row in wanted:
                self._store.get_cells(table, row)
            return
        pool = self._executor()
        futures = [pool.submit(self._store.get_cells, table, row) for table, row in wanted]
        wait(futures)
        for f in futures:
            f.result()

    def _apply_partition(self, tp: TP, records: list[Record], items: list[Item],
                         poison: list[Poison]) -> tuple[int, int, int]:
        part = self._partition(tp)
        poison = list(poison)
        start = part.position()
        try:
            part.apply([(position, event) for _, position, event in items])
        except CorruptEvent as first:
            log.warning("%s/%d: %s; applying the batch event by event", tp[0], tp[1], first)
            poison.extend(self._apply_each(part, items))
        if poison:
            self._write_dead_letters(poison)
        failed = {id(record) for record, _, _ in poison}
        new = [(r, p, e) for r, p, e in items if p > start and id(r) not in failed]
        duplicates = sum(1 for _, p, _ in items if p <= start)
        progress = self._progress.setdefault(tp, _Progress())
        progress.offset = max(progress.offset, records[-1].offset)
        progress.records += len(records)
        if new:
            _, position, event = new[-1]
            progress.position = max(progress.position, position)
            progress.event_time = _event_time(event) or new[-1][0].timestamp
        return len(new), duplicates, len(poison)

    def _decode(self, record: Record, hook: Callable[[int, bytes], Any] = ext_hook
                ) -> tuple[int, Any]:
        if record.topic not in self.topics:
            raise CorruptEvent(f"record from topic {record.topic!r}, which this projector does "
                               f"not consume ({sorted(self.topics)})")
        last: CorruptEvent | None = None
        for _ in range(self.attempts):
            try:
                return decode_record(record.value if record.value is not None else b"", hook)
            except CorruptEvent as error:
                last = error
        assert last is not None
        raise last

    def _retrying(self) -> Retrying:
        return Retrying(
            retry=retry_if_exception_type(CorruptEvent),
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential(multiplier=self.backoff, max=1.0),
            sleep=self.sleep,
            reraise=True,
        )

    def _apply_each(self, part: _Partition,
                    items: list[Item]) -> list[tuple[Record, str, int | None]]:
        """Event by event, each retried ``attempts`` times; the ones that keep failing are
        returned (the runners skip what is applied already)."""
        poison: list[Poison] = []
        for record, position, event in items:
            try:
                part.apply_one(position, event, self._retrying)
            except CorruptEvent as error:
                log.error("%s/%d@%d: dead letter after %d attempts: %s", record.topic,
                          record.partition, record.offset, self.attempts, error)
                poison.append((record, str(error), position))
        return poison

    def _write_dead_letters(self, poison: list[tuple[Record, str, int | None]]) -> None:
        record_failures(self.store, self.dead_letters_table, poison, now=self.clock(),
                        tries=self.attempts)

    # -- lag ----------------------------------------------------------------------------------

    def progress(self) -> dict[str, dict[str, Any]]:
        return {f"{t}/{p}": {"offset": g.offset, "position": g.position,
                             "event_time": g.event_time, "records": g.records}
                for (t, p), g in sorted(self._progress.items())}

    def lag(self, highwaters: Mapping[TP, int], committed: Mapping[TP, int | None] | None = None,
            now: float | None = None) -> dict[str, Any]:
        """Lag per partition and in all (``partitions.lag``) from this projector's progress."""
        return lag(self._progress, highwaters, committed,
                   self.clock() if now is None else now)
