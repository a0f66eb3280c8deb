"""Relays on several hosts starting at once against a new database: each makes sure the
positions table exists. ``CREATE TABLE IF NOT EXISTS`` is not safe against itself in
PostgreSQL (two sessions racing fail on ``pg_type``'s unique index: ``DuplicateObject``, a
relay's traceback in CI), so the creation is serialised with letterlog's schema lock: every
relay starts, and exactly one holds the position."""

from __future__ import annotations

import threading

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
