"""Event store wiring: the eventsourcing Application on SQLite (embedded) or PostgreSQL.

SQLite durability is a product decision (ADR 0004): by default every commit is fsynced
(``synchronous=FULL``), so an acknowledged delivery survives a power loss, like an MTA that
answers 250 only after fsync. ``LETTERLOG_DURABILITY=normal`` trades that for speed: a
delivery then survives a process crash but may be lost with the last commits on power loss.
The two factories: ``sqlitelog`` (that pragma, the events file's page size) and
``postgreslog`` (schema creation serialised, reconnection bounded).
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import threading
from collections.abc import Iterator
from typing import Any, ClassVar
from uuid import UUID

from eventsourcing.application import Application, ProcessingEvent, Repository
from eventsourcing.persistence import Mapper, OperationalError, Recording, Transcoder
from eventsourcing.sqlite import SQLiteApplicationRecorder

from adapters.eventlog import keysqlite, sealing
from adapters.eventlog.sqlitelog import SYNCHRONOUS
from adapters.eventlog.transcoder import EventMapper, MsgpackTranscoder
from adapters.files import datadir
from domain.account import Account
from domain.delivery_key import DeliveryKey
from domain.errors import StoreBusy
from domain.mailbox import Mailbox
from domain.message import Message

_OWN_AGGREGATES = frozenset({Account, Mailbox, Message, DeliveryKey})


@contextlib.contextmanager
def busy_as_store_busy() -> Iterator[None]:
    """The driver's "database is locked" (SQLite) or "busy" as the domain's ``StoreBusy``:
    another writer holds the lock and nothing was written, so the command may try again."""
    try:
        yield
    except OperationalError as e:
        if "locked" in str(e) or "busy" in str(e):
            raise StoreBusy(f"event store busy: {e}") from e
        raise


class _MailRepository(Repository[UUID]):
    def get(self, *args: Any, **kwargs: Any) -> Any:
        with busy_as_store_busy():
            return super().get(*args, **kwargs)


class MailLog(Application[UUID]):
    """The event-sourced application every letterlog process opens."""

    name = "letterlog"
    snapshotting_intervals: ClassVar[dict[type[Any], int]] = {Mailbox: 200, Account: 100}

    def construct_transcoder(self) -> Transcoder:
        self.keys = open_key_store(self.env)
        return MsgpackTranscoder(self.keys)

    def construct_mapper(self) -> Mapper[UUID]:
        """The library's mapper with the write side in one step (``EventMapper``)."""
        return self.factory.mapper(transcoder=self.construct_transcoder(),
                                   mapper_class=EventMapper)

    def construct_repository(self) -> Repository[UUID]:
        repository = super().construct_repository()
        repository.__class__ = _MailRepository  # the library's, with busy errors translated
        return repository

    def _record(self, processing_event: ProcessingEvent[UUID]) -> list[Recording[UUID]]:
        with busy_as_store_busy():
            return super()._record(processing_event)

    def save(self, *objs: Any, **kwargs: Any) -> list[Recording[UUID]]:
        """``Application.save`` without its runtime ``Protocol`` checks for letterlog's own
        aggregates (``isinstance`` against a ``Protocol`` inspects every attribute, about
        30 µs per aggregate, 6% of a delivery); anything else takes the library's path."""
        processing_event: ProcessingEvent[UUID] = ProcessingEvent()
        others = []
        for obj in objs:
            if type(obj) in _OWN_AGGREGATES:
                processing_event.events.extend(obj.collect_events())
                processing_event.aggregates[obj.id] = obj
            else:
                others.append(obj)
        processing_event.collect_events(*others, **kwargs)
        recordings = self._record(processing_event)
        self._take_snapshots(processing_event)
        self._notify(recordings)
        self.notify(processing_event.events)
        return recordings

    def _take_snapshots(self, processing_event: ProcessingEvent[UUID]) -> None:
        """The library reconstructs a snapshot's aggregate from the log (the last snapshot plus
        up to an interval of events: about 20 ms for a mailbox, 0.1 ms a delivery amortised).
        The aggregate just saved is that state already when the event is its last one: it is
        snapshotted as it is. Otherwise the library's path."""
        if not (self.snapshots and self.snapshotting_intervals):
            return
        for event in processing_event.events:
            aggregate = processing_event.aggregates.get(event.originator_id)
            if aggregate is None:
                continue
            interval = self.snapshotting_intervals.get(type(aggregate))
            if interval is None or event.originator_version % interval:
                continue
            if type(aggregate) in _OWN_AGGREGATES and aggregate.version == event.originator_version:
                snapshot_class: Any = getattr(type(aggregate), "Snapshot", self.snapshot_class)
                self.snapshots.put([snapshot_class.take(aggregate)])
            else:
                self.take_snapshot(event.originator_id, version=event.originator_version)

    def head(self) -> int:
        """The log's last position. On SQLite files a plain autocommit query on a connection
        of its own (about 7 µs, against about 40 µs for the library's ``max_notification_id``
        and its transaction machinery); every command checks it (``domain.current``)."""
        query = getattr(self, "_head_query", None)
        if query is None:
            query = self._head_query = _head_query(self)
        return int(query())

    def position_of(self, originator_id: UUID, version: int) -> int | None:
        """The log position (notification id) of one stored event; None if not found or
        the store keeps no positions (the in-memory one)."""
        recorder = self.recorder
        table = getattr(recorder, "events_table_name", None)
        datastore = getattr(recorder, "datastore", None)
        if table is None or datastore is None:
            return None
        if isinstance(recorder, SQLiteApplicationRecorder):
            sql = (f"SELECT rowid FROM {table} "  # noqa: S608 - the library's table name
                   "WHERE originator_id = ? AND originator_version = ?")
            args: tuple[Any, ...] = (originator_id.hex, version)  # as the library stores it
        else:
            sql = (f"SELECT notification_id FROM {table} "  # noqa: S608
                   "WHERE originator_id = %s AND originator_version = %s")
            args = (originator_id, version)
        with busy_as_store_busy(), datastore.transaction(commit=False) as cursor:
            cursor.execute(sql, args)
            row = cursor.fetchone()
        if row is None:
            return None
        return int(row[0] if not isinstance(row, dict) else next(iter(row.values())))

    def close(self) -> None:
        query = getattr(self, "_head_query", None)
        if query is not None and hasattr(query, "close"):
            query.close()
        super().close()
        self.keys.close()


def open_key_store(env: Any) -> sealing.KeyStore:
    """The data keys beside the log: ``keys.sqlite`` next to an SQLite log (its durability),
    a table in a PostgreSQL log's database, in memory for an in-memory log."""
    module = env.get("PERSISTENCE_MODULE") or ""
    if "SQLite" in module or env.get("SQLITE_DBNAME"):
        db = env.get("SQLITE_DBNAME") or ""
        if db and db != ":memory:" and "mode=memory" not in db:
            path = os.path.join(os.path.dirname(os.path.abspath(db)), datadir.KEYS)
            mode = SYNCHRONOUS.get((env.get("SQLITE_SYNCHRONOUS") or "full").lower(), "FULL")
            return keysqlite.SqliteKeyStore(path, synchronous=mode,
                                          vault=env.get("LETTERLOG_KEY_VAULT") or None)
    if "Postgres" in module or "postgres" in module:
        from adapters.eventlog import keypostgres  # local: psycopg, for a PostgreSQL log only

        return keypostgres.key_store_of(env)
    return sealing.MemoryKeyStore()


class _SQLiteHead:
    def __init__(self, path: str, table: str) -> None:
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._sql = f"SELECT MAX(rowid) FROM {table}"
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            return int(self._conn.execute(self._sql).fetchone()[0] or 0)

    def close(self) -> None:
        self._conn.close()


def _head_query(app: MailLog) -> Any:
    recorder = app.recorder
    datastore = getattr(recorder, "datastore", None)
    pool = getattr(datastore, "pool", None)
    db_name = getattr(pool, "db_name", "")
    if isinstance(recorder, SQLiteApplicationRecorder) and db_name and not getattr(
            pool, "is_sqlite_memory_mode", True):
        return _SQLiteHead(db_name, recorder.events_table_name)
    return lambda: int(recorder.max_notification_id() or 0)


def sqlite_env(path: str, durability: str = "full", lock_timeout: int = 30) -> dict[str, str]:
    return {
        "PERSISTENCE_MODULE": "adapters.eventlog.sqlitelog:DurableSQLiteFactory",
        "SQLITE_DBNAME": path,
        "SQLITE_LOCK_TIMEOUT": str(lock_timeout),
        "SQLITE_SYNCHRONOUS": durability,
        "AGGREGATE_CACHE_MAXSIZE": "20000",
    }


def postgres_env(dsn_parts: dict[str, str], vault: str,
                 timeout: float = 10.0, key_store: str | None = None,
                 standbys: str = "") -> dict[str, str]:
    """A PostgreSQL log's environment; ``vault``: the key-encryption keys' file;
    ``timeout``: seconds a connection may take (the pool's wait for one, and libpq's
    ``connect_timeout`` of the key table's own connection: a frozen server must not hang a
    command for ever); ``key_store``: the key cluster's DSN (the KEKs there, not in
    ``vault``), ``standbys`` its standbys' DSNs (space-separated: the erasure's scrub
    checks each, ADR 0073)."""
    seconds = str(max(2, math.ceil(timeout)))  # libpq: whole seconds, at least 2
    env = {
        "PERSISTENCE_MODULE": "adapters.eventlog.postgreslog:SerialisedPostgresFactory",
        "AGGREGATE_CACHE_MAXSIZE": "20000",
        "LETTERLOG_KEY_VAULT": vault,
        "POSTGRES_CONNECT_TIMEOUT": seconds,
    }
    if key_store:
        env["LETTERLOG_KEY_STORE_DSN"] = key_store
        env["LETTERLOG_KEY_STORE_STANDBYS"] = standbys
    env.update(dsn_parts)
    return env


def open_log(env: dict[str, str]) -> MailLog:
    return MailLog(env=env)
