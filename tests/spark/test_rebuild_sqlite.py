"""The Spark rebuild on the embedded stores (SQLite log, SQLite tables) on local[2]."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from adapters.embedded import Letterlog
from adapters.settings import load_settings
from domain.errors import CorruptEvent
from spark_replay.job import rebuild
from tests.spark.conftest import make_store

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("spark-sqlite") / "data"
    make_store(path)
    return path


def _verify(data: Path) -> list:
    with Letterlog.open(data) as store:
        return store.verify()


def _catalog(data: Path) -> tuple[int, dict[str, str]]:
    with Letterlog.open(data) as store:
        catalog = store.projections.catalog
        return catalog.generation, {t: catalog.physical(t) for t in ("messages", "counters")}


def test_spark_rebuild_switches_to_tables_identical_to_the_live_ones(spark, data):
    generation, before = _catalog(data)
    result = rebuild(load_settings(data=data), spark=spark)
    after_generation, after = _catalog(data)
    assert after_generation == generation + 1
    assert after["messages"] == result["tables"]["messages"] != before["messages"]
    assert sum(result["partition_events"]) == result["position"]
    reports = _verify(data)
    assert reports and all(r.identical for r in reports), [r.as_dict() for r in reports]
    assert any(r.live_cells for r in reports)


def test_a_task_that_fails_once_is_retried_and_the_rebuild_is_still_identical(spark, data):
    result = rebuild(load_settings(data=data), ["counters", "messages"], spark=spark,
                     fail_partition=1)
    assert result["task_attempts"][1] == 1  # the second attempt's run was merged
    assert all(r.identical for r in _verify(data))


def test_an_undecodable_event_fails_the_job_naming_position_aggregate_and_version(
        spark, tmp_path):
    make_store(tmp_path / "data", messages=6)
    with sqlite3.connect(tmp_path / "data" / "events.sqlite") as db:
        table = db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                           "name LIKE '%events%' AND sql LIKE '%state%'").fetchone()[0]
        position, aggregate, version = db.execute(
            f"SELECT rowid, originator_id, originator_version FROM {table} "
            "ORDER BY rowid LIMIT 1 OFFSET 4").fetchone()
        db.execute(f"UPDATE {table} SET state = x'c1c1' WHERE rowid = ?", (position,))
    generation, before = _catalog(tmp_path / "data")
    with pytest.raises(CorruptEvent) as caught:
        rebuild(load_settings(data=tmp_path / "data"), spark=spark)
    text = str(caught.value)
    assert f"position {position}" in text
    assert f"version {version}" in text
    assert str(aggregate).replace("-", "") in text.replace("-", "")
    assert _catalog(tmp_path / "data") == (generation, before)  # the old tables stay live
