"""The event log and its keys, built from ``Settings``: SQLite in the data directory or
PostgreSQL (``event_log``); the data keys beside it, for a process that reads sealed events
without opening the log (``key_store``). The key cluster's parts a backup takes are in
``keycluster``."""

from __future__ import annotations

from adapters.config.settings import Settings, postgres_env_from_dsn
from adapters.eventlog.sealing import KeyStore
from adapters.eventlog.store import MailLog, open_key_store, open_log, postgres_env, sqlite_env
from adapters.files import datadir
from adapters.files.filemodes import private_dir


def event_log_env(settings: Settings) -> dict[str, str]:
    """The eventsourcing environment of the event store: ``<data>/events.sqlite`` or
    PostgreSQL."""
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
    return open_log(event_log_env(settings))


def key_store(settings: Settings) -> KeyStore:
    """The data keys beside the event store, for a process that reads sealed events without
    opening the log (a stream worker)."""
    return open_key_store(event_log_env(settings))

