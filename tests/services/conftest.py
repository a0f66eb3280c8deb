"""Session-scoped real servers: `postgres_server`, `hbase_server`, `kafka_server`.

Each fixture starts its server once per test session (installing it first if needed) and
yields the started object from `adapters.devservers`. If a server cannot start, the test is
skipped with the reason and the log tail -- unless `CI` is set to true (also 1/yes, as in
tests/conftest.py), where the test fails instead.

Using them from another test directory: import them into that directory's conftest.py

    from tests.services.conftest import hbase_server, kafka_server, postgres_server  # noqa: F401

(Not via `pytest_plugins = ["tests.services.conftest"]`: pytest then registers this conftest
twice and refuses.) The servers themselves are process-wide singletons, so however many
conftests expose the fixtures, each server starts at most once per session and a failed start
is not retried.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator

import pytest

from adapters.devservers import (
    HBaseServer,
    KafkaServer,
    PostfixServer,
    PostgresServer,
    ServiceFailed,
)
from adapters.devservers._common import Service
from tests.factories import database

_lock = threading.Lock()
_servers: dict[str, Service] = {}
_failures: dict[str, str] = {}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _unavailable(message: str) -> None:
    if in_ci():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def get_server(name: str, factory: Callable[[], Service]) -> Service:
    """Start (once per process) and return the named server; skip/fail if it cannot start."""
    with _lock:
        if name in _servers:
            return _servers[name]
        if name not in _failures:
            svc = factory()
            try:
                svc.start()
            except ServiceFailed as exc:
                _failures[name] = f"{name} server did not start: {exc}"
            except Exception as exc:  # noqa: BLE001 - report anything as "could not start"
                _failures[name] = f"{name} server did not start: {type(exc).__name__}: {exc}"
            else:
                _servers[name] = svc
                return svc
    _unavailable(_failures[name])
    raise AssertionError("unreachable")


def release(name: str) -> None:
    """Stop the named server (idempotent; the first session-end finalizer does it)."""
    with _lock:
        svc = _servers.pop(name, None)
    if svc is not None:
        svc.stop()


def _fixture(name: str, factory: Callable[[], Service]) -> Iterator[Service]:
    svc = get_server(name, factory)
    try:
        yield svc
    finally:
        release(name)  # session scope: runs once, at the end of the session


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A started PostgresServer (dsn, host, port, user, password, dbname, eventsourcing_env())."""
    yield from _fixture("postgres", PostgresServer)  # type: ignore[misc]


@pytest.fixture(scope="session")
def hbase_server() -> Iterator[HBaseServer]:
    """A started HBaseServer (thrift_host, thrift_port, connection())."""
    yield from _fixture("hbase", HBaseServer)  # type: ignore[misc]


@pytest.fixture(scope="session")
def kafka_server() -> Iterator[KafkaServer]:
    """A started KafkaServer (bootstrap)."""
    yield from _fixture("kafka", KafkaServer)  # type: ignore[misc]


@pytest.fixture(scope="session")
def postfix_server() -> Iterator[PostfixServer]:
    """A started PostfixServer (port, send(), queue(), flush(), use_pipe(), use_lmtp())."""
    yield from _fixture("postfix", PostfixServer)  # type: ignore[misc]


@pytest.fixture
def pg_dsn(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh database on the PostgreSQL server (its DSN), dropped after the test."""
    with database(postgres_server) as dsn:
        yield dsn
