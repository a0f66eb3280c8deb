"""The embedded store's door (``Letterlog.open``, the embedders' and the CLI's): the event
log, the payload store, the command side (``Mailstore``) and the read models
(``ProjectionHost``), handed to the facade class ``Letterlog.open`` passes (never imported
here: ``EmbeddedStore`` is what this module asks of it)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from adapters.bootstrap.commandside import mailstore, quotas
from adapters.bootstrap.eventstore import event_log
from adapters.bootstrap.payloads import payload_store
from adapters.config.settings import Settings
from adapters.eventlog.store import MailLog
from adapters.lifecycle.shredding import Shredding
from domain.ports import PayloadStore
from domain.service import Mailstore

if TYPE_CHECKING:
    from adapters.lifecycle.jobs import PurgeJobs
    from adapters.readside.host import ProjectionHost


class EmbeddedStore(Protocol):
    """What this module sets and calls on the facade it builds (``Letterlog``)."""

    group_resolver: Callable[[str], frozenset[str]] | None
    identifier_check: Callable[[str], None] | None

    def catch_up(self) -> Any: ...
    def finish_interrupted_erasures(self) -> Any: ...


S = TypeVar("S", bound=EmbeddedStore)


def letterlog(settings: Settings, *, facade: Callable[..., S], log: MailLog | None = None,
              payloads: PayloadStore | None = None, read_models: bool = True) -> S:
    """An embedded store (an instance of ``facade``), caught up before it is returned.
    ``read_models=False``: the log and the command side only (a writer whose read models
    others keep). With ``table_store=hbase`` the read models are HBase's (connected later)."""
    log = log if log is not None else event_log(settings)
    payloads = payloads if payloads is not None else payload_store(settings)
    mail = mailstore(settings, log, payloads)
    shred = Shredding(settings, log, payloads)  # what follows a purge's or erasure's append
    jobs = partial(_purge_jobs, settings, mail, payloads, shred)  # on the read side, once open
    # Scale-out: stream workers project into HBase; this process reads it from its first
    # read on, so deliveries go on while HBase (or Kafka, or the workers) are down.
    scaled = read_models and settings.table_store == "hbase"
    host = _read_side(settings, log) if read_models and not scaled else None
    quotas(settings, mail, log, host)
    store = facade(settings, log, payloads, mail, host,
                   read_side=partial(_read_side, settings, log) if scaled else None,
                   shredding=shred, purge_jobs=jobs)
    store.group_resolver = partial(_groups, settings)
    store.identifier_check = partial(_check_identifier, settings)
    if not scaled:
        store.catch_up()
    _finish_interrupted(store)
    return store


def _read_side(settings: Settings, log: MailLog) -> ProjectionHost:
    from adapters.bootstrap import tables  # local: the read side (30 modules): not for `show`

    return tables.projection_host(settings, log)


def _purge_jobs(settings: Settings, mail: Mailstore, payloads: PayloadStore,
                shredded: Shredding, host: ProjectionHost) -> PurgeJobs:
    from adapters.bootstrap import purging  # local: built only when a purge runs

    return purging.purge_jobs(settings, mail, payloads, shredded, host)


def _groups(settings: Settings, user: str) -> frozenset[str]:
    from adapters.bootstrap import directories  # local: the user directory, on first use

    return directories.group_resolver(settings)(user)


def _check_identifier(settings: Settings, identifier: str) -> None:
    from adapters.bootstrap import directories  # local: the user directory, on first use

    directories.check_identifier(settings, identifier)


def _finish_interrupted(store: EmbeddedStore) -> None:
    """An erasure or purge run a killed process left unfinished (ADR 0084) is finished by
    whoever opens the store next (ADR 0063). A failure (a server down) is logged: the
    command goes on, and the next open, ``erase complete`` or purge run tries again."""
    try:
        store.finish_interrupted_erasures()
    except Exception as error:  # noqa: BLE001 - logged; retried by the next open
        logging.getLogger("letterlog").warning(
            "an interrupted erasure could not be finished yet (%s: %s); `letterlog erase "
            "complete` retries", type(error).__name__, error)
