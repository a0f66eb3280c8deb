"""Purge and erasure: the purge jobs (built by ``adapters.bootstrap``, run here), the purge
queue, the right to erasure (``erase_message``, ``erase_account``) and the completion of
the files (``adapters.lifecycle``: ``shredding``, ``completion``, ``scaleout``).

A part of the ``Letterlog`` facade (``adapters.embedded``; ``parts.FacadePart``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from adapters.facade.parts import FacadePart
from domain.errors import InvalidCommand
from domain.lifecycle import ALL_QUEUES, Retention
from domain.message import Message
from projections import names as pn
from projections import queries as q
from projections.keys import payload_row

if TYPE_CHECKING:
    from adapters.lifecycle.completion import Completion
    from adapters.lifecycle.jobs import PurgeJobs, PurgeReport


class Erasure(FacadePart):
    """Messages leaving the store: when their queue's time is up, or at once on request."""

    def retention(self) -> Retention:
        return self.settings.retention()

    @property
    def completion(self) -> Completion | None:
        """The last purge run's or erasure's completion of the files (None before one)."""
        return self.shredding.completion

    def purge_jobs(self) -> PurgeJobs:
        """The purge jobs (built by bootstrap) on this store's read side."""
        return self._purge_jobs(self._read())

    def purge(self, now: datetime | None = None, queues: Sequence[str] | None = None, *,
              dry_run: bool = False, progress: Any = None) -> PurgeReport:
        """Runs every due purge job once (or those of ``queues``); see docs/lifecycle.md."""
        jobs = self.purge_jobs()
        chosen = tuple(queues) if queues else ALL_QUEUES
        unknown = [q for q in chosen if q not in ALL_QUEUES]
        if unknown:
            raise InvalidCommand(f"queue: {unknown[0]!r} is not one of {', '.join(ALL_QUEUES)}")
        report = jobs.run(now or datetime.now(UTC), chosen, dry_run=dry_run, progress=progress)
        report.position = self.max_position()  # the read models show the purge from here on
        if not dry_run and self.completion is not None:
            report.erasure = self.completion.as_dict()
        return report

    def purge_due(self, now: datetime | None = None, *, limit: int = 1000) -> list[q.PurgeEntry]:
        host = self._read()
        retention = self.retention()
        ttls = {queue: retention.ttl(queue) for queue in q.QUEUES}
        return self._query(lambda: q.due_purge_entries(
            host.tables, now or datetime.now(UTC), ttls=ttls, limit=limit,
            physical=host.physical))

    def erase_message(self, message_id: UUID, *, with_copies: bool = False) -> dict[str, Any]:
        """Purges one message now, whatever the TTLs (right to erasure). Other messages of
        the same content (same SHA-256) are reported: ``copies_remaining`` (ids, same
        account; erased too ``with_copies``), ``copies_in_other_accounts`` (never named)."""
        from adapters.lifecycle.copies import copies_of

        msg = self.mail.uow.message(message_id)
        self.catch_up()
        host = self._read()
        found = copies_of(host.tables, host.physical, message_id=message_id,
                          account_id=msg.account_id, sha256=msg.sha256, inline=msg.inline)
        result = self._erase([message_id, *(found.same_account if with_copies else [])])
        result["copies_remaining"] = [] if with_copies else [str(i) for i in found.same_account]
        result["copies_in_other_accounts"] = found.other_accounts
        return result

    def erase_account(self, address: str) -> dict[str, Any]:
        """Purges every message of an account now, whatever the TTLs (right to erasure)."""
        account = self.mail.account(address).id
        return self._erase([e.originator_id for _, e in self.events()
                            if type(e) in (Message.Delivered, Message.UploadBegun)
                            and e.account_id == account])

    def _erase(self, message_ids: list[UUID]) -> dict[str, Any]:
        """Purged, keys destroyed, and their payloads deleted at once unless something refers
        to them or a delivery re-used them since the erasure began (no grace period)."""
        began = time.time()
        released: list[Message] = []

        destroyed = 0

        def erased(messages: Sequence[Message]) -> None:
            nonlocal destroyed
            destroyed += self.shredding.destroy_keys(messages)
            released.extend(messages)

        from domain.purging import Purging

        outcome = Purging(self.mail.uow, self.retention(), erased).erase(message_ids)
        self.catch_up()
        freed = 0
        shas = {sha for m in released for sha in m.payloads_referred()}
        if self.settings.table_store == "hbase":
            # the workers apply Purged later; `letterlog erase complete` decides the payloads
            # once they have, then compacts HBase (adapters/lifecycle/scaleout.py)
            if outcome.purged:
                self.shredding.record_scale_out(shas, began, len(outcome.purged))
            shas = set()
        host = self._read()
        refs = host.physical(pn.PAYLOAD_REFS)
        for sha in shas:
            if not host.tables.get(refs, payload_row(sha)):
                freed += self.payloads.delete_unless_touched(sha, began) or 0
        self.shredding.unfinished += len(outcome.purged)
        self.shredding.after(self._projections)
        return {"purged": [str(m.id) for m in outcome.purged],
                "already_purged": [str(i) for i in outcome.kept],
                "bytes": outcome.purged_bytes, "keys_destroyed": destroyed,
                "payload_bytes_freed": freed,
                "position": self.max_position(),
                "scale_out_pending": self.settings.table_store == "hbase" and bool(
                    outcome.purged),  # `letterlog erase complete` finishes it
                **(self.completion.as_dict() if self.completion else {})}

    def complete_erasures(self, *, record: bool = False) -> Completion:
        """Finishes the erasures still pending on this store's SQLite files (``letterlog
        erase complete``); with ``record``, one left unfinished is recorded."""
        return self.shredding.complete(record=record)

    def pending_erasures(self) -> list[dict[str, Any]]:
        """The erasures not yet finished on the SQLite files (``letterlog erase status``)."""
        return self.shredding.pending()
