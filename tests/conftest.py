"""Shared fixtures: a domain on the in-memory event store, builders for test mail."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.eventlog.store import MailLog
from adapters.payloads.memory import InMemoryPayloadStore
from domain.service import Mailstore

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


@pytest.fixture
def log() -> MailLog:
    return MailLog(env={"PERSISTENCE_MODULE": "eventsourcing.popo"})


@pytest.fixture
def payloads() -> InMemoryPayloadStore:
    return InMemoryPayloadStore()


@pytest.fixture
def mail(log: MailLog, payloads: InMemoryPayloadStore, clock: Clock) -> Mailstore:
    return Mailstore(log, payloads, clock=clock)


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        if IN_CI:
            pytest.fail(f"the mail corpus is missing at {CORPUS}")
        pytest.skip(f"no mail corpus at {CORPUS}")
    return CORPUS
