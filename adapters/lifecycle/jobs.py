"""Purge jobs (Sterling Global Mailbox): one per queue, its shards in parallel threads.

A shard is read from its pointer (``purge_pointer``, minus the peek-back window) bucket by
bucket up to the queue's horizon (``now - TTL``); every entry is double-checked against the
message's current state (``domain.purging``), and the pointer is advanced only once a
bucket is done. A job stopped mid-bucket leaves the pointer where it was: the next run reads
the bucket again, and what was purged already is kept by the double check. The pointer only
grows (its cell's version is the bucket number), so two purgers never move it back.

The payload job is not a table scan: every stored payload carries its last write, re-use or
release time (``written_at``); one that nothing refers to (``payload_refs``) and that was not
touched for the grace period is deleted. That covers payloads whose last message was purged
on HBase tables (the purge touches them: the grace starts then; on the embedded tables the
run deletes them itself, ``release``: ADR 0071), payloads of commands that never committed
(orphans) and payloads re-used during the grace period (a put touches them, and the new
message's reference shows up in ``payload_refs``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from adapters.lifecycle import queuewalk as walk
from adapters.payloads import SweepingPayloads
from domain.lifecycle import MESSAGE_QUEUES, QUEUE_PAYLOADS, Retention
from domain.purging import Outcome, Purging, QueueEntry
from projections import names as n
from projections.codec import decode_datetime
from projections.keys import PURGE_SHARDS, minute_bucket, payload_row
from projections.purge_queue import POINTER_SPEC
from projections.tablestore import TableStore

BATCH = 200  # entries decided and appended together


@dataclass
class QueueReport:
    queue: str
    scanned: int = 0
    purged: int = 0
    expired: int = 0
    kept: int = 0
    message_bytes: int = 0  # the purged messages' sizes
    payloads_freed: int = 0
    payload_bytes_freed: int = 0
    seconds: float = 0.0

    def add(self, outcome: Outcome) -> None:
        self.purged += len(outcome.purged)
        self.expired += len(outcome.expired)
        self.kept += len(outcome.kept)
        self.message_bytes += outcome.purged_bytes


@dataclass
class PurgeReport:
    now: str
    dry_run: bool
    queues: list[QueueReport] = field(default_factory=list)
    position: int = 0  # the log's head after the run: read models that reached it show it
    erasure: dict[str, Any] | None = None  # the files' completion (lifecycle/completion.py)

    def total(self, name: str) -> int:
        return sum(int(getattr(q, name)) for q in self.queues)

    def as_dict(self) -> dict[str, Any]:
        return {
            "now": self.now, "dry_run": self.dry_run,
            "purged": self.total("purged"), "expired": self.total("expired"),
            "kept": self.total("kept"), "payloads_freed": self.total("payloads_freed"),
            "message_bytes": self.total("message_bytes"),
            "payload_bytes_freed": self.total("payload_bytes_freed"),
            "queues": [asdict(q) for q in self.queues], "position": self.position,
            **({"erasure": self.erasure} if self.erasure is not None else {}),
        }


Progress = Callable[[str, int], None]  # (queue, entries done so far); may raise to stop


class PurgeJobs:
    def __init__(self, purging: Purging, tables: TableStore, physical: Callable[[str], str],
                 payloads: Any, *, retention: Retention, threads: int = 4,
                 catch_up: Callable[[], Any] = lambda: None,
                 after_run: Callable[[], Any] = lambda: None, batch: int = BATCH,
                 release: Callable[[float], tuple[int, int]] = lambda began: (0, 0),
                 payloads_deleted: Callable[[int], Any] = lambda count: None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.purging = purging
        self.tables = tables
        self.physical = physical
        self.payloads = payloads
        self.retention = retention
        self.threads = threads
        self.catch_up = catch_up
        self.after_run = after_run
        self.release = release
        self.payloads_deleted = payloads_deleted  # told how many the payloads job deleted
        self.batch = batch
        self.clock = clock
        tables.create_table(POINTER_SPEC)

    # -- running -----------------------------------------------------------------------------
    def run(self, now: datetime, queues: tuple[str, ...] = (*MESSAGE_QUEUES, QUEUE_PAYLOADS),
            *, dry_run: bool = False, progress: Progress | None = None) -> PurgeReport:
        report = PurgeReport(now.isoformat(), dry_run)
        began = time.time()  # a payload re-used after this is kept (``release``)
        self.catch_up()
        for queue in queues:
            t0 = time.perf_counter()
            if queue == QUEUE_PAYLOADS:
                self.catch_up()  # references of what was just purged or delivered
                done = self._payloads(now, dry_run)
            else:
                done = self._queue(queue, now, dry_run, progress)
            done.seconds = round(time.perf_counter() - t0, 3)
            report.queues.append(done)
        if not dry_run:
            # the payloads of the messages purged in this run, deleted now unless referred
            # to or re-used since the run began (no grace period: ADR 0071)
            count, freed = self.release(began)
            if count:
                payloads = next((r for r in report.queues if r.queue == QUEUE_PAYLOADS), None)
                if payloads is None:
                    payloads = QueueReport(QUEUE_PAYLOADS)
                    report.queues.append(payloads)
                payloads.payloads_freed += count
                payloads.payload_bytes_freed += freed
            self.after_run()
        return report

    def _queue(self, queue: str, now: datetime, dry_run: bool,
               progress: Progress | None) -> QueueReport:
        report = QueueReport(queue)
        horizon = minute_bucket(self.retention.horizon(queue, now))

        def shard(s: int) -> QueueReport:
            part = QueueReport(queue)
            self._shard(queue, s, horizon, now, dry_run, part, progress)
            return part

        pool = ThreadPoolExecutor(self.threads, thread_name_prefix=f"purge-{queue}")
        try:
            for part in pool.map(shard, range(PURGE_SHARDS)):
                for name in ("scanned", "purged", "expired", "kept", "message_bytes"):
                    setattr(report, name, getattr(report, name) + getattr(part, name))
        finally:
            pool.shutdown(cancel_futures=True)  # stopped: shards not started stay as they are
        return report

    def _shard(self, queue: str, shard: int, horizon: int, now: datetime, dry_run: bool,
               report: QueueReport, progress: Progress | None) -> None:
        start = walk.first_bucket(self.tables, queue, shard, self.retention.peek_back)
        for bucket, entries in self._buckets(queue, shard, start, horizon):
            for i in range(0, len(entries), self.batch):
                batch = entries[i:i + self.batch]
                report.add(self.purging.act(queue, batch, now, dry_run=dry_run))
                report.scanned += len(batch)
                if progress is not None:
                    progress(queue, len(batch))
            if not dry_run:
                self._advance(queue, shard, bucket)
        if not dry_run:
            self._advance(queue, shard, horizon)

    def _buckets(self, queue: str, shard: int, start: int,
                 horizon: int) -> Iterator[tuple[int, list[QueueEntry]]]:
        table = self.physical(n.PURGE_QUEUE)
        for bucket, entries in walk.buckets(self.tables, table, queue, shard, start, horizon):
            yield bucket, [QueueEntry(i, decode_datetime(cells[n.PQ_SINCE]),
                                      cells.get(n.PQ_REASON, b"").decode())
                           for i, cells in entries]

    # -- pointers ----------------------------------------------------------------------------
    def pointer(self, queue: str, shard: int) -> int | None:
        return walk.pointer(self.tables, queue, shard)

    def _advance(self, queue: str, shard: int, bucket: int) -> None:
        walk.advance(self.tables, queue, shard, bucket, self.clock())

    # -- payloads ----------------------------------------------------------------------------
    def _payloads(self, now: datetime, dry_run: bool) -> QueueReport:
        report = QueueReport(QUEUE_PAYLOADS)
        horizon = self.retention.horizon(QUEUE_PAYLOADS, now).timestamp()
        refs = self.physical(n.PAYLOAD_REFS)
        for sha256, size, written_at in list(self.payloads.list()):
            report.scanned += 1
            if written_at > horizon or self.tables.get(refs, payload_row(sha256)):
                report.kept += 1
                continue
            freed = size if dry_run else self.payloads.delete_unless_touched(sha256, horizon)
            if freed is None:
                report.kept += 1
                continue
            report.payloads_freed += 1
            report.payload_bytes_freed += freed
        if not dry_run and isinstance(self.payloads, SweepingPayloads):
            # what killed writes and deletes left (a content link alone: ADR 0099)
            self.payloads.discard_stale_writes(max(now.timestamp() - horizon, 3600.0))
        if report.payloads_freed and not dry_run:
            self.payloads_deleted(report.payloads_freed)
        return report
