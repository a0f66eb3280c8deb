"""What follows the append of a purge or an erasure: crypto-shredding, then the files.

The purge jobs (``jobs.PurgeJobs``, through ``domain.purging.Purging``) and the facade's
erasures hand what they purged to a ``Shredding``, never back to the facade:

- ``purged`` (right after a purge job's append): the messages' data keys are destroyed
  (their personal data in the log can no longer be read), their payloads' grace period
  starts, and on scale-out what ``letterlog erase complete`` still owes is recorded
  (``scaleout``);
- ``after`` (once a run or an erasure is done): the saved views lose the purged messages,
  run files a killed Spark job left are removed, the SQLite files' WAL is truncated and
  what is left unfinished recorded (``completion``), and the embedded tables a purge deletes
  from are flushed and compacted (HBase's are compacted by ``erase complete``).

Built by ``adapters.bootstrap`` from the settings, the log and the payload store, and handed
to the facade and the purge jobs (ADR 0056).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from uuid import UUID

from eventsourcing.utils import get_topic

from adapters.files.datadir import exclusive
from adapters.lifecycle.completion import KeyCluster, PendingErasures, complete
from adapters.operations.faults import fault_point
from domain.message import Message
from domain.personal import Personal
from projections import names as pn
from projections.capabilities import MajorCompacting
from projections.keys import payload_row

if TYPE_CHECKING:
    from adapters.config.settings import Settings
    from adapters.eventlog.store import MailLog
    from adapters.lifecycle.completion import Completion
    from domain.ports import PayloadStore
    from projections.tablestore import TableStore

__all__ = ["Shredding", "SweepingKeys", "VaultedKeys"]


@runtime_checkable
class SweepingKeys(Protocol):
    """Data keys wrapped under key-encryption keys (``WrappedKeyStore``): the vault is rid
    of every KEK rotated away and no longer used."""

    def sweep(self, retired: Iterable[UUID] = ()) -> int: ...


@runtime_checkable
class VaultedKeys(Protocol):
    """Data keys whose key-encryption keys are in a vault of their own (a file, or the key
    cluster: ``completion.KeyCluster``)."""

    vault: object


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
                    # the file store's and HBase's (ADR 0071); the domain's port lacks it
                    self.payloads.touch(sha)  # type: ignore[attr-defined]
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

    def record_scale_out(self, payloads: Iterable[str], began: float, messages: int) -> None:
        """On scale-out: what ``letterlog erase complete`` owes for this purge or erasure."""
        # local: start-up: 35 more module(s) for commands that never use it
        from adapters.lifecycle.scaleout import record_erasure

        record_erasure(self, payloads, began, messages)

    # -- once a run or an erasure is done -----------------------------------------------
    def after(self, host: Any | None) -> None:
        """No plain text lingers: the SQLite files' -wal are truncated, waiting for readers
        at most ``erase_wait_seconds`` (deleted pages are zeroed already: secure_delete;
        what is left unfinished is recorded: adapters/lifecycle/completion.py); the
        embedded tables a purge deletes from are flushed, then major-compacted. ``host``:
        the read models (None: this store keeps none)."""
        # saved views lose the purged messages too, before the files' WAL is truncated
        in_views = self.erase_from_views(host.tables)["tables"] if host is not None else []
        # local: start-up: 2 more module(s) for commands that never use it
        from adapters.sparkjob.rundirs import remove_stale_runs

        remove_stale_runs(Path(self.settings.data))  # run files a killed Spark job left
        self.completion = self.complete(record=self.unfinished > 0)
        self.unfinished = 0
        if host is None:
            return
        tables, physical = host.tables, host.physical
        if isinstance(tables, MajorCompacting) and self.settings.table_store != "hbase":
            # (else: workers write the deletes later; `erase complete` compacts after them:
            # lifecycle/scaleout)
            purged = [physical(t) for t in pn.PURGED_FROM] + in_views
            tables.flush(purged)
            tables.major_compact(purged)

    def complete(self, *, record: bool = False) -> Completion:
        """Finishes the erasures still pending on this store's SQLite files (``letterlog
        erase complete``); with ``record``, one left unfinished is recorded."""
        s = self.settings
        keys = self.log.keys
        vault = keys.vault if isinstance(keys, VaultedKeys) else None
        return complete(s.data, s.key_vault, wait=s.erase_wait_seconds, record=record,
                        position=self.max_position(), messages=self.unfinished,
                        key_cluster=vault if isinstance(vault, KeyCluster) else None)

    def pending(self) -> list[dict[str, Any]]:
        """The erasures not yet finished on the SQLite files (``letterlog erase status``)."""
        return [r for _, r in PendingErasures(self.settings.data).records()]

    def erase_from_views(self, tables: TableStore) -> dict[str, Any]:
        """Applies every purge and erasure in the log to every saved view in ``tables`` that
        has not had it yet (after each purge run and erasure, and when a view is built)."""
        return erase_from_views(self.settings, self.log, tables)


def erase_from_views(settings: Settings, log: MailLog, tables: TableStore) -> dict[str, Any]:
    """``Shredding.erase_from_views`` for a process that opens no payload store (the Spark
    job, which builds views from the log and the tables alone)."""
    # local: start-up: 4 more module(s) for commands that never use it
    from adapters.eventlog.reader import row_decoder, row_pages

    # local: start-up: 31 more module(s) for commands that never use it
    from adapters.readside.views import erase_purged

    with exclusive(settings.data, "views"):
        return erase_purged(tables, int(log.recorder.max_notification_id() or 0),
                            lambda start, stop: row_pages(log, start, stop, 2000),
                            row_decoder(log),
                            lambda i, version: log.repository.get(i, version=version))
