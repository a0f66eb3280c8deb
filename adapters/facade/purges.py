"""Purge: the purge jobs (built by ``adapters.bootstrap``, run here) and the purge queue:
messages leaving the store when their queue's time is up (docs/lifecycle.md).

A part of the ``Letterlog`` facade (``adapters.embedded``; ``parts.FacadePart``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from adapters.facade.parts import FacadePart
from adapters.lifecycle import intents
from adapters.operations.faults import fault_point
from domain.errors import InvalidCommand
from domain.lifecycle import ALL_QUEUES, Retention
from projections import queries as q

if TYPE_CHECKING:
    from adapters.lifecycle.completed import Completion
    from adapters.lifecycle.jobs import PurgeJobs, PurgeReport


class Purges(FacadePart):
    """Messages leaving the store when their queue's time is up."""

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
        if dry_run:
            report = jobs.run(now or datetime.now(UTC), chosen, dry_run=True, progress=progress)
        else:
            self.finish_interrupted_erasures()
            with intents.of(self.settings).held("purge", self.max_position()):
                fault_point("purge:intent")
                report = jobs.run(now or datetime.now(UTC), chosen, progress=progress)
                fault_point("purge:completed")
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

