"""The log on PostgreSQL: eventsourcing's PostgreSQL factory with its schema creation
serialised across processes and lost connections given up after the connection timeout,
which errors mean the server did not answer. Loaded only for a PostgreSQL log (its
``PERSISTENCE_MODULE``) or after a psycopg error: the embedded default never imports it."""

from __future__ import annotations

import contextlib
from typing import Any

from eventsourcing import postgres as pg
from psycopg.errors import DuplicateObject

from adapters.eventlog.schemalock import SCHEMA_LOCK_KEY


def _serialised_create_table(self: Any) -> None:
    """``create_table`` of eventsourcing's PostgreSQL recorders, serialised across processes.

    The library issues ``CREATE OR REPLACE FUNCTION`` and friends on every start-up; two
    processes doing that at the same moment fail with "tuple concurrently updated". Here the
    whole schema creation runs in one transaction holding a transaction-scoped advisory lock,
    and an already existing composite type is skipped inside a savepoint.
    """
    with self.datastore.transaction(commit=True) as curs:
        curs.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
        for statement in self.sql_create_statements:
            if "CREATE TYPE" in statement.as_string():
                with contextlib.suppress(DuplicateObject), curs.connection.transaction():
                    curs.execute(statement, prepare=False)
        self._create_table(curs)
    self.datastore.register_type_adapters()


def reconnect_timeout(env: Any) -> float:
    """Seconds the pool tries one lost connection again before it gives the slot up (and
    the next ``getconn`` starts a new try at once): the connection timeout, at least 2."""
    try:
        return max(2.0, float(env.get("POSTGRES_CONNECT_TIMEOUT") or 10))
    except ValueError:
        return 10.0


class _App(pg.PostgresApplicationRecorder):
    create_table = _serialised_create_table


class _Tracking(pg.PostgresTrackingRecorder):
    create_table = _serialised_create_table


class _Process(pg.PostgresProcessRecorder):
    create_table = _serialised_create_table


class _Aggregate(pg.PostgresAggregateRecorder):
    create_table = _serialised_create_table


class SerialisedPostgresFactory(pg.PostgresFactory):
    """eventsourcing's PostgreSQL factory with the recorders above and a bounded reconnection
    (``PERSISTENCE_MODULE=adapters.eventlog.postgreslog:SerialisedPostgresFactory``)."""

    aggregate_recorder_class = _Aggregate
    application_recorder_class = _App
    tracking_recorder_class = _Tracking
    process_recorder_class = _Process

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        # psycopg_pool tries a lost connection again after 1, 2, 4, 8 ... s for 5 minutes:
        # after an outage of a minute its next try came up to a minute after PostgreSQL was
        # back (issue 42, item 9). Given up after the connection timeout, the slot is tried
        # afresh by the next caller that wants a connection.
        self.datastore.pool.reconnect_timeout = reconnect_timeout(env)


def postgres_unreachable(error: BaseException) -> str | None:
    """Why ``error`` (or an error it was raised from) means the log's PostgreSQL did not
    answer: a refused or failed connection, or none within the timeout; None otherwise."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        kind = type(current)
        module = kind.__module__
        if module.startswith("psycopg_pool") and kind.__name__ == "PoolTimeout":
            return "no connection within the timeout"
        if module.startswith(("psycopg", "eventsourcing")) and kind.__name__ in (
                "OperationalError", "InterfaceError", "ConnectionTimeout"):
            text = " ".join(str(current).split())
            if "refused" in text:
                return "connection refused"
            if "timeout" in text.lower() or "timed out" in text:
                return "no answer within the timeout"
            return text[:160] or kind.__name__
        current = current.__cause__ or current.__context__
    return None
