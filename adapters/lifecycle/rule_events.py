"""The purge of rule events by status (Sterling's UnprocessedEventPurgeJob,
ProcessingEventPurgeJob, CompletedEventPurgeJob, FailedEventPurgeJob), with the message
purge's technique: one queue per status (``rule_event_queue``: ``rule-pending``,
``rule-processing``, ``rule-complete``, ``rule-failed``), 16 shards, one-minute buckets, a
pointer per queue and shard (``purge_pointer``), a peek-back window, and a double check of
each candidate against the log (its status now, and how long it has had it) before it is
discarded (``RuleEvent.Discarded``: gone from the read model, the queue entry with it).

A second pass discards the rule events of messages purged or erased since (their message
is gone: nothing left to process).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

from adapters.lifecycle import queuewalk as walk
from domain.errors import MessageNotFound
from domain.rules import STATUS_QUEUES, RuleEvent
from domain.values import MessageState
from projections import names as n
from projections.codec import decode_datetime
from projections.keys import PURGE_SHARDS, minute_bucket
from projections.purge_queue import POINTER_SPEC

if TYPE_CHECKING:
    from adapters.face import Store

BATCH = 200


@dataclass
class StatusReport:
    queue: str
    scanned: int = 0
    purged: int = 0
    kept: int = 0


def ttls(settings: Any) -> dict[str, timedelta]:
    days = {"rule-pending": settings.rule_event_pending_ttl_days,
            "rule-processing": settings.rule_event_processing_ttl_days,
            "rule-complete": settings.rule_event_complete_ttl_days,
            "rule-failed": settings.rule_event_failed_ttl_days}
    return {queue: timedelta(days=d) for queue, d in days.items()}


class RuleEventPurge:
    def __init__(self, store: Store, *, ttls: dict[str, timedelta], peek_back: timedelta,
                 clock: Callable[[], datetime]) -> None:
        self.store = store
        self.ttls = ttls
        self.peek_back = peek_back
        self.clock = clock

    def run(self, now: datetime, *, dry_run: bool = False) -> dict[str, Any]:
        self.store.catch_up()
        host = self.store.read_side()
        self.tables, self.physical = host.tables, host.physical
        # a dry run's count: each event once, as the run discards it once (an event may sit
        # in several buckets, and be due by its status and have lost its message too)
        self._counted: set[UUID] = set()
        self.tables.create_table(POINTER_SPEC)
        reports = [self._queue(queue, now, dry_run) for queue in STATUS_QUEUES]
        gone = self._messages_gone(dry_run)
        return {"now": now.isoformat(), "dry_run": dry_run,
                "queues": [asdict(r) for r in reports], "purged": sum(r.purged for r in
                                                                     reports) + gone,
                "message_gone": gone}

    def _queue(self, queue: str, now: datetime, dry_run: bool) -> StatusReport:
        report = StatusReport(queue)
        status = STATUS_QUEUES[queue]
        ttl = self.ttls[queue]
        horizon = minute_bucket(now - ttl)

        def due(e: RuleEvent) -> bool:  # the double check, on the log's word
            return e.status == status and e.status_since + ttl <= now

        for shard in range(PURGE_SHARDS):
            start = walk.first_bucket(self.tables, queue, shard, self.peek_back)
            for bucket, entries in self._buckets(queue, shard, start, horizon):
                for i in range(0, len(entries), BATCH):
                    batch = entries[i:i + BATCH]
                    report.scanned += len(batch)
                    if dry_run:
                        found = [self.store.rule_event_record(eid) for eid, _ in batch]
                        fresh = {e.id for e in found if due(e)} - self._counted
                        self._counted |= fresh
                        report.purged += len(fresh)
                        report.kept += len(batch) - len(fresh)
                        continue
                    change = self.store.discard_rule_events(
                        [eid for eid, _ in batch],
                        f"purged: {status} for {ttl}", queue=queue,
                        since=[since for _, since in batch], check=due)
                    purged = len(change.extra.get("discarded", ()))
                    report.purged += purged
                    report.kept += len(batch) - purged
                if not dry_run:
                    self._advance(queue, shard, bucket)
            if not dry_run:
                self._advance(queue, shard, horizon)
        return report

    def _messages_gone(self, dry_run: bool) -> int:
        gone: list[UUID] = []
        for e in self.store.rule_events():
            try:
                state = self.store.message_record(UUID(e["message_id"])).state
            except MessageNotFound:
                state = MessageState.PURGED.value
            if state == MessageState.PURGED.value:
                gone.append(UUID(e["id"]))
        if dry_run:  # those a queue above would have discarded are not there any more
            return len(set(gone) - self._counted)
        if not gone:
            return 0
        change = self.store.discard_rule_events(gone, "its message was purged")
        return len(change.extra.get("discarded", ()))

    def _buckets(self, queue: str, shard: int, start: int,
                 horizon: int) -> Iterator[tuple[int, list[tuple[UUID, datetime]]]]:
        table = self.physical(n.RULE_EVENT_QUEUE)
        for bucket, entries in walk.buckets(self.tables, table, queue, shard, start, horizon):
            yield bucket, [(i, decode_datetime(cells[n.PQ_SINCE])) for i, cells in entries]

    def _advance(self, queue: str, shard: int, bucket: int) -> None:
        walk.advance(self.tables, queue, shard, bucket, self.clock())
