"""Shared fixtures: a domain on the in-memory event store, builders for test mail."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from adapters.eventlog.store import MailLog
from adapters.payloads.files import FilePayloadStore
from adapters.payloads.memory import InMemoryPayloadStore
from domain.service import Mailstore
from tests.factories import BACKENDS, CORPUS, IN_CI, Clock, backend_params, event_log, payload_store
from tests.services.conftest import postgres_server  # noqa: F401 - for every_backend tests

# One hypothesis profile for every run (docs/testing.md): no wall-clock deadline and no
# "too slow" health check, which fail a correct test on a busy machine; the examples are as
# many as each test asks. ``HYPOTHESIS_PROFILE=thorough``: 500 where a test names no number.
settings.register_profile("letterlog", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", parent=settings.get_profile("letterlog"),
                          max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "letterlog"))


@pytest.fixture
def clock() -> Clock:
    return Clock()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked ``every_backend`` run once per event store of ``factories.BACKENDS``
    (PostgreSQL's run is marked ``services``)."""
    if "backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
            "every_backend"):
        metafunc.parametrize("backend", backend_params(*BACKENDS), indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The event store a test runs on: ``memory`` unless it is marked ``every_backend``."""
    return str(getattr(request, "param", "memory"))


@pytest.fixture
def log(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Iterator[MailLog]:
    with event_log(backend, tmp_path,
                   lambda: request.getfixturevalue("postgres_server")) as found:
        yield found


@pytest.fixture
def payloads(backend: str, tmp_path: Path) -> InMemoryPayloadStore | FilePayloadStore:
    return payload_store(backend, tmp_path)


@pytest.fixture
def mail(log: MailLog, payloads: InMemoryPayloadStore | FilePayloadStore,
         clock: Clock) -> Mailstore:
    return Mailstore(log, payloads, clock=clock)


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        if IN_CI:
            pytest.fail(f"the mail corpus is missing at {CORPUS}")
        pytest.skip(f"no mail corpus at {CORPUS}")
    return CORPUS
