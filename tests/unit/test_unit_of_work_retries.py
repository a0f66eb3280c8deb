"""The unit of work's retries (tenacity): a concurrency conflict or a busy store is tried
again after a short random wait that grows with each try, at most ``max_retries`` tries in
all, then ``InvalidState``; any other error is raised at once."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
from eventsourcing.persistence import IntegrityError

from domain.errors import InvalidState, StoreBusy
from domain.unit_of_work import UnitOfWork, conflict_wait


def unit_of_work(monkeypatch: pytest.MonkeyPatch, max_retries: int = 50) -> tuple[Any, list]:
    slept: list[float] = []
    real_sleep, here = time.sleep, threading.current_thread()

    def sleep(seconds: float) -> None:  # patching time.sleep patches it for every thread
        if threading.current_thread() is here:
            slept.append(seconds)  # recorded, not slept
        else:
            real_sleep(seconds)  # a thread an earlier test left behind sleeps as it would

    monkeypatch.setattr("domain.unit_of_work.time.sleep", sleep)
    return UnitOfWork(SimpleNamespace(), max_retries=max_retries, log_head=lambda: 0), slept


def tries(outcomes: list[Any]) -> Any:
    """An attempt that raises or returns each of ``outcomes`` in turn, counting its tries."""

    def attempt() -> Any:
        attempt.tries += 1  # type: ignore[attr-defined]
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    attempt.tries = 0  # type: ignore[attr-defined]
    return attempt


def test_conflicts_and_a_busy_store_are_retried_with_growing_random_waits(monkeypatch):
    uow, slept = unit_of_work(monkeypatch)
    attempt = tries([IntegrityError("x"), IntegrityError("x"), StoreBusy("locked"), "done"])
    assert uow.run(attempt) == "done" and attempt.tries == 4
    assert len(slept) == 3
    assert 0 <= slept[0] <= 0.002 and 0 <= slept[1] <= 0.004  # n × 2 ms after a conflict
    assert 0 <= slept[2] <= 0.03  # n × 10 ms while the store is busy


def test_it_gives_up_after_max_retries_tries_naming_the_last_conflict(monkeypatch):
    uow, slept = unit_of_work(monkeypatch, max_retries=3)
    attempt = tries([IntegrityError("a"), StoreBusy("b"), IntegrityError("c"), "never"])
    with pytest.raises(InvalidState, match="gave up after 3 concurrency conflicts") as raised:
        uow.run(attempt)
    assert attempt.tries == 3 and len(slept) == 2  # no wait after the last try
    assert isinstance(raised.value.__cause__, IntegrityError)


def test_any_other_error_is_raised_at_once(monkeypatch):
    uow, slept = unit_of_work(monkeypatch)
    attempt = tries([ValueError("not a conflict"), "never"])
    with pytest.raises(ValueError, match="not a conflict"):
        uow.run(attempt)
    assert attempt.tries == 1 and slept == []


def test_the_wait_bounds_grow_with_the_try_and_are_jittered():
    def state(error: BaseException, n: int) -> Any:
        return SimpleNamespace(attempt_number=n,
                               outcome=SimpleNamespace(exception=lambda: error))

    waits = [conflict_wait(state(StoreBusy("locked"), 5)) for _ in range(50)]
    assert all(0 <= w <= 0.05 for w in waits) and len(set(waits)) > 1
    assert all(0 <= conflict_wait(state(IntegrityError("x"), 5)) <= 0.01 for _ in range(50))
