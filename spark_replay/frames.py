"""For data engineers: the event history and the projections as Spark DataFrames.

``events_dataframe(spark, settings)``: one row per event, typed (``EVENTS``; docs/spark.md
has the table): position, time (UTC), its date, type, ids (account, mailbox, message), uid,
size, state, flags and labels as arrays, ``copied_from``, and ``fields``: every field of the
decoded event as JSON (ids as strings, dates ISO 8601, bytes as ``"<N bytes>"``). Decoded in
the executors.

A message's personal part (envelope, attachment names, inline body) stays sealed unless
``personal=True``: it appears as ``{"sealed": KEY_ID}``. A frame or a Parquet file with
personal data opened is a copy that erasing the message's key cannot reach, so opening it is
the caller's explicit choice; a part whose key was destroyed appears as ``{"shredded": true}``
either way.

``projection_dataframe(spark, settings, name)``: the cells of projection ``name`` rebuilt
from the log by the job's own fold (the same runner and projectors as every rebuild) --
``table string, row binary, column binary, value binary, version long``, the visible cells
only. Nothing is written to the table stores.

``export(settings, what, directory)``: either of them as Parquet (``letterlog export
--format parquet``): the events partitioned by ``date`` and appended from the last position
exported there (``export_events``), a projection's cells by ``table``, replacing the
directory.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import pyarrow as pa

from adapters.bootstrap.spark import (
    Settings,
    read_models,
    require_store,
    row_decoder,
    uuid_from_int,
)
from domain.errors import InvalidCommand
from domain.personal import Personal
from projections import names as n
from projections.queries import account_address
from projections.registry import select
from spark_replay.datasource import raw_events
from spark_replay.fold import CELLS, fold_cells
from spark_replay.session import effective_conf, spark_session
from spark_replay.settings import open_event_log, to_wire
from spark_replay.watch import started, watching

EVENTS = ("position long, aggregate string, version long, topic string, type string, "
          "account string, account_address string, time timestamp, date date, "
          "mailbox_id string, mailbox string, message_id string, "
          "uid long, size long, state string, flags array<string>, labels array<string>, "
          "copied_from string, fields string")


def _head(settings: Settings) -> int:
    require_store(settings, read_only=True)  # never makes a store; reads a read-only one
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


_TYPED = (("position", "int64"), ("aggregate", "string"), ("version", "int64"),
          ("topic", "string"), ("type", "string"), ("account", "string"),
          ("account_address", "string"), ("time", "timestamp"), ("date", "date32"),
          ("mailbox_id", "string"), ("mailbox", "string"),
          ("message_id", "string"), ("uid", "int64"), ("size", "int64"),
          ("state", "string"), ("flags", "strings"), ("labels", "strings"),
          ("copied_from", "string"), ("fields", "string"))


def _arrow_type(kind: str) -> Any:
    return {"int64": pa.int64(), "string": pa.string(), "timestamp": pa.timestamp("us", tz="UTC"),
            "date32": pa.date32(), "strings": pa.list_(pa.string())}[kind]


def _row(position: int, version: int, topic: str, account: bytes, event: Any,
         personal: bool, names: dict[str, dict[str, str | None]]) -> tuple[Any, ...]:
    """One event as the values of ``_TYPED`` (see ``EVENTS``)."""
    attrs = vars(event)
    fields = json.dumps(_jsonable({k: v for k, v in attrs.items() if k not in (
        "originator_id", "originator_version", "timestamp")}, personal), sort_keys=True)
    kind = type(event).__qualname__
    at = event.timestamp.astimezone(UTC)

    def text(name: str) -> str | None:
        value = attrs.get(name)
        return None if value is None else str(value)

    def listed(name: str) -> list[str] | None:
        value = attrs.get(name)
        return None if value is None else sorted(str(v) for v in value)

    account_id, mailbox_id = str(UUID(bytes=account)), text("mailbox_id")
    if mailbox_id is None and kind.startswith("Mailbox."):
        mailbox_id = str(event.originator_id)
    return (position, str(event.originator_id), version, topic, kind, account_id,
            names["accounts"].get(account_id), at, at.date(), mailbox_id,
            names["mailboxes"].get(mailbox_id) if mailbox_id else None,
            str(event.originator_id) if kind.startswith("Message.") else None,
            attrs.get("uid"), attrs.get("size"), text("state"), listed("flags"),
            listed("labels"), text("copied_from"), fields)


def _names(settings: Settings) -> dict[str, dict[str, str | None]]:
    """The accounts' addresses and the mailboxes' names, as the read models hold them now
    (a mailbox renamed since an event shows its current name; a deleted one none)."""
    accounts: dict[str, str | None] = {}
    mailboxes: dict[str, str | None] = {}
    with read_models(settings) as (tables, physical):  # as they are: nothing caught up
        for row, cells in tables.scan(physical(n.MAILBOXES)):
            if n.MB_ACCOUNT not in cells or cells.get(n.MB_DELETED) == b"1":
                continue
            mailboxes[str(UUID(bytes=row))] = cells.get(n.MB_NAME, b"").decode()
            account = UUID(bytes=cells[n.MB_ACCOUNT])
            if str(account) not in accounts:
                accounts[str(account)] = account_address(tables, account, physical)
    return {"accounts": accounts, "mailboxes": mailboxes}


def _decode_events(wire: dict[str, Any], personal: bool,
                   names: dict[str, dict[str, str | None]]) -> Any:
    def run(batches: Iterable[Any]) -> Iterator[Any]:
        log = open_event_log(wire)
        decode = row_decoder(log)
        types = [_arrow_type(kind) for _, kind in _TYPED]
        try:
            for batch in batches:
                out: list[list[Any]] = [[] for _ in _TYPED]
                columns = [batch.column(i).to_pylist() for i in range(6)]
                for position, aggregate, version, topic, state, account in zip(*columns,
                                                                                 strict=True):
                    _, event = decode((position, uuid_from_int(int.from_bytes(aggregate, "big")),
                                       version, topic, state))
                    for i, item in enumerate(_row(position, version, topic, account, event,
                                                  personal, names)):
                        out[i].append(item)
                yield pa.RecordBatch.from_arrays(
                    [pa.array(values, kind) for values, kind in zip(out, types, strict=True)],
                    names=[name for name, _ in _TYPED])
        finally:
            log.close()

    return run


def events_dataframe(spark: Any, settings: Settings, *, personal: bool = False,
                     start: int = 1, stop: int | None = None) -> Any:
    """One row per event of the log, positions ``start..stop`` (default: to the head; see
    the module docstring)."""
    wire = to_wire(settings)
    head = _head(settings) if stop is None else stop
    return (raw_events(spark, wire, head, start=start)
            .mapInArrow(_decode_events(wire, personal, _names(settings)), EVENTS))


def projection_dataframe(spark: Any, settings: Settings, name: str) -> Any:
    """The cells of projection ``name`` rebuilt from the log (see the module docstring)."""
    select([name])  # KeyError naming an unknown projection
    wire = to_wire(settings)
    parts = spark.sparkContext.defaultParallelism
    return (raw_events(spark, wire, _head(settings), partitions=parts)
            .repartition(parts, "account").sortWithinPartitions("position")
            .mapInArrow(fold_cells(wire, [name]), CELLS))


MARKER = "_letterlog_export.json"
"""In an events export: the last position exported (Spark ignores names starting with _)."""
_STAGING = "_staging"
_PART = re.compile(r"p(\d+)-\d+\.parquet")


def export(settings: Settings, what: str, directory: str, *, personal: bool = False,
           master: str | None = None, spark: Any = None) -> dict[str, Any]:
    """``what`` (``events`` or a projection's name) as Parquet files under ``directory``:
    the events appended from the last position exported there (``export_events``), a
    projection's cells replacing what is there, partitioned by ``table``."""
    session = spark or spark_session(master)
    started(session.sparkContext)  # or one line saying why it cannot (ADR 0093)
    with watching(session.sparkContext):  # stages and tasks, as progress lines
        if what == "events":
            result = export_events(session, settings, Path(directory), personal=personal)
        else:
            _head(settings)  # no store, no export
            frame = projection_dataframe(session, settings, what)
            frame.write.mode("overwrite").partitionBy("table").parquet(directory)
            result = {"rows": session.read.parquet(directory).count(),
                      "partitioned_by": "table"}
    return {"exported": what, "directory": directory, **result,
            "personal": personal and what == "events", "spark_conf": effective_conf(session)}


def export_events(spark: Any, settings: Settings, directory: Path, *,
                  personal: bool = False) -> dict[str, Any]:
    """Appends the events after the last position exported to ``directory`` (all of them
    into a directory without a ``MARKER``, which is emptied first), partitioned by
    ``date`` (UTC), time as a UTC-adjusted ``TIMESTAMP_MICROS``. Idempotent: each increment
    is written aside, moved in as ``date=D/p<first>-<n>.parquet``, then ``MARKER`` records
    its last position; files of an increment the marker does not record (a run that died)
    are removed first, so a re-run adds each event once."""
    head = _head(settings)
    done = _exported_to(directory)
    first = done + 1
    added = 0
    if first <= head:
        staging = directory / _STAGING
        frame = events_dataframe(spark, settings, personal=personal, start=first, stop=head)
        key = "spark.sql.parquet.outputTimestampType"
        before = spark.conf.get(key, None)
        spark.conf.set(key, "TIMESTAMP_MICROS")  # not INT96: zone-less in other engines
        try:
            frame.write.mode("overwrite").partitionBy("date").parquet(str(staging))
        finally:
            if before is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, before)
        added = spark.read.parquet(str(staging)).count()
        for n, part in enumerate(sorted(staging.glob("date=*/*.parquet"))):
            target = directory / part.parent.name / f"p{first}-{n}.parquet"
            target.parent.mkdir(exist_ok=True)
            os.replace(part, target)
        shutil.rmtree(staging)
        _write_marker(directory, head)
    rows = spark.read.parquet(str(directory)).count() if any(directory.glob("date=*")) else 0
    return {"rows": rows, "rows_added": added, "from_position": first,
            "to_position": max(head, done), "partitioned_by": "date"}


def _exported_to(directory: Path) -> int:
    """The last position exported to ``directory``, after removing what a dead run left
    (its staging, the files of an increment the marker does not record); a directory
    without a marker is emptied (a full export replaces it, as before increments)."""
    marker = directory / MARKER
    if not marker.exists():
        if directory.exists():
            strangers = [p.name for p in directory.iterdir()
                         if not p.name.startswith(("date=", "type=", "_", "."))]
            if strangers:
                raise InvalidCommand(f"{directory}: holds {strangers[0]!r}, not a letterlog "
                                     "export; give a new or empty directory")
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        return 0
    done = int(json.loads(marker.read_text())["position"])
    shutil.rmtree(directory / _STAGING, ignore_errors=True)
    for part in directory.glob("date=*/p*.parquet"):
        found = _PART.fullmatch(part.name)
        if found is not None and int(found.group(1)) > done:
            part.unlink()
    return done


def _write_marker(directory: Path, position: int) -> None:
    temporary = directory / (MARKER + ".tmp")
    temporary.write_text(json.dumps({"position": position}) + "\n")
    os.replace(temporary, directory / MARKER)
