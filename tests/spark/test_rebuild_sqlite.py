"""The Spark rebuild on the embedded stores (SQLite log, SQLite tables) on local[2]."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from adapters.config.settings import load_settings
from adapters.embedded import Letterlog
from domain.errors import CorruptEvent
from spark_replay.job import rebuild
from tests.factories import make_mail
from tests.spark.support import fill, make_store

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("spark-sqlite") / "data"
    make_store(path, hierarchy=True)
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
    assert result["layout"] == "by_position"  # every projection, on any number of cores
    assert sum(result["folds"]["by_position"]["partition_events"]) == result["position"]
    assert result["merge_partitions"] == 2  # counters' parts merged, one task per core
    # no task id twice
    assert len(result["kept_attempts"]) == result["spark_partitions"] + 2
    # every attempt of every stage counted (the shuffle's map tasks too), none failed
    assert result["task_attempts"] > result["spark_partitions"]
    assert result["failed_task_attempts"] == 0 and result["stage_attempts"] == 2
    assert result["cores"] == 2 and result["master"] == "local[2,2]"
    assert result["fair_share"] == 0.5 and 0 < result["largest_task_share"] <= 1
    reports = _verify(data)
    assert reports and all(r.identical for r in reports), [r.as_dict() for r in reports]
    assert any(r.live_cells for r in reports)


def test_a_task_that_fails_once_is_retried_and_the_rebuild_is_still_identical(spark, data):
    result = rebuild(load_settings(data=data), ["counters", "messages"], spark=spark,
                     fail_partition=1,  # a position range: its counters' parts too
                     merge_during_job=True)  # the runs merged as their tasks end
    assert set(result["folds"]) == {"by_position", "counters_merge"}
    assert 0 <= result["merged_during_job"] <= len(result["kept_attempts"])
    assert result["kept_attempts"][1] == 1  # the second attempt's run was merged
    assert result["failed_task_attempts"] == 1  # and the first attempt is counted
    assert all(r.identical for r in _verify(data))


def test_one_account_holding_every_event_is_spread_over_every_task(spark, tmp_path):
    """Item 5 of issue 30: one account (every kind of command, a mailbox deleted, messages
    deleted, restored, expunged, purged) is folded by position range for every projection,
    counters as mergeable parts, and verifies identical; by account, it is one task."""
    data = tmp_path / "data"
    with Letterlog.open(data) as store:
        fill(store, 24, hierarchy=True, accounts=["solo@example.org"])
        for i in range(40):
            store.deliver(account="solo@example.org",
                          raw=make_mail(f"Solo {i}", message_id=f"<s{i}@example.org>"))
    settings = load_settings(data=data)
    before = rebuild(settings, spark=spark, partitions=4, by_account_only=True)
    assert before["layout"] == "by_account_only"
    counts = before["folds"]["by_account"]["partition_events"]
    assert max(counts) == sum(counts) == before["position"]  # one task holds everything
    assert all(r.identical for r in _verify(data))
    after = rebuild(settings, spark=spark, partitions=4)
    position = after["position"]
    assert after["layout"] == "by_position"
    spread = after["folds"]["by_position"]["partition_events"]
    assert sum(spread) == position  # each event once
    unit = position / (3 + after["last_range"])  # the last range: ``last_range`` times more
    assert max(spread[:-1]) <= unit + 1 and spread[-1] <= after["last_range"] * unit + 1
    assert len(spread) == 4 and min(spread) > 0
    assert after["folds"]["counters_merge"]["partition_events"] == [4, 0] or \
        sorted(after["folds"]["counters_merge"]["partition_events"]) == [0, 4]  # 4 parts
    reports = _verify(data)
    assert all(r.identical for r in reports), [r.as_dict() for r in reports]
    assert any(r.table == "counters" and r.live_cells for r in reports)


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


def test_a_spark_view_built_after_an_erasure_has_none_of_it_and_leaves_no_run_files(
        spark, tmp_path):
    """A view as at a position before an erasure, built on Spark after it, loses the erased
    message as soon as it is built; the job's run files are gone when it returns."""
    from tests.erasure_support import ACCOUNT, files_holding_any_form, marked_mail

    data = tmp_path / "data"
    raw, markers = marked_mail("s", attachment=False)
    with Letterlog.open(data) as store:
        erased = store.deliver(account=ACCOUNT, raw=raw)
        kept = store.deliver(account=ACCOUNT, raw=marked_mail("t", attachment=False)[0])
        then = store.max_position()
        store.erase_message(erased.message_id)
    result = rebuild(load_settings(data=data), spark=spark, until=then, view="snap")
    assert (result["view"], result["position"]) == ("snap", then)
    with Letterlog.open(data) as store:
        listed = store.reading(view="snap").messages(ACCOUNT, "INBOX")
        assert [m.message_id for m in listed] == [kept.message_id]
        assert store.reading(view="snap").counters(ACCOUNT)["mailboxes"]["INBOX"][
            "messages"] == 1
    assert files_holding_any_form(data, markers) == {}
    assert not any(data.glob(".spark-runs-*"))
