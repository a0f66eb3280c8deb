"""Extract: the event log as a Spark DataFrame, read in parallel position ranges.

A PySpark Python data source (``letterlog_events``, ADR 0012). The driver asks for the log's
head once and cuts ``1..stop`` into position ranges, one input partition each; an executor
opens the event log from the settings shipped with the job (embedded SQLite file or
PostgreSQL) and reads its range page by page (``row_pages``, through the job's door
``adapters.bootstrap.spark``: one plain ``SELECT`` per page on SQLite,
``select_notifications`` on PostgreSQL). It decodes only the msgpack it must to find each
event's account (the relay's Kafka key, ``account_key``), and hands Spark Arrow record batches of

    position long, aggregate binary(16), version long, topic string, state binary,
    account binary(16)

with ``state`` the stored bytes exactly as in the log (the fold decodes them in the
executors). An event whose state is not a msgpack map or whose topic names no class fails
the read with ``CorruptEvent`` naming position, aggregate, version and topic.

The ``handled`` option (projection names) keeps only the events of a class one of them
handles (each distinct topic is resolved once).

The rebuild itself (``job.py``) does not go through the data source: ``keyed_ranges`` is
what its ``by_account`` fold reads, one position range per RDD task, as
``((account, position), row)`` pairs for a shuffle by account (measured on the 100k bench
log, local[1]: read + key + shuffle + sort of counters' events 5.8 s this way, 16.2 s
through the data source, Arrow and a DataFrame shuffle).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from eventsourcing.utils import resolve_topic
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from adapters.bootstrap.spark import account_key, row_pages
from adapters.bootstrap.spark import corrupt_event as _corrupt
from adapters.bootstrap.spark import uuid_of as _uuid_of
from projections.registry import select
from spark_replay.settings import open_event_log

SCHEMA = ("position long, aggregate binary, version long, topic string, state binary, "
          "account binary")
NAME = "letterlog_events"
PAGE = 2000


class _Range(InputPartition):
    def __init__(self, start: int, stop: int) -> None:
        super().__init__((start, stop))
        self.start = start
        self.stop = stop


def ranges(start: int, stop: int, parts: int, last: float = 1.0) -> list[tuple[int, int]]:
    """``start..stop`` (inclusive) cut into at most ``parts`` contiguous ranges; ``last``:
    the last range that many times the size of each other one."""
    if stop < start:
        return []
    if last != 1.0 and parts > 1 and stop - start + 1 >= 2 * parts:
        unit = (stop - start + 1) / (parts - 1 + last)
        cuts = [start + round(unit * i) for i in range(parts)] + [stop + 1]
        return [(lo, hi - 1) for lo, hi in zip(cuts, cuts[1:], strict=False)]
    size = -(-(stop - start + 1) // max(1, parts))
    return [(lo, min(lo + size - 1, stop)) for lo in range(start, stop + 1, size)]


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
        keep = _kept_topics(self.handled)
        log = open_event_log(self.settings)
        try:
            for rows in row_pages(log, partition.start, partition.stop, PAGE):
                columns = _columns(rows, keep)
                if len(columns[0]):
                    yield pa.RecordBatch.from_arrays(columns, schema=schema)
        finally:
            log.close()


def keyed_ranges(settings: dict[str, Any], handled: Sequence[str]
                 ) -> Callable[[Iterable[tuple[int, int]]], Iterator[tuple[Any, Any]]]:
    """The function ``RDD.mapPartitions`` runs on position ranges: every event of a class
    the ``handled`` projections handle, as ``((account, position), row)`` with ``row`` the
    stored ``(position, aggregate, version, topic, state)``; ``CorruptEvent`` as above."""

    def run(spans: Iterable[tuple[int, int]]) -> Iterator[tuple[Any, Any]]:
        keep = _kept_topics(list(handled))
        log = open_event_log(settings)
        try:
            for start, stop in spans:
                for rows in row_pages(log, start, stop, PAGE):
                    for position, aggregate, version, topic, state in rows:
                        try:
                            if keep is not None and not keep(topic):
                                continue
                            state = bytes(state)
                            account = account_key(_uuid_of(aggregate), topic, state)
                        except Exception as e:
                            raise _corrupt(position, aggregate, version, topic, e) from e
                        yield (account, position), (position, aggregate, version, topic, state)
        finally:
            log.close()

    return run


def account_partition(key: tuple[bytes, int]) -> int:
    """The shuffle's partition function: the account's CRC-32 (the same in every Python
    process, unlike ``hash``); Spark takes it modulo the partitions."""
    return zlib.crc32(key[0])


def _kept_topics(handled: list[str]) -> Callable[[str], bool] | None:
    """Whether an event of a topic is kept (``None``: every event): its class is handled by
    one of the ``handled`` projections (one handling every event keeps every event)."""

    projections = select(handled)
    if not projections or any(not p.handles for p in projections):
        return None
    classes = frozenset().union(*(p.handles for p in projections))
    known: dict[str, bool] = {}

    def kept(topic: str) -> bool:
        found = known.get(topic)
        if found is None:
            found = known[topic] = resolve_topic(topic) in classes
        return found

    return kept


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
