"""The purge jobs ``Settings`` shape (``letterlog purge run``, ``letterlog purger``, through
the facade): the domain's ``Purging`` on the command side's unit of work, over a read
side's purge queues; each append followed by what shreds the purged (ADR 0063)."""

from __future__ import annotations

from functools import partial

from adapters.config.settings import Settings
from adapters.lifecycle.jobs import PurgeJobs
from adapters.lifecycle.shredding import Shredding
from adapters.readside.host import ProjectionHost
from domain.ports import PayloadStore
from domain.purging import Purging
from domain.service import Mailstore


def purge_jobs(settings: Settings, mail: Mailstore, payloads: PayloadStore,
               shredded: Shredding, host: ProjectionHost) -> PurgeJobs:
    """The purge jobs on the read side ``host``: the domain's ``Purging`` on ``mail``'s unit
    of work, each append followed by ``shredded.purged``, each run by ``shredded.after``;
    the host's catch-up before the queues and before the payloads."""
    retention = settings.retention()
    return PurgeJobs(Purging(mail.uow, retention, shredded.purged), host.tables,
                     host.physical, payloads, retention=retention,
                     threads=settings.purge_threads, catch_up=host.catch_up,
                     after_run=partial(shredded.after, host),
                     release=partial(shredded.free_released, host),
                     payloads_deleted=shredded.payloads_deleted)
