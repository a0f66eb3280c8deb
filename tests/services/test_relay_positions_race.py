"""Relays on several hosts starting at once against a new database: each makes sure the
positions table exists. ``CREATE TABLE IF NOT EXISTS`` is not safe against itself in
PostgreSQL (two sessions racing fail on ``pg_type``'s unique index: ``DuplicateObject``, a
relay's traceback in CI), so the creation is serialised with letterlog's schema lock: every
relay starts, and exactly one holds the position."""

from __future__ import annotations

import contextlib
import threading
import time

import psycopg
import pytest

from adapters.streaming.positions import PostgresPosition

pytestmark = pytest.mark.services


@pytest.mark.parametrize("round_", range(15))
def test_relays_starting_at_once_on_a_new_database_all_start_and_one_holds_the_position(
        pg_dsn: str, round_: int) -> None:
    n = 12
    gate, results = threading.Barrier(n), [None] * n
    positions = [PostgresPosition(pg_dsn, "kafka:race") for _ in range(n)]

    def start(i: int) -> None:
        gate.wait()
        try:
            positions[i].acquire()
            results[i] = "held"
        except Exception as error:  # noqa: BLE001 - what each relay met, compared below
            results[i] = type(error).__name__

    threads = [threading.Thread(target=start, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    try:
        assert results.count("held") == 1, results
        assert set(results) - {"held"} <= {"RelayBusy"}, results
    finally:
        for p in positions:
            p.release()


def test_a_released_position_is_free_the_moment_release_returns(pg_dsn: str) -> None:
    """A relay stopped (or crashed in process and closed) and one started right after it:
    the second must find the position free. Closing the session alone leaves the advisory
    lock to the server's own cleanup, which a fast successor can beat (CI met RelayBusy so,
    at load 9); ``release`` unlocks before it closes."""
    for round_ in range(40):
        first, second = PostgresPosition(pg_dsn, "kafka:handover"), PostgresPosition(
            pg_dsn, "kafka:handover")
        second._connect()  # noqa: SLF001 - connected ahead: only the lock is raced
        first.acquire()
        first.release()
        try:
            second.acquire()
        except Exception as error:  # noqa: BLE001 - named with its round below
            raise AssertionError(f"round {round_}: {type(error).__name__}: {error}") from error
        finally:
            second.release()



def _busy(conn: object) -> None:
    """A statement of a second running on the position's session (its end, or the error
    of a closed connection, is not what is tested)."""
    with contextlib.suppress(Exception):
        conn.execute("SELECT pg_sleep(1.5) /* letterlog-busy */")  # type: ignore[attr-defined]


def _running(dsn: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as c:
        row = c.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                        "AND query LIKE '%letterlog-busy%' AND pid <> pg_backend_pid()"
                        ).fetchone()
    return bool(row and row[0])


def test_a_position_released_while_its_session_is_busy_is_free_when_release_returns(
        pg_dsn: str) -> None:
    """The worst moment: the relay's session still runs a statement when the relay stops.
    Closing the connection then leaves the lock held until the server ends that statement
    and notices; ``release`` gives it back on the session itself, after the statement."""
    first, second = PostgresPosition(pg_dsn, "kafka:busy"), PostgresPosition(pg_dsn, "kafka:busy")
    first.acquire()
    busy = threading.Thread(target=_busy, args=(first._connect(),),  # noqa: SLF001
                            daemon=True)
    busy.start()
    deadline = time.monotonic() + 30
    while not _running(pg_dsn):  # a readiness probe: the statement is running
        assert time.monotonic() < deadline, "the busy statement never started"
    first.release()
    try:
        second.acquire()
    finally:
        second.release()
        busy.join(timeout=30)
