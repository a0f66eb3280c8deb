"""The event log as a Spark DataFrame: a PySpark Python data source (``letterlog_events``,
ADR 0012), read in parallel position ranges (``source.ranges``), one input partition each.

An executor reads its range as ``source`` does and hands Spark Arrow record batches of

    position long, aggregate binary(16), version long, topic string, state binary,
    account binary(16)

with ``state`` the stored bytes exactly as in the log and ``account`` the relay's Kafka key
(``account_key``). The ``handled`` option (projection names) keeps only the events of a
class one of them handles (each distinct topic is resolved once).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from adapters.bootstrap.spark import account_key, row_pages
from adapters.bootstrap.spark import corrupt_event as _corrupt
from adapters.bootstrap.spark import uuid_of as _uuid_of
from spark_replay.settings import open_event_log
from spark_replay.source import PAGE, kept_topics, ranges

SCHEMA = ("position long, aggregate binary, version long, topic string, state binary, "
          "account binary")
NAME = "letterlog_events"


class _Range(InputPartition):
    def __init__(self, start: int, stop: int) -> None:
        super().__init__((start, stop))
        self.start = start
        self.stop = stop


class EventsReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.settings = json.loads(options["settings"])
        self.start = int(options.get("start", "1"))
        self.stop = int(options["stop"])
        self.parts = int(options.get("partitions", "2"))
        self.handled = [name for name in options.get("handled", "").split(",") if name]

    def partitions(self) -> list[InputPartition]:
        return [_Range(lo, hi) for lo, hi in ranges(self.start, self.stop, self.parts)]

    def read(self, partition: Any) -> Iterator[Any]:
        schema = _arrow_schema()
        keep = kept_topics(self.handled)
        log = open_event_log(self.settings)
        try:
            for rows in row_pages(log, partition.start, partition.stop, PAGE):
                columns = _columns(rows, keep)
                if len(columns[0]):
                    yield pa.RecordBatch.from_arrays(columns, schema=schema)
        finally:
            log.close()


def _columns(rows: list[tuple[int, Any, int, str, bytes]],
             keep: Callable[[str], bool] | None = None) -> list[Any]:
    positions, aggregates, versions, topics, states, accounts = [], [], [], [], [], []
    for position, originator_id, version, topic, state in rows:
        try:
            if keep is not None and not keep(topic):
                continue
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
    return pa.schema([("position", pa.int64()), ("aggregate", pa.binary()),
                      ("version", pa.int64()), ("topic", pa.string()),
                      ("state", pa.binary()), ("account", pa.binary())])


class EventsSource(DataSource):
    """``spark.read.format("letterlog_events").option("settings", json).option("stop", P)``"""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return EventsReader(dict(self.options))


def raw_events(spark: Any, settings: dict[str, Any], stop: int, start: int = 1,
               partitions: int | None = None, *, handled: Sequence[str] = ()) -> Any:
    """The log's stored events ``start..stop`` as a DataFrame (``SCHEMA``); ``handled``:
    see the module docstring."""
    spark.dataSource.register(EventsSource)
    parts = partitions or max(2, spark.sparkContext.defaultParallelism)
    return (spark.read.format(NAME).option("settings", json.dumps(settings))
            .option("start", str(start)).option("stop", str(stop))
            .option("partitions", str(parts)).option("handled", ",".join(handled)).load())
