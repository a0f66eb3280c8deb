"""The rebuild over several processes (ADR 0113) with the log in PostgreSQL: each child opens
the log the settings name, and the tables switched in are the one-process fold's."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.embedded import Letterlog
from adapters.readside import rangefold
from tests.rebuild_support import digests, history, run_dirs


@pytest.mark.services
def test_a_fold_over_processes_reading_postgres_switches_in_the_tables_of_one(
        pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rangefold, "PARALLEL_FROM", 0)
    folds: list[int] = []
    fold = rangefold.RangeFold._fold

    def counted(self, *args):  # type: ignore[no-untyped-def]
        folds.append(self.workers)
        return fold(self, *args)

    monkeypatch.setattr(rangefold.RangeFold, "_fold", counted)
    store = Letterlog.open(tmp_path / "data", event_store="postgres", postgres_dsn=pg_dsn)
    try:
        history(store)
        live = digests(store)
        one = store.rebuild(workers=1)
        several = store.rebuild(workers=3)
        assert folds == [3]
        assert several["position"] == one["position"] == store.max_position()
        assert digests(store) == live
        assert run_dirs(store) == []
    finally:
        store.close()
