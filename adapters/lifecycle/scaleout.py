"""Completing erasures on the scale-out deployment (stream workers projecting into HBase).

On scale-out, ``erase-message`` and ``erase-account`` append ``Message.Purged`` and destroy
the data keys at once, but the read-model rows are deleted later, by the stream workers,
once the relay has published the events and the workers have applied them. Two things can
only be decided after that:

- the payloads: whether another live message still refers to an erased message's payload
  is read from ``payload_refs``, a log-derived index that holds the erasure only once the
  workers have applied the ``Purged`` events (reading it earlier sees the erased message's
  own reference and keeps the payload);
- HBase's files: the workers' deletes (and the payloads' rows deleted from HBase's payload
  table, ADR 0072) are first in the region server's memstore and write-ahead log; the
  tables are flushed, then major-compacted (``compaction``).

So an erasure records what it owes (``record_erasure``): in the log's database when the log
is in PostgreSQL (``sharedpending``), which any host's ``erase complete`` finishes, else in
the data directory (``scaleoutrecords``). ``letterlog erase complete`` (``complete``)
finishes every record: it waits, within a bound, for the relay and the workers to pass the
recorded positions, deletes each payload nothing refers to any more and that no delivery
re-used since the erasure began, flushes and major-compacts the tables a purge deletes
from, and removes the records.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from adapters.lifecycle.compaction import (
    CompactionFailed,
    Progress,
    flush_and_compact,
    purged_tables,
)
from adapters.lifecycle.scaleoutrecords import ScaleOutPending
from projections import names as pn
from projections.keys import payload_row

if TYPE_CHECKING:
    from adapters.lifecycle.sharedpending import SharedPending

ReadSide = Callable[[int, float], str]  # (target position, deadline) -> '' or why not


def pending_records(settings: Any) -> ScaleOutPending | SharedPending:
    """Where this deployment keeps what its erasures owe: the log's PostgreSQL database when
    the log is there (every host sees them), else the data directory."""
    if settings.event_store == "postgres" and settings.postgres_dsn:
        # local: psycopg, a client library, loaded only when the log is in PostgreSQL
        from adapters.lifecycle.sharedpending import SharedPending

        return SharedPending(settings.postgres_dsn, settings.data,
                             timeout=settings.postgres_timeout)
    return ScaleOutPending(settings.data)


@dataclass
class ScaleOutCompletion:
    """What ``complete`` did."""

    complete: bool = True
    pending: int = 0  # records found
    position: int = 0  # the log position the workers were waited for
    workers_reached: bool = True
    waited_seconds: float = 0.0
    payloads_freed: int = 0
    payload_bytes_freed: int = 0
    payloads_kept: int = 0  # still referred to, or re-used since the erasure began
    tables_compacted: list[str] = field(default_factory=list)
    compaction_seconds: float = 0.0
    pending_cleared: int = 0
    problem: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        if not self.pending:
            return "scale-out: no erasure pending"
        if not self.complete:
            return f"scale-out: erasure not complete: {self.problem}"
        return (f"scale-out: {self.pending_cleared} erasure(s) completed: workers at position "
                f"{self.position} (waited {self.waited_seconds:.1f} s); freed "
                f"{self.payloads_freed} payloads ({self.payload_bytes_freed} bytes), kept "
                f"{self.payloads_kept}; flushed and major-compacted "
                f"{len(self.tables_compacted)} tables in {self.compaction_seconds:.1f} s")


def record_erasure(store: Any, payloads: Iterable[str], began: float, messages: int) -> None:
    """An erasure (or purge) on scale-out: what ``complete`` must still do (one without
    payloads, as a purge run's batch, goes into the shared ``purges.json``)."""
    pending = pending_records(store.settings)
    payloads = list(payloads)
    if payloads:
        pending.record(position=store.max_position(), began=began, payloads=payloads,
                       messages=messages)
    else:
        pending.record_purge(position=store.max_position(), messages=messages)


def pending(store: Any) -> list[dict[str, Any]]:
    """The records not yet completed (``letterlog erase status``), without payload hashes."""
    return [{"since": r["since"], "position": r["position"], "messages": r["messages"],
             "payloads": len(r.get("payloads", []))}
            for _, r in pending_records(store.settings).records()]


def complete(store: Any, *, wait: float, read_side: ReadSide,
             progress: Progress = lambda _: None) -> ScaleOutCompletion:
    """Finishes every pending scale-out erasure within ``wait`` seconds (module docstring).
    ``read_side(target, deadline)`` waits until the relay and the workers have applied the
    log up to ``target`` or ``deadline`` (``time.monotonic``) passes: '' when they have,
    else why not (``adapters.streaming.lag.wait_until_applied``)."""
    settings = store.settings
    records = pending_records(settings).records()
    outcome = ScaleOutCompletion(pending=len(records))
    if not records:
        return outcome
    began = time.monotonic()
    deadline = began + wait
    outcome.position = max(int(r["position"]) for _, r in records)
    problem = read_side(outcome.position, deadline)
    outcome.waited_seconds = round(time.monotonic() - began, 3)
    if problem:
        outcome.complete, outcome.workers_reached, outcome.problem = False, False, problem
        return outcome
    host = store.projections
    tables = host.tables
    refs = host.physical(pn.PAYLOAD_REFS)
    for _, r in records:
        for sha in r.get("payloads", []):
            freed = None
            if not tables.get(refs, payload_row(sha)):
                freed = store.payloads.delete_unless_touched(sha, float(r["began"]))
            if freed is None:
                outcome.payloads_kept += 1
            else:
                outcome.payloads_freed += 1
                outcome.payload_bytes_freed += freed

    names = purged_tables(settings, host)
    compacted = time.monotonic()
    try:
        hbase_names = flush_and_compact(settings, tables, names, deadline, progress)
    except CompactionFailed as error:
        outcome.complete, outcome.problem = False, str(error)
        return outcome
    outcome.compaction_seconds = round(time.monotonic() - compacted, 3)
    outcome.tables_compacted = hbase_names
    outcome.pending_cleared = pending_records(settings).clear(records)
    return outcome
