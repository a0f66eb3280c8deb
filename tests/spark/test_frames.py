"""events_dataframe, projection_dataframe and the Parquet export, on local[2]."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.embedded import Letterlog
from adapters.settings import load_settings
from spark_replay.frames import events_dataframe, export, projection_dataframe
from tests.spark.conftest import make_store

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("spark-frames") / "data"
    make_store(path, messages=12)  # some purged or erased: their keys destroyed
    return path


def purged(data: Path) -> set[str]:
    with Letterlog.open(data) as store:
        return {str(e.originator_id) for _, e in store.events()
                if type(e).__qualname__ == "Message.Purged"}


def test_events_dataframe_has_one_decoded_row_per_event(spark, data):
    frame = events_dataframe(spark, load_settings(data=data))
    rows = frame.orderBy("position").collect()
    with Letterlog.open(data) as store:
        expected = list(store.events())
    assert [r.position for r in rows] == [p for p, _ in expected]
    for row, (_, event) in zip(rows, expected, strict=True):
        assert (row.type, row.aggregate, row.version) == (
            type(event).__qualname__, str(event.originator_id), event.originator_version)
    delivered = [r for r in rows if r.type == "Message.Delivered"]
    assert len(delivered) == 12 and all('"mailbox_id"' in r.fields for r in delivered)
    # the personal parts stay sealed unless asked for; a purged one is shredded either way
    gone = purged(data) & {r.aggregate for r in delivered}
    assert len(gone) >= 2 and not any("Subject " in r.fields for r in delivered)
    assert {r.aggregate for r in delivered if '"shredded": true' in r.fields} == gone
    assert sum('"sealed": "' in r.fields for r in delivered) == 12 - len(gone)


def test_events_dataframe_opens_personal_parts_only_when_asked(spark, data):
    frame = events_dataframe(spark, load_settings(data=data), personal=True)
    delivered = frame.where("type = 'Message.Delivered'").collect()
    opened = {r.aggregate for r in delivered if '"Subject ' in r.fields}
    shredded = {r.aggregate for r in delivered if '"shredded": true' in r.fields}
    assert shredded == purged(data) & {r.aggregate for r in delivered}
    assert len(shredded) >= 2 and len(opened) == 12 - len(shredded)


def test_projection_dataframe_holds_the_live_projections_cells(spark, data):
    frame = projection_dataframe(spark, load_settings(data=data), "counters")
    got = {(bytes(r.row), bytes(r.column), bytes(r.value), r.version) for r in frame.collect()}
    with Letterlog.open(data) as store:
        host = store.projections
        live = {(row, column, value, version)
                for row, cells in host.tables.scan_cells(host.physical("counters"))
                for column, (value, version) in cells.items()}
    assert got == live and len(live) > 10


def test_export_writes_parquet_partitioned_and_spark_sql_reads_it(spark, data, tmp_path):
    result = export(load_settings(data=data), "events", str(tmp_path / "events"), spark=spark)
    assert result["rows"] > 12
    assert any(p.name.startswith("type=Message.Delivered") for p in (tmp_path / "events").iterdir())
    spark.read.parquet(str(tmp_path / "events")).createOrReplaceTempView("events")
    per_type = {r.type: r.n for r in spark.sql(
        "SELECT type, count(*) AS n FROM events GROUP BY type").collect()}
    assert per_type["Message.Delivered"] == 12
