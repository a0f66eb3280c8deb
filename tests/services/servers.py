"""The real servers the tests start: each once per test process (a singleton here), skipped
with the reason when it cannot start, or failed under CI; and `ldap_of`, slapd in a supervisor."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator

import pytest

from devtools.devservers import (
    LdapServer,
    ServiceFailed,
)
from devtools.devservers._common import Service
from devtools.devservers.supervised import SupervisedServices

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


def ldap_of(services: SupervisedServices) -> LdapServer:
    ldap = services.servers["ldap"]
    assert isinstance(ldap, LdapServer)
    return ldap
