"""Shared fixtures: a domain on the in-memory event store, builders for test mail."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.eventlog.store import MailLog
from adapters.payloads.files import FilePayloadStore
from adapters.payloads.memory import InMemoryPayloadStore
from domain.service import Mailstore
from tests.factories import BACKENDS, backend_params, event_log, payload_store
from tests.services.conftest import postgres_server  # noqa: F401 - for every_backend tests

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "mail"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


class Clock:
    """A controllable clock for tests."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kw: float) -> None:
        self.now += timedelta(**kw)


def make_mail(subject: str = "Hello", *, message_id: str | None = "<m1@example.org>",
              in_reply_to: str | None = None, references: str | None = None,
              body: str = "Hi there.\r\n", sender: str = "ada@example.org") -> bytes:
    lines = [f"From: {sender}", "To: grace@example.org", f"Subject: {subject}",
             "Date: Sun, 01 Mar 2026 12:00:00 +0000"]
    if message_id:
        lines.append(f"Message-ID: {message_id}")
    if in_reply_to:
        lines.append(f"In-Reply-To: {in_reply_to}")
    if references:
        lines.append(f"References: {references}")
    return ("\r\n".join(lines) + "\r\n\r\n" + body).encode()


def run_threads(work: Callable[[int], None], n: int = 8) -> list[BaseException]:
    """Runs ``work(i)`` in ``n`` threads started together; the errors they raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def run(i: int) -> None:
        try:
            start.wait()
            work(i)
        except BaseException as e:  # noqa: BLE001 - the caller asserts there are none
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def in_processes(work: Callable[[Any], Any], args: list[Any]) -> list[Any]:
    """``work`` applied to each of ``args`` in its own spawned OS process."""
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(len(args)) as pool:
        return pool.map(work, args)


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
