"""events_dataframe, projection_dataframe and the Parquet export, on local[2]."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.config.settings import load_settings
from adapters.embedded import Letterlog
from spark_replay.frames import events_dataframe, export, projection_dataframe
from tests.spark.support import make_store

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
    assert result["rows"] > 12 and result["partitioned_by"] == "date"
    assert any(p.name.startswith("date=20") for p in (tmp_path / "events").iterdir())
    spark.read.parquet(str(tmp_path / "events")).createOrReplaceTempView("events")
    per_type = {r.type: r.n for r in spark.sql(
        "SELECT type, count(*) AS n FROM events GROUP BY type").collect()}
    assert per_type["Message.Delivered"] == 12


def test_the_events_export_is_typed_and_its_time_is_a_utc_timestamp(spark, data, tmp_path):
    import pyarrow.parquet as pq

    export(load_settings(data=data), "events", str(tmp_path / "events"), spark=spark)
    part = next((tmp_path / "events").glob("date=*/*.parquet"))
    schema = pq.read_schema(part)
    time_type = schema.field("time").type
    assert (time_type.unit, time_type.tz) == ("us", "UTC")  # not INT96, zone explicit
    assert str(schema.field("flags").type) == "list<element: string>"
    row = spark.read.parquet(str(tmp_path / "events")).where(
        "type = 'Message.FlagsChanged'").first()
    assert "\\Seen" in row.flags and row.mailbox_id and row.message_id == row.aggregate
    assert row.size > 0 and row.uid >= 1
    assert row.account_address.endswith("@example.org") and row.mailbox in ("INBOX", "Archive")


def test_pyarrow_reads_the_export_s_date_as_a_date_when_told_as_docs_spark_md_shows(
        spark, data, tmp_path):
    """Issue 42, item 15: the ``date`` partition is a string to pyarrow unless told its
    type; docs/spark.md shows how."""
    import datetime

    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    export(load_settings(data=data), "events", str(tmp_path / "events"), spark=spark)
    plain = pq.read_table(tmp_path / "events")
    assert not pa.types.is_date(plain.schema.field("date").type)
    told = pq.read_table(tmp_path / "events", partitioning=ds.partitioning(
        pa.schema([("date", pa.date32())]), flavor="hive"))
    assert pa.types.is_date32(told.schema.field("date").type)
    assert all(isinstance(d, datetime.date) for d in told.column("date").to_pylist())
    assert told.num_rows == plain.num_rows > 12


def test_the_events_export_appends_what_is_new_once_and_a_rerun_adds_nothing(spark, tmp_path):
    from tests.factories import make_mail

    data, out = tmp_path / "data", tmp_path / "events"
    make_store(data, messages=30)  # 30 deliveries, two of them copied (i = 13, 26)
    settings = load_settings(data=data)
    with Letterlog.open(data) as store:
        head = store.max_position()
    first = export(settings, "events", str(out), spark=spark)
    assert (first["rows"], first["rows_added"], first["to_position"]) == (head, head, head)
    again = export(settings, "events", str(out), spark=spark)
    assert (again["rows"], again["rows_added"]) == (head, 0)
    with Letterlog.open(data) as store:
        store.deliver(account="ada@example.org", raw=make_mail("late"))
        later = store.max_position()
    # a run that died after moving its files in, before recording them, left these:
    stray = out / "date=2000-01-01" / f"p{head + 1}-0.parquet"
    stray.parent.mkdir()
    stray.write_bytes(b"not parquet")
    (out / "_staging").mkdir()
    third = export(settings, "events", str(out), spark=spark)
    assert (third["from_position"], third["rows_added"]) == (head + 1, later - head)
    assert not stray.exists() and not (out / "_staging").exists()
    frame = spark.read.parquet(str(out))
    assert frame.count() == frame.select("position").distinct().count() == later
    frame.createOrReplaceTempView("events")
    # the documented "deliveries per account and day": copies are not deliveries
    delivered = spark.sql(
        "SELECT account_address, date, count(*) AS delivered FROM events "
        "WHERE type = 'Message.Delivered' AND copied_from IS NULL "
        "GROUP BY account_address, date").collect()
    per_account: dict[str, int] = {}
    for r in delivered:
        per_account[r.account_address] = per_account.get(r.account_address, 0) + r.delivered
    assert per_account == {"ada@example.org": 11, "grace@example.org": 10,
                           "linus@example.org": 10}  # make_store's round robin, one late
    assert frame.where("type = 'Message.Delivered' AND copied_from IS NOT NULL").count() == 2
    busiest = spark.sql("SELECT account_address, count(*) AS events FROM events "
                        "GROUP BY account_address ORDER BY events DESC").collect()
    assert sum(r.events for r in busiest) == later
    labelled = {r.label for r in spark.sql(
        "SELECT label FROM events LATERAL VIEW explode(labels) AS label "
        "WHERE type = 'Message.LabelsChanged'").collect()}
    assert labelled == {"later"}  # what the docs' third query explodes: labels after a change


def test_an_events_export_refuses_a_directory_that_is_not_an_export(spark, data, tmp_path):
    from domain.errors import InvalidCommand

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(InvalidCommand, match="not a letterlog export"):
        export(load_settings(data=data), "events", str(tmp_path / "mine"), spark=spark)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
