"""Dead letters: records the stream workers set aside, and what an operator does with them.

A record that cannot be applied after its retries (not an event record, an unknown event
class, a projector failing on it, a topic not consumed) is written to ``dead_letters``, row
``topic/partition/offset`` (``DeadLetter.id`` prints it as ``topic/partition@offset``). Every
try that failed, by a worker or by a redrive, adds one ``d:attempt-NNNNNN`` cell (when, who,
how many tries, the error), so ``show`` gives the whole story.

A dead letter leaves ``dead_letters`` in one of two ways, each recorded in
``dead_letters_closed`` (same row key; the original cells plus ``d:outcome``
``discarded``/``redriven``, ``d:closed_at``, ``d:closed_by`` and ``d:reason``): ``discard``
(an operator decides it is not wanted) or ``redrive`` (applied again after a fix, and it
succeeded). The closing record is written before the dead letter is deleted, so a crash in
between leaves both, never neither (the next discard or redrive closes it again; applying
is idempotent).
"""

from __future__ import annotations

import getpass
import json
import re
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from adapters.eventlog.records import decode_record
from domain.errors import CorruptEvent, InvalidCommand, NotFound
from projections import names as n
from projections.names import (
    DL_ATTEMPT,
    DL_CLOSED_AT,
    DL_CLOSED_BY,
    DL_ERROR,
    DL_FIRST_SEEN,
    DL_KAFKA_TIME,
    DL_KEY,
    DL_LAST_SEEN,
    DL_OUTCOME,
    DL_POSITION,
    DL_REASON,
    DL_TIMES,
    DL_VALUE,
)
from projections.runner import identity
from projections.tablestore import DeleteRow, Mutation, Put, Row, TableSpec, TableStore

__all__ = [
    "CLOSED",
    "DEAD_LETTERS",
    "DeadLetter",
    "NoSuchDeadLetter",
    "dead_letter_row",
    "discard",
    "attempt_cell",
    "close_letter",
    "discard_dead_letter",
    "get_dead_letter",
    "list_closed",
    "list_dead_letters",
    "parse_id",
    "record_failures",
]

Physical = Callable[[str], str]

DEAD_LETTERS = TableSpec(n.DEAD_LETTERS, (n.F_DEAD,), split_by_salt=False)
CLOSED = TableSpec(n.DEAD_LETTERS_CLOSED, (n.F_DEAD,), split_by_salt=False)

_ID = re.compile(r"^(?P<topic>[A-Za-z0-9._-]{1,249})/(?P<partition>\d{1,9})@(?P<offset>\d{1,19})$")


class NoSuchDeadLetter(NotFound):
    """The id names no dead letter (it was never one, or it was discarded or redriven)."""


def now_iso(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds")


def operator() -> str:
    """Who acts: ``user@host`` of this process (the audit's ``closed_by``)."""
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name (a container): the uid says enough
        user = "uid-unknown"
    return f"{user}@{socket.gethostname()}"


def dead_letter_row(topic: str, partition: int, offset: int) -> bytes:
    return f"{topic}/{partition:06d}/{offset:020d}".encode()


def parse_id(text: str) -> tuple[str, int, int]:
    """``topic/partition@offset`` (as ``dead-letters list`` prints it) -> its parts."""
    found = _ID.match(text.strip())
    if not found:
        raise InvalidCommand(f"ID: {text!r} is not a dead letter id (topic/partition@offset, "
                             "as `letterlog dead-letters list` prints it)")
    return found["topic"], int(found["partition"]), int(found["offset"])


@dataclass(frozen=True)
class DeadLetter:
    topic: str
    partition: int
    offset: int
    error: str
    value: bytes
    key: bytes | None
    first_seen: str
    last_seen: str
    times: int
    position: int | None
    attempts: tuple[dict[str, Any], ...] = ()
    closed: dict[str, str] | None = None  # outcome, closed_at, closed_by, reason

    @property
    def id(self) -> str:
        return f"{self.topic}/{self.partition}@{self.offset}"

    def as_dict(self) -> dict[str, Any]:
        d = {"id": self.id, "topic": self.topic, "partition": self.partition,
             "offset": self.offset, "error": self.error, "bytes": len(self.value),
             "key": self.key.hex() if self.key else None, "first_seen": self.first_seen,
             "last_seen": self.last_seen, "times": self.times, "position": self.position,
             "tries": sum(int(a.get("tries", 1)) for a in self.attempts) or None}
        if self.closed is not None:
            d.update(self.closed)
        return d

    def details(self) -> dict[str, Any]:
        """``as_dict`` plus the record (hex, and decoded when it is an event record) and
        every attempt."""
        d = self.as_dict()
        d["value_hex"] = self.value.hex()
        try:
            position, event = decode_record(self.value)
            d["event"] = {"position": position, "class": type(event).__qualname__,
                          "originator_id": str(getattr(event, "originator_id", "")),
                          "originator_version": getattr(event, "originator_version", None)}
        except CorruptEvent as error:
            d["event"] = {"undecodable": str(error)}
        d["attempts"] = list(self.attempts)
        return d


def _from_cells(row: bytes, cells: Row) -> DeadLetter:
    topic, partition, offset = row.decode().rsplit("/", 2)
    position = cells.get(DL_POSITION)
    attempts = tuple(json.loads(v) for c, v in sorted(cells.items()) if c.startswith(DL_ATTEMPT))
    closed = None
    if DL_OUTCOME in cells:
        closed = {"outcome": cells[DL_OUTCOME].decode(),
                  "closed_at": cells.get(DL_CLOSED_AT, b"").decode(),
                  "closed_by": cells.get(DL_CLOSED_BY, b"").decode(),
                  "reason": cells.get(DL_REASON, b"").decode()}
    return DeadLetter(
        topic=topic, partition=int(partition), offset=int(offset),
        error=cells.get(DL_ERROR, b"").decode("utf-8", "replace"),
        value=cells.get(DL_VALUE, b""), key=cells.get(DL_KEY),
        first_seen=cells.get(DL_FIRST_SEEN, b"").decode(),
        last_seen=cells.get(DL_LAST_SEEN, b"").decode(),
        times=int(cells.get(DL_TIMES, b"1")),
        position=int(position) if position is not None else None,
        attempts=attempts, closed=closed,
    )


def attempt_cell(known: Row, now: float, source: str, tries: int,
                 error: str) -> tuple[bytes, bytes]:
    number = sum(1 for c in known if c.startswith(DL_ATTEMPT)) + 1
    return (DL_ATTEMPT + b"%06d" % number,
            json.dumps({"at": now_iso(now), "by": source, "tries": tries, "error": error},
                       sort_keys=True).encode())


def record_failures(store: TableStore, table: str,
                    failures: Sequence[tuple[Any, str, int | None]], *, now: float,
                    tries: int, source: str = "worker") -> None:
    """Writes (or updates) one dead letter per ``(record, error, position)``: the record's
    value and key, first and last seen, how often, and one attempt cell (``tries`` tries by
    ``source``). ``record`` is a ``projector.Record``."""
    version = int(now * 1000)
    batch: list[Mutation] = []
    for record, error, position in failures:
        row = dead_letter_row(record.topic, record.partition, record.offset)
        known = store.get(table, row)
        cells = {DL_ERROR: error.encode(), DL_VALUE: record.value or b"",
                 DL_FIRST_SEEN: known.get(DL_FIRST_SEEN, now_iso(now).encode()),
                 DL_LAST_SEEN: now_iso(now).encode(),
                 DL_TIMES: b"%d" % (int(known.get(DL_TIMES, b"0")) + 1)}
        column, value = attempt_cell(known, now, source, tries, error)
        cells[column] = value
        if record.key is not None:
            cells[DL_KEY] = record.key
        if position is not None:
            cells[DL_POSITION] = b"%d" % position
        if record.timestamp is not None:
            cells[DL_KAFKA_TIME] = now_iso(record.timestamp).encode()
        batch.extend(Put(table, row, c, v, version) for c, v in cells.items())
    store.apply(batch)


def _scan(store: TableStore, table: str, topic: str | None,
          limit: int | None) -> list[DeadLetter]:
    if not store.table_exists(table):
        return []
    prefix = f"{topic}/".encode() if topic else None
    return [_from_cells(row, cells) for row, cells in store.scan(table, prefix=prefix,
                                                                  limit=limit)]


def list_dead_letters(store: TableStore, *, physical: Physical = identity,
                      topic: str | None = None, limit: int | None = None) -> list[DeadLetter]:
    """The open dead letters in (topic, partition, offset) order ([] if there is no table)."""
    return _scan(store, physical(DEAD_LETTERS.name), topic, limit)


def list_closed(store: TableStore, *, physical: Physical = identity,
                topic: str | None = None, limit: int | None = None) -> list[DeadLetter]:
    """Dead letters discarded or redriven, with who closed them, when and why."""
    return _scan(store, physical(CLOSED.name), topic, limit)


def get_dead_letter(store: TableStore, letter_id: str, *,
                    physical: Physical = identity) -> DeadLetter:
    """One dead letter by id, open or closed (``NoSuchDeadLetter`` if neither)."""
    row = dead_letter_row(*parse_id(letter_id))
    for spec in (DEAD_LETTERS, CLOSED):
        table = physical(spec.name)
        if store.table_exists(table):
            cells = store.get(table, row)
            if cells:
                return _from_cells(row, cells)
    raise NoSuchDeadLetter(f"ID: no dead letter {letter_id!r} (`letterlog dead-letters list` "
                           "shows the open ones, `--closed` the others)")


def close_letter(store: TableStore, letter: DeadLetter, cells: Row, outcome: str, reason: str, *,
           physical: Physical, now: float) -> None:
    """Records how ``letter`` was closed, then deletes it from ``dead_letters``."""
    closed = physical(CLOSED.name)
    store.create_table(replace(CLOSED, name=closed))
    row = dead_letter_row(letter.topic, letter.partition, letter.offset)
    version = int(now * 1000)
    audit = {**cells, DL_OUTCOME: outcome.encode(), DL_CLOSED_AT: now_iso(now).encode(),
             DL_CLOSED_BY: operator().encode(), DL_REASON: reason.encode()}
    store.apply([Put(closed, row, c, v, version) for c, v in audit.items()])
    store.apply([DeleteRow(physical(DEAD_LETTERS.name), row, version)])


def discard(store: TableStore, letter_ids: Sequence[str] | None, *, reason: str = "",
            physical: Physical = identity,
            clock: Callable[[], float] = time.time) -> list[DeadLetter]:
    """Closes dead letters without applying them (``None``: every open one); each is
    recorded in ``dead_letters_closed`` as ``discarded``. Unknown ids raise
    ``NoSuchDeadLetter`` before anything is discarded."""
    table = physical(DEAD_LETTERS.name)
    if letter_ids is None:
        rows = [(dead_letter_row(d.topic, d.partition, d.offset), d)
                for d in list_dead_letters(store, physical=physical)]
    else:
        rows = []
        for letter_id in letter_ids:
            row = dead_letter_row(*parse_id(letter_id))
            if not store.table_exists(table) or not store.get(table, row):
                raise NoSuchDeadLetter(f"ID: no open dead letter {letter_id!r}")
            rows.append((row, _from_cells(row, store.get(table, row))))
    for row, letter in rows:
        close_letter(store, letter, store.get(table, row), "discarded", reason, physical=physical,
               now=clock())
    return [letter for _, letter in rows]


def discard_dead_letter(store: TableStore, topic: str, partition: int, offset: int, *,
                        physical: Physical = identity,
                        clock: Callable[[], float] = time.time) -> None:
    """``discard`` of one dead letter, by its parts."""
    discard(store, [f"{topic}/{partition}@{offset}"], physical=physical, clock=clock)
