"""Extract: the event log as a Spark DataFrame, read in parallel position ranges.

A PySpark Python data source (``letterlog_events``, ADR 0012). The driver asks for the log's
head once and cuts ``1..stop`` into position ranges, one input partition each; an executor
opens the event log from the settings shipped with the job (embedded SQLite file or
PostgreSQL) and reads its range page by page (``adapters.eventlog.reader.row_pages``: one
plain ``SELECT`` per page on SQLite, ``select_notifications`` on PostgreSQL). It decodes
only the msgpack it must to find each event's account (the relay's Kafka key,
``account_key``), and hands Spark Arrow record batches of

    position long, aggregate binary(16), version long, topic string, state binary,
    account binary(16)

with ``state`` the stored bytes exactly as in the log (the fold decodes them in the
executors). An event whose state is not a msgpack map or whose topic names no class fails
the read with ``CorruptEvent`` naming position, aggregate, version and topic.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

SCHEMA = ("position long, aggregate binary, version long, topic string, state binary, "
          "account binary")
NAME = "letterlog_events"
PAGE = 2000


class _Range(InputPartition):  # type: ignore[misc]
    def __init__(self, start: int, stop: int) -> None:
        super().__init__((start, stop))
        self.start = start
        self.stop = stop


def ranges(start: int, stop: int, parts: int) -> list[tuple[int, int]]:
    """``start..stop`` (inclusive) cut into at most ``parts`` contiguous ranges."""
    if stop < start:
        return []
    size = -(-(stop - start + 1) // max(1, parts))
    return [(lo, min(lo + size - 1, stop)) for lo in range(start, stop + 1, size)]


class EventsReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, options: dict[str, str]) -> None:
        self.settings = json.loads(options["settings"])
        self.start = int(options.get("start", "1"))
        self.stop = int(options["stop"])
        self.parts = int(options.get("partitions", "2"))

    def partitions(self) -> list[InputPartition]:
        return [_Range(lo, hi) for lo, hi in ranges(self.start, self.stop, self.parts)]

    def read(self, partition: Any) -> Iterator[Any]:
        import pyarrow as pa

        from adapters.eventlog.reader import row_pages
        from spark_replay.settings import open_event_log

        schema = _arrow_schema()
        log = open_event_log(self.settings)
        try:
            for rows in row_pages(log, partition.start, partition.stop, PAGE):
                yield pa.RecordBatch.from_arrays(_columns(rows), schema=schema)
        finally:
            log.close()


def _columns(rows: list[tuple[int, Any, int, str, bytes]]) -> list[Any]:
    import pyarrow as pa

    from adapters.eventlog.reader import _corrupt, _uuid_of
    from adapters.eventlog.records import account_key

    positions, aggregates, versions, topics, states, accounts = [], [], [], [], [], []
    for position, originator_id, version, topic, state in rows:
        try:
            aggregate = _uuid_of(originator_id)
            account = account_key(aggregate, topic, state)
        except Exception as e:
            raise _corrupt(position, originator_id, version, topic, e) from e
        positions.append(position)
        aggregates.append(aggregate.bytes)
        versions.append(version)
        topics.append(topic)
        states.append(bytes(state))
        accounts.append(account)
    return [pa.array(positions, pa.int64()), pa.array(aggregates, pa.binary()),
            pa.array(versions, pa.int64()), pa.array(topics, pa.string()),
            pa.array(states, pa.binary()), pa.array(accounts, pa.binary())]


def _arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("position", pa.int64()), ("aggregate", pa.binary()),
                      ("version", pa.int64()), ("topic", pa.string()),
                      ("state", pa.binary()), ("account", pa.binary())])


class EventsSource(DataSource):  # type: ignore[misc]
    """``spark.read.format("letterlog_events").option("settings", json).option("stop", P)``"""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return EventsReader(dict(self.options))


def raw_events(spark: Any, settings: dict[str, Any], stop: int, start: int = 1,
               partitions: int | None = None) -> Any:
    """The log's stored events ``start..stop`` as a DataFrame (``SCHEMA``)."""
    spark.dataSource.register(EventsSource)
    parts = partitions or max(2, spark.sparkContext.defaultParallelism)
    return (spark.read.format(NAME).option("settings", json.dumps(settings))
            .option("start", str(start)).option("stop", str(stop))
            .option("partitions", str(parts)).load())
