"""The composition root: the one place that builds letterlog's parts from ``Settings``.

Every runtime starts here:

- embedded (``Letterlog.open``, the embedders' and the CLI's door):
  ``letterlog(settings, facade=Letterlog)``: the event log, the payload store, the command
  side (``Mailstore``) and the read models (``ProjectionHost``), handed to the facade class
  ``Letterlog.open`` passes (this module imports no entry point, the facade included);
- the outbox relay (``letterlog relay``): ``relay(settings)``;
- a stream worker (``letterlog worker``, ``python -m adapters.cli.worker``):
  ``stream_tables(settings)`` is the table store it writes (HBase, or
  ``<data>/stream-tables.sqlite``; the worker module, an entry point, builds its worker
  from these parts);
- a replay job: ``event_log(settings)`` to read, ``stream_tables(settings)`` to write;
- the purge jobs (``letterlog purge run``, ``letterlog purger``, through the facade):
  ``shredding(settings, log, payloads)``, what follows a purge's append, and
  ``purge_jobs(...)``, handed to the facade as a factory taking its read side;
- the user directory (``letterlog users``, the user purge in ``letterlog purger``, a
  caller's groups): ``directory(settings)``, ``group_resolver(settings)`` (built in
  ``directories.py``).

Nothing here runs at import time; each function connects when called.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from adapters.bootstrap.directories import _check_identifier, _groups
from adapters.bootstrap.directories import directory as directory
from adapters.bootstrap.directories import group_resolver as group_resolver
from adapters.config.settings import Settings
from adapters.config.settings import postgres_env_from_dsn as postgres_env_from_dsn
from adapters.eventlog.keycluster import PostgresVault, kek_ids
from adapters.files import datadir
from adapters.files.filemodes import private_dir
from adapters.lifecycle.shredding import Shredding  # small; every store has one (preloaded)
from adapters.payloads.files import FilePayloadStore
from adapters.rules.matching import RegexMatcher
from domain.errors import SettingsError
from domain.quota import Quotas, UsageLedger

if TYPE_CHECKING:
    from adapters.eventlog.sealing import KeyStore
    from adapters.eventlog.store import MailLog
    from adapters.lifecycle.jobs import PurgeJobs
    from adapters.payloads.hbase import HBasePayloadStore
    from adapters.payloads.layered import LayeredPayloadStore
    from adapters.readside.host import ProjectionHost
    from adapters.streaming.relay import OutboxRelay
    from domain.ports import PayloadStore
    from domain.service import Mailstore
    from projections.tablestore import TableStore


def event_log_env(settings: Settings) -> dict[str, str]:
    """The eventsourcing environment of the event store: ``<data>/events.sqlite`` or
    PostgreSQL."""
    # local: start-up: 4 more module(s) for commands that never use it
    from adapters.eventlog.store import postgres_env, sqlite_env

    root = private_dir(settings.data)
    vault = str(settings.key_vault or root / datadir.VAULT)
    if settings.event_store == "postgres":
        return postgres_env(postgres_env_from_dsn(settings.postgres_dsn or ""), vault,
                            timeout=settings.postgres_timeout,
                            key_store=settings.key_store_dsn,
                            standbys=settings.key_store_standbys)
    return {**sqlite_env(str(root / datadir.LOG), settings.durability,
                         settings.lock_timeout), "LETTERLOG_KEY_VAULT": vault}


def event_log(settings: Settings) -> MailLog:
    """The event store (its data keys beside it: ``MailLog.keys``)."""
    # local: start-up: 4 more module(s) for commands that never use it
    from adapters.eventlog.store import open_log

    return open_log(event_log_env(settings))


def key_store(settings: Settings) -> KeyStore:
    """The data keys beside the event store, for a process that reads sealed events without
    opening the log (a stream worker)."""
    # local: start-up: 4 more module(s) for commands that never use it
    from adapters.eventlog.store import open_key_store

    return open_key_store(event_log_env(settings))


def key_cluster(settings: Settings) -> Any:
    """The key cluster's KEKs (``PostgresVault``), or None when the KEKs are in a vault file
    (ADR 0073)."""
    if not settings.key_store_dsn:
        return None

    return PostgresVault(settings.key_store_dsn, timeout=settings.postgres_timeout,
                         standbys=settings.key_store_standbys.split())


def key_cluster_ids(settings: Settings) -> set[Any]:
    """The KEK ids in the key cluster, read only (none configured: the empty set)."""
    if not settings.key_store_dsn:
        return set()

    return kek_ids(settings.key_store_dsn, timeout=settings.postgres_timeout)


def kek_use(settings: Settings) -> dict[Any, int]:
    """Each KEK the PostgreSQL log's live data keys are wrapped under, and how many."""
    # local: psycopg, a client library, loaded only when this runs
    from psycopg.conninfo import make_conninfo

    # local: start-up: 2 more module(s) for commands that never use it
    from adapters.eventlog.keypostgres import postgres_kek_use

    parts = postgres_env_from_dsn(settings.postgres_dsn or "")
    return postgres_kek_use(make_conninfo(
        dbname=parts["POSTGRES_DBNAME"], host=parts["POSTGRES_HOST"],
        port=parts["POSTGRES_PORT"], user=parts["POSTGRES_USER"],
        password=parts["POSTGRES_PASSWORD"]))


def payload_store(settings: Settings) -> PayloadStore:
    """``<data>/payloads``; or, with payloads in HBase (``payload_store``, by default on the
    scale-out path), the table ``<prefix>_payloads`` through the table store's connection
    settings, connected on first use, with this host's payload files (if any are left from
    before) read where they are until ``letterlog payloads migrate`` (ADR 0072)."""
    if not settings.payloads_in_hbase():
        return FilePayloadStore(Path(settings.data) / datadir.PAYLOADS)
    return layered_payloads(settings)


def layered_payloads(settings: Settings) -> LayeredPayloadStore:
    """HBase's payload table (connected on first use), then this host's payload files."""
    # local: start-up: 1 more module(s) for commands that never use it
    from adapters.payloads.layered import LayeredPayloadStore

    local = Path(settings.data) / datadir.PAYLOADS
    return LayeredPayloadStore(partial(hbase_payloads, settings),
                               FilePayloadStore(local) if local.is_dir() else None)


def hbase_payloads(settings: Settings) -> HBasePayloadStore:
    """The payload table in HBase, on a table store of its own (the read models' settings:
    host, port, prefix, timeout; Thrift2 writes if configured), created if absent."""
    # local: start-up: 1 more module(s) for commands that never use it
    from adapters.payloads.hbase import HBasePayloadStore

    tables = hbase_tables(settings)
    try:
        return HBasePayloadStore(tables, threads=settings.stream.hbase_pool, owns_tables=True,
                                 spool_dir=private_dir(settings.data))
    except BaseException:
        tables.close()
        raise


def mailstore(settings: Settings, log: MailLog, payloads: PayloadStore) -> Mailstore:
    """The command side on ``log`` and ``payloads``, with the settings' limits."""
    # local: start-up: 1 more module(s) for commands that never use it
    from domain.service import Mailstore

    mail = Mailstore(
        log,
        payloads,
        limits=settings.message_limits(),
        inline_limit=settings.inline_limit,
        deleted_retention=timedelta(days=settings.deleted_retention_days),
        log_head=log.head,
        reservation_ttl=timedelta(seconds=settings.extraction_reservation_seconds),
    )

    mail.rule_matcher = RegexMatcher()
    mail.rule_search_seconds = settings.rule_search_seconds
    mail.rule_budget_seconds = settings.rule_budget_seconds
    return mail


def quotas(settings: Settings, mail: Mailstore, log: MailLog, host: Any) -> None:
    """The quota rule of ``mail``: the default limits, and a ledger that takes an account's
    usage from the embedded ``counters`` (``host``'s, else ``tables.sqlite`` read only, else
    none) and folds the log after it (ADR 0050)."""
    # local: start-up: 4 more module(s) for commands that never use it
    from adapters.facade.quota import LogUsage, TablesSnapshot, counters_snapshot

    snapshot: Any = None
    if host is not None:
        snapshot = partial(counters_snapshot, host)
    elif settings.table_store == "embedded" and settings.event_store == "sqlite":
        snapshot = TablesSnapshot(Path(settings.data) / datadir.READ_MODELS)
    ledger = UsageLedger(LogUsage(log, snapshot), mail.uow.head)
    mail.quotas = Quotas(settings.quota_limits(), ledger)
    mail.uow.after_save = mail.quotas.saved


def stream_tables(settings: Settings, *, timeout: float | None = None) -> TableStore:
    """The tables the stream workers write: HBase for ``table_store=hbase``; else
    ``<data>/stream-tables.sqlite`` (never the file the embedded projector writes).
    ``timeout``: seconds an HBase call waits and retries (default ``hbase_timeout``)."""
    if settings.table_store == "hbase":
        return hbase_tables(settings, timeout=timeout)
    # local: start-up: 6 more module(s) for commands that never use it
    from adapters.tables.sqlite import SqliteTableStore

    private_dir(settings.data)
    return SqliteTableStore(Path(settings.data) / datadir.STREAM_TABLES)


def hbase_tables(settings: Settings, *, timeout: float | None = None) -> TableStore:
    """A table store on the settings' HBase (Thrift1, and Thrift2 writes if configured)."""
    # local: happybase, thriftpy2: client libraries, loaded only when this runs
    from adapters.tables.hbase import HBaseTableStore

    extra: dict[str, Any] = {}
    thrift2 = settings.hbase_thrift2_port or settings.stream.hbase_thrift2_port
    if thrift2:
        extra["thrift2_port"] = int(thrift2)
        extra["thrift2_idl"] = settings.hbase_thrift2_idl
    seconds = timeout if timeout is not None else settings.hbase_timeout
    return HBaseTableStore(settings.hbase_host, settings.hbase_port,
                           table_prefix=settings.hbase_table_prefix,
                           pool_size=settings.stream.hbase_pool,
                           timeout_ms=int(seconds * 1000), retry_deadline_s=seconds,
                           **extra)


def read_model_tables(settings: Settings) -> TableStore:
    """The table store the read models are in: HBase (``table_store=hbase``, as the stream
    workers write it) or the embedded ``<data>/tables.sqlite``."""
    if settings.table_store == "hbase":
        return stream_tables(settings)
    # local: start-up: 6 more module(s) for commands that never use it
    from adapters.tables.sqlite import SqliteTableStore

    return SqliteTableStore(Path(settings.data) / datadir.READ_MODELS)


def projection_host(settings: Settings, log: MailLog) -> ProjectionHost:
    """The read models of an embedded store: ``<data>/tables.sqlite``, kept current by this
    process; or, with ``table_store=hbase``, HBase, read only (stream workers project)."""
    # local: start-up: 4 more module(s) for commands that never use it
    from adapters.eventlog.reader import read_events

    # local: start-up: 30 more module(s) for commands that never use it
    from adapters.readside.host import ProjectionHost

    events = partial(read_events, log)

    def max_position() -> int:
        return int(log.recorder.max_notification_id() or 0)

    tables = read_model_tables(settings)
    if settings.table_store == "hbase":
        return ProjectionHost(tables, events, None, max_position, live=False)
    return ProjectionHost(tables, events, Path(settings.data) / datadir.PROJECTIONS_LOCK,
                          max_position)


def shredding(settings: Settings, log: MailLog, payloads: PayloadStore) -> Shredding:
    """What follows a purge's or an erasure's append (keys destroyed, payloads' grace,
    views, WAL, compaction): ``adapters.lifecycle.shredding``."""
    return Shredding(settings, log, payloads)


def purge_jobs(settings: Settings, mail: Mailstore, payloads: PayloadStore,
               shredded: Shredding, host: ProjectionHost) -> PurgeJobs:
    """The purge jobs on the read side ``host``: the domain's ``Purging`` on ``mail``'s unit
    of work, each append followed by ``shredded.purged``, each run by ``shredded.after``;
    the host's catch-up before the queues and before the payloads."""
    # local: start-up: 4 more module(s) for commands that never use it
    from adapters.lifecycle.jobs import PurgeJobs

    # local: start-up: 2 more module(s) for commands that never use it
    from domain.purging import Purging

    retention = settings.retention()
    return PurgeJobs(Purging(mail.uow, retention, shredded.purged), host.tables,
                     host.physical, payloads, retention=retention,
                     threads=settings.purge_threads, catch_up=host.catch_up,
                     after_run=partial(shredded.after, host),
                     release=partial(shredded.free_released, host),
                     payloads_deleted=shredded.payloads_deleted)


class EmbeddedStore(Protocol):
    """What this module sets and calls on the facade it builds (``adapters.embedded``'s
    ``Letterlog``, handed over by ``Letterlog.open``: this module never imports it)."""

    group_resolver: Callable[[str], frozenset[str]] | None
    identifier_check: Callable[[str], None] | None

    def catch_up(self) -> Any: ...

    def finish_interrupted_erasures(self) -> Any: ...


S = TypeVar("S", bound=EmbeddedStore)


def letterlog(settings: Settings, *, facade: Callable[..., S], log: MailLog | None = None,
              payloads: PayloadStore | None = None, read_models: bool = True) -> S:
    """An embedded store (an instance of ``facade``, the class ``Letterlog.open`` hands over:
    this module never imports the facade); caught up before it is returned.
    ``read_models=False``: the log and the command side only (a writer whose read models
    others keep). With ``table_store=hbase`` the read models are HBase's, connected on first
    read."""
    log = log if log is not None else event_log(settings)
    payloads = payloads if payloads is not None else payload_store(settings)
    mail = mailstore(settings, log, payloads)
    shred = shredding(settings, log, payloads)
    jobs = partial(purge_jobs, settings, mail, payloads, shred)  # on the read side, once open
    if read_models and settings.table_store == "hbase":
        # Scale-out: stream workers project into HBase; this process only reads it, and
        # connects on its first read: commands need only the log and the payload store, so
        # deliveries go on while HBase (or Kafka, or the workers) are down.
        quotas(settings, mail, log, None)
        scaled = facade(settings, log, payloads, mail,
                        read_side=partial(projection_host, settings, log),
                        shredding=shred, purge_jobs=jobs)
        scaled.group_resolver = _groups(settings)
        scaled.identifier_check = partial(_check_identifier, settings)
        _finish_interrupted(scaled)
        return scaled
    host = projection_host(settings, log) if read_models else None
    store = facade(settings, log, payloads, mail, host, shredding=shred, purge_jobs=jobs)
    quotas(settings, mail, log, host)
    store.group_resolver = _groups(settings)
    store.identifier_check = partial(_check_identifier, settings)
    store.catch_up()
    _finish_interrupted(store)
    return store


def _finish_interrupted(store: EmbeddedStore) -> None:
    """An erasure or purge run a killed process left unfinished (its intent file in
    ``<data>/erasures-intent/``, or its row in the log's database on scale-out, no longer
    held: ADR 0084) is finished by whoever opens the store
    next (ADR 0063). A failure here (a server down) is logged: the command goes on, and the
    next open, ``erase complete`` or purge run tries again."""
    try:
        store.finish_interrupted_erasures()
    except Exception as error:  # noqa: BLE001 - logged; retried by the next open
        logging.getLogger("letterlog").warning(
            "an interrupted erasure could not be finished yet (%s: %s); `letterlog erase "
            "complete` retries", type(error).__name__, error)


def relay(settings: Settings, log: Any = None, **options: Any) -> OutboxRelay:
    """The outbox relay for ``settings``: Kafka bootstrap and topic, and the event store's
    log (``log``: an opened ``MailLog`` or ``Letterlog``; opened here when None, and closed
    with the relay). The position lives in the event store's database for PostgreSQL and in
    ``<data>/relay-<topic>.position`` for SQLite."""
    # local: start-up: 9 more module(s) for commands that never use it
    from adapters.streaming.relay import (
        DEFAULT_PARTITIONS,
        FilePosition,
        OutboxRelay,
        PostgresPosition,
        RelayPosition,
    )

    if not settings.kafka_bootstrap:
        raise SettingsError("LETTERLOG_KAFKA_BOOTSTRAP: the relay needs the Kafka "
                            "bootstrap address (host:port)")
    on_close = None
    if log is None:
        log = event_log(settings)
        on_close = log.close
    recorder = log.recorder if hasattr(log, "recorder") else log.log.recorder

    def read(start: int, limit: int) -> list[Any]:
        return list(recorder.select_notifications(start=start, limit=limit))

    position: RelayPosition
    if settings.event_store == "postgres":
        position = PostgresPosition(settings.postgres_dsn or "", f"kafka:{settings.kafka_topic}")
    else:
        position = FilePosition(Path(settings.data) / f"relay-{settings.kafka_topic}.position")
    options.setdefault("partitions", getattr(settings, "kafka_partitions", None)
                       or DEFAULT_PARTITIONS)
    return OutboxRelay(read, settings.kafka_bootstrap, settings.kafka_topic, position,
                       head=recorder.max_notification_id, on_close=on_close, **options)
