"""What follows the append of a purge or an erasure: crypto-shredding, then the files.

The purge jobs (``jobs.PurgeJobs``, through ``domain.purging.Purging``) and the facade's
erasures hand what they purged to a ``Shredding``, never back to the facade:

- ``purged`` (right after a purge job's append): the messages' data keys are destroyed
  (their personal data in the log can no longer be read), their payloads' grace period
  starts, and on scale-out what ``letterlog erase complete`` still owes is recorded
  (``scaleout``);
- ``after`` (once a run or an erasure is done): the saved views lose the purged messages,
  Spark's run files go, the SQLite files' WAL is truncated, the embedded tables compacted
  (``aftermath``, built the first time it is needed: a command that reads never loads it).

Built by ``adapters.bootstrap`` from the settings, the log and the payload store, and handed
to the facade and the purge jobs (ADR 0056).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from uuid import UUID

from eventsourcing.utils import get_topic

from adapters.operations.faults import fault_point
from domain.message import Message
from domain.personal import Personal
from projections import names as pn
from projections.keys import payload_row

if TYPE_CHECKING:
    from adapters.config.settings import Settings
    from adapters.eventlog.store import MailLog
    from adapters.lifecycle.aftermath import Aftermath
    from adapters.lifecycle.completed import Completion
    from domain.ports import PayloadStore
    from projections.tablestore import TableStore

__all__ = ["Shredding", "SweepingKeys"]


@runtime_checkable
class SweepingKeys(Protocol):
    """Data keys wrapped under key-encryption keys (``WrappedKeyStore``): the vault is rid
    of every KEK rotated away and no longer used."""

    def sweep(self, retired: Iterable[UUID] = ()) -> int: ...


class Shredding:
    """The aftermath of purges and erasures on one store (module docstring). ``completion``:
    the last run's or erasure's completion of the files (None before the first)."""

    def __init__(self, settings: Settings, log: MailLog, payloads: PayloadStore) -> None:
        self.settings = settings
        self.log = log
        self.payloads = payloads
        self.unfinished = 0  # messages purged since the last completion (completion.py)
        self.completion: Completion | None = None
        self.released: set[str] = set()  # payloads of messages purged in this run (ADR 0071)

    def max_position(self) -> int:
        return int(self.log.recorder.max_notification_id() or 0)

    # -- right after the append ----------------------------------------------------------
    def destroy_keys(self, messages: Sequence[Message]) -> int:
        """Their personal data in the log can no longer be read (crypto-shredding); how many
        keys were destroyed now."""
        return self.log.keys.destroy(p.key_id for m in messages
                                     if isinstance(p := m.personal, Personal)
                                     and p.key_id is not None)

    def purged(self, messages: Sequence[Message], *, crash_points: bool = True) -> None:
        """After a purge job's append: keys destroyed; the payloads are released: on the
        embedded tables deleted by ``free_released`` at the end of the same run (unless
        something refers to them or a delivery re-used them since the run began), on HBase
        their grace period starts (the workers apply ``Purged`` later: ADR 0045)."""
        if crash_points:
            fault_point("purge:appended")
        self.unfinished += len(messages)
        self.destroy_keys(messages)
        for m in messages:
            for sha in m.payloads_referred():
                if self.settings.table_store == "hbase":
                    self.payloads.touch(sha)  # the grace starts (ADR 0071)
                else:
                    self.released.add(sha)
        if crash_points:
            fault_point("purge:keys")
        if self.settings.table_store == "hbase" and messages:  # compacted by `erase complete`
            self.record_scale_out((), time.time(), len(messages))

    def free_released(self, host: Any, began: float) -> tuple[int, int]:
        """The payloads this run's purges released, deleted unless the read models (caught
        up: the ``Purged`` events applied) still refer to them or a delivery re-used them
        since ``began`` (a put touches them); as an erasure does, without a grace period
        (ADR 0071). How many were deleted, and their bytes."""
        shas, self.released = self.released, set()
        if not shas:
            return 0, 0
        host.catch_up()
        refs = host.physical(pn.PAYLOAD_REFS)
        freed = count = 0
        for sha in sorted(shas):
            if host.tables.get(refs, payload_row(sha)):
                continue
            size = self.payloads.delete_unless_touched(  # type: ignore[attr-defined]
                sha, began)  # the file store's (ADR 0071); the domain's port lacks it
            if size is not None:
                count, freed = count + 1, freed + size
        return count, freed

    def payloads_deleted(self, count: int) -> None:
        """Payloads the purge jobs deleted after their grace period: in HBase's payload table
        (ADR 0072) they stay in HBase's files until ``letterlog erase complete`` flushes and
        compacts it, so the run leaves the shared purge record that it finishes."""
        if count and self.settings.payloads_in_hbase():
            self.record_scale_out((), time.time(), 0)

    def purged_since(self, position: int) -> list[Message]:
        """Every message the log says was purged after ``position`` (``Message.Purged``
        read by topic, nothing else decoded), loaded: what a killed purge run or erasure
        that began at ``position`` may have left with its key (ADR 0063)."""
        recorder, topic = self.log.recorder, get_topic(Message.Purged)
        head = self.max_position()
        ids: dict[Any, None] = {}
        start = position + 1
        while start <= head:
            page = recorder.select_notifications(start, 5000, head, topics=[topic])
            if not page:
                break
            ids.update(dict.fromkeys(n.originator_id for n in page))
            start = page[-1].id + 1
        return [self.log.repository.get(i) for i in ids]

    def destroy_keys_purged_since(self, position: int) -> int:
        """The keys of every message purged after ``position`` destroyed (again: idempotent),
        and the vault rid of every KEK rotated away (``WrappedKeyStore.sweep``)."""
        destroyed = self.destroy_keys(self.purged_since(position))
        keys = self.log.keys
        if isinstance(keys, SweepingKeys):
            keys.sweep()
        return destroyed

    @cached_property
    def aftermath(self) -> Aftermath:
        """What follows once a run or an erasure is done (``aftermath``), built when first
        needed."""
        # local: start-up: ~40 modules (views, log reader, completion) only a purge or erasure uses
        from adapters.lifecycle.aftermath import Aftermath

        return Aftermath(self.settings, self.log)

    def record_scale_out(self, payloads: Iterable[str], began: float, messages: int) -> None:
        """On scale-out: what ``letterlog erase complete`` owes for this purge or erasure."""
        self.aftermath.record_scale_out(payloads, began, messages)

    # -- once a run or an erasure is done -----------------------------------------------
    def after(self, host: Any | None) -> None:
        """No plain text lingers (``aftermath``): the saved views and Spark's run files
        first, then the SQLite files' WAL truncated, waiting for readers at most
        ``erase_wait_seconds`` (deleted pages are zeroed already: secure_delete), then the
        embedded tables compacted. ``host``: the read models (None: this store keeps none)."""
        aftermath = self.aftermath
        in_views = aftermath.outside(host)
        self.completion = aftermath.complete(record=self.unfinished > 0,
                                             messages=self.unfinished)
        self.unfinished = 0
        aftermath.compact(host, in_views)

    def complete(self, *, record: bool = False) -> Completion:
        """Finishes the erasures still pending on this store's SQLite files (``letterlog
        erase complete``); with ``record``, one left unfinished is recorded."""
        return self.aftermath.complete(record=record, messages=self.unfinished)

    def pending(self) -> list[dict[str, Any]]:
        """The erasures not yet finished on the SQLite files (``letterlog erase status``)."""
        return self.aftermath.pending()

    def erase_from_views(self, tables: TableStore) -> dict[str, Any]:
        """Applies every purge and erasure in the log to every saved view in ``tables`` that
        has not had it yet (after each purge run and erasure, and when a view is built)."""
        return self.aftermath.erase_from_views(tables)
