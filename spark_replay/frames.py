"""For data engineers: the event history and the projections as Spark DataFrames.

``events_dataframe(spark, settings)``: one row per event --
``position long, aggregate string, version long, topic string, type string,
account string, time timestamp, fields string`` (the decoded event's fields as JSON: ids as
strings, dates ISO 8601, bytes as ``"<N bytes>"``). Decoded in the executors.

A message's personal part (envelope, attachment names, inline body) stays sealed unless
``personal=True``: it appears as ``{"sealed": KEY_ID}``. A frame or a Parquet file with
personal data opened is a copy that erasing the message's key cannot reach, so opening it is
the caller's explicit choice; a part whose key was destroyed appears as ``{"shredded": true}``
either way.

``projection_dataframe(spark, settings, name)``: the cells of projection ``name`` rebuilt
from the log by the job's own fold (the same runner and projectors as every rebuild) --
``table string, row binary, column binary, value binary, version long``, the visible cells
only. Nothing is written to the table stores.

``export(settings, what, directory)``: either of them as Parquet, the events partitioned
by ``type``, a projection's cells by ``table`` (``letterlog export --format parquet``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any
from uuid import UUID

from adapters.settings import Settings
from domain.personal import Personal
from projections.registry import select
from spark_replay.fold import CELLS, fold_cells
from spark_replay.settings import open_event_log, to_wire
from spark_replay.source import raw_events

EVENTS = ("position long, aggregate string, version long, topic string, type string, "
          "account string, time timestamp, fields string")


def _head(settings: Settings) -> int:
    from adapters.spark import require_store

    require_store(settings)  # an export never makes an empty store
    log = open_event_log(to_wire(settings))
    try:
        return int(log.recorder.max_notification_id() or 0)
    finally:
        log.close()


def _jsonable(value: Any, personal: bool = False) -> Any:
    if isinstance(value, Personal):
        if value.shredded:
            return {"shredded": True}
        if not personal:
            return {"sealed": str(value.key_id) if value.key_id else None}
        return _jsonable(value.data)
    if isinstance(value, dict):
        return {str(k): _jsonable(v, personal) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v, personal) for v in value]
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    return value


def _decode_events(wire: dict[str, Any], personal: bool) -> Any:
    def run(batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from adapters.eventlog.reader import row_decoder
        from adapters.eventlog.transcoder import uuid_from_int

        log = open_event_log(wire)
        decode = row_decoder(log)
        try:
            for batch in batches:
                out: list[list[Any]] = [[] for _ in range(8)]
                columns = [batch.column(i).to_pylist() for i in range(6)]
                for position, aggregate, version, topic, state, account in zip(*columns,
                                                                                 strict=True):
                    _, event = decode((position, uuid_from_int(int.from_bytes(aggregate, "big")),
                                       version, topic, state))
                    fields = json.dumps(_jsonable(
                        {k: v for k, v in vars(event).items()
                         if k not in ("originator_id", "originator_version", "timestamp")},
                        personal), sort_keys=True)
                    for i, item in enumerate((
                            position, str(event.originator_id), version, topic,
                            type(event).__qualname__, str(UUID(bytes=account)),
                            event.timestamp, fields)):
                        out[i].append(item)
                yield pa.RecordBatch.from_arrays(
                    [pa.array(out[0], pa.int64()), pa.array(out[1], pa.string()),
                     pa.array(out[2], pa.int64()), pa.array(out[3], pa.string()),
                     pa.array(out[4], pa.string()), pa.array(out[5], pa.string()),
                     pa.array(out[6], pa.timestamp("us", tz="UTC")),
                     pa.array(out[7], pa.string())],
                    names=["position", "aggregate", "version", "topic", "type", "account",
                           "time", "fields"])
        finally:
            log.close()

    return run


def events_dataframe(spark: Any, settings: Settings, *, personal: bool = False) -> Any:
    """One row per event of the log (see the module docstring)."""
    wire = to_wire(settings)
    return (raw_events(spark, wire, _head(settings))
            .mapInArrow(_decode_events(wire, personal), EVENTS))


def projection_dataframe(spark: Any, settings: Settings, name: str) -> Any:
    """The cells of projection ``name`` rebuilt from the log (see the module docstring)."""
    select([name])  # KeyError naming an unknown projection
    wire = to_wire(settings)
    parts = spark.sparkContext.defaultParallelism
    return (raw_events(spark, wire, _head(settings), partitions=parts)
            .repartition(parts, "account").sortWithinPartitions("position")
            .mapInArrow(fold_cells(wire, [name]), CELLS))


def export(settings: Settings, what: str, directory: str, *, personal: bool = False,
           master: str | None = None, spark: Any = None) -> dict[str, Any]:
    """``what`` (``events`` or a projection's name) as Parquet files under ``directory``."""
    from spark_replay.session import effective_conf, spark_session

    session = spark or spark_session(master)
    if what == "events":
        frame, by = events_dataframe(session, settings, personal=personal), "type"
    else:
        frame, by = projection_dataframe(session, settings, what), "table"
    frame.write.mode("overwrite").partitionBy(by).parquet(directory)
    rows = session.read.parquet(directory).count()
    return {"exported": what, "directory": directory, "rows": rows, "partitioned_by": by,
            "personal": personal and what == "events", "spark_conf": effective_conf(session)}
