"""Saved views: what exists, dropping one, and erasing purged messages from every one.

A view (``letterlog rebuild --until-position P --view NAME``, either engine) is the read
models as at log position ``P``, folded into tables of its own (``<table>__v_<NAME>``) and
named by a row of the ``views`` table. It holds what the live tables hold: subjects,
senders, attachment names. So a purge or an erasure must reach every view too.

``erase_purged`` does it, after every purge run and erasure
(``adapters.lifecycle.shredding.Shredding.after``).
Each view remembers the log position up to which purges were applied to it (``v:erased``;
at first the view's own position: a fold up to ``P`` has applied every purge up to ``P``).
Every message purged after that position is purged *in the view*: the message as it stood
at ``P`` (its aggregate at the last version it had at or before ``P``) is purged in memory,
and that ``Purged`` event is applied to the view's tables by the same projectors that
apply the real one to the live tables, at the real purge's position. So the view loses
exactly the rows it held for the message (its listing row with the envelope, its label
index and thread entries, its payload references, the purge-queue entry of the purge) and
its counters drop by what the message counted for; every other cell stays as at ``P``
(``mailboxes``' highest MODSEQ too: it does not move in a view). A message that did not
exist at ``P``, or was purged at ``P`` already, changes nothing.

A view is therefore "the read models at ``P``, less every message purged since": its
counters agree with its own listings, not with a fold of the log up to ``P``. A view built
after an erasure, as at a position before it, has the erased messages removed as soon as it
is built (``Letterlog.build_view`` and the Spark job call ``erase_purged``).

Applying the same purges twice changes nothing (row and column deletes are idempotent, and
``counters`` skips an event at or below the position it stored), but two runs at once
could interleave ``counters``' read-modify-write: callers hold one lock around it
(``adapters.files.datadir.exclusive(data, "views")``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.utils import get_topic

from adapters.readside.readview import VIEW_NAME, VIEWS, view_physical
from domain.errors import InvalidCommand, NotFound
from domain.message import Message
from projections import names as n
from projections.capabilities import TableSized
from projections.registry import ALL, Projection
from projections.runner import ProjectionRunner
from projections.tablestore import DeleteRow, Put, TableNotFound, TableStore

ERASING: tuple[Projection, ...] = tuple(
    p for p in ALL if Message.Purged in p.handles and p.name != "mailboxes")
"""The projections whose tables a purge deletes from (``mailboxes`` only moves the highest
MODSEQ on, which a view as at a position keeps as it was)."""

PURGED_TOPIC = get_topic(Message.Purged)  # a stored row's topic: found without decoding

Rows = Callable[[int, int], Iterable[list[tuple[int, Any, int, str, bytes]]]]
Decode = Callable[[tuple[int, Any, int, str, bytes]], tuple[int, Any]]
MessageAt = Callable[[UUID, int], Message]


@dataclass(frozen=True)
class SavedView:
    name: str
    position: int
    projections: tuple[str, ...]
    tables: tuple[str, ...]  # physical names, tracking included
    erased_to: int  # purges in the log up to here are applied to the view
    bytes: int | None = None  # on disk, where the table store can say (SQLite)

    def as_dict(self) -> dict[str, Any]:
        return {"view": self.name, "position": self.position,
                "projections": list(self.projections), "tables": list(self.tables),
                "erased_to": self.erased_to, "bytes": self.bytes}


def saved_views(tables: TableStore, *, sizes: bool = False) -> list[SavedView]:
    """Every view, by name; ``sizes``: with the bytes its tables take (SQLite only)."""
    try:
        rows = list(tables.scan(VIEWS.name))
    except TableNotFound:
        return []
    if not rows:
        return []
    existing = tables.list_tables()
    measure = tables.table_bytes if sizes and isinstance(tables, TableSized) else None
    found = []
    for row, cells in rows:
        if n.V_POSITION not in cells:
            continue
        name = row.decode()
        suffix = view_physical(name)("")
        own = tuple(t for t in existing if t.endswith(suffix))
        position = int(cells[n.V_POSITION])
        found.append(SavedView(
            name=name, position=position,
            projections=tuple(p for p in cells.get(n.V_PROJECTIONS, b"").decode().split(",")
                              if p),
            tables=own, erased_to=int(cells.get(n.V_ERASED, b"%d" % position)),
            bytes=None if measure is None else measure(own)))
    return found


def saved_view(tables: TableStore, name: str, *, sizes: bool = False) -> SavedView:
    """The view ``name`` (``NotFound`` naming it if there is none)."""
    if not VIEW_NAME.match(name):
        raise InvalidCommand(f"view: {name!r} is not 1-40 ASCII letters and digits")
    for view in saved_views(tables, sizes=sizes):
        if view.name == name:
            return view
    known = ", ".join(v.name for v in saved_views(tables)) or "none"
    raise NotFound(f"view: there is no view named {name!r} (views: {known})")


def erased_view_tables(tables: TableStore) -> list[str]:
    """The tables of every view that purges delete from (``ERASING``'s), to flush and
    major-compact with the live ones on HBase."""
    return [view_physical(v.name)(t.name) for v in saved_views(tables)
            for p in ERASING if p.name in v.projections for t in p.tables]


def drop_view(tables: TableStore, name: str) -> SavedView:
    """Drops the view's tables and its row; returns what it was. ``NotFound`` (nothing
    dropped) if there is no such view. The row goes last: a drop that dies half-way leaves
    a view that is listed and can be dropped again."""
    view = saved_view(tables, name, sizes=True)
    for table in view.tables:
        tables.drop_table(table)
    tables.apply([DeleteRow(VIEWS.name, name.encode(), _now())])
    return view


def erase_purged(tables: TableStore, head: int, rows: Rows, decode: Decode,
                 message_at: MessageAt) -> dict[str, Any]:
    """Applies every purge in the log after each view's ``v:erased`` (up to ``head``) to
    that view (see the module docstring). ``rows(start, stop)``: pages of the log's stored
    rows ``(position, originator id, version, topic, state)``; ``decode(row)``: a row as
    ``(position, event)``; ``message_at(id, version)``: a message's aggregate at a version.
    Returns the views changed, the messages erased from them and the physical tables
    written (for a store that must compact them)."""
    views = [v for v in saved_views(tables) if v.erased_to < head]
    if not views:
        return {"views": [], "messages": 0, "tables": []}
    purges = [decode(row) for page in rows(min(v.erased_to for v in views) + 1, head)
              for row in page if row[3] == PURGED_TOPIC]
    versions = _versions(rows, {e.originator_id for _, e in purges},
                         max(v.position for v in views)) if purges else {}
    changed, erased, written = [], 0, []
    for view in views:
        events = []
        for position, purged in purges:
            if position <= view.erased_to:
                continue
            version = _last_at(versions.get(purged.originator_id, []), view.position)
            if version is None:
                continue  # not in the log at the view's position
            message = message_at(purged.originator_id, version)
            if message.purge(purged.reason, purged.queue, purged.since):
                events += [(position, e) for e in message.collect_events()]
        held = set(view.projections)
        projections = tuple(p for p in ERASING if p.name in held)
        if events and projections:
            physical = view_physical(view.name)
            runner = ProjectionRunner(tables, projections, physical=physical, track=False)
            runner.apply_events(sorted(events, key=lambda pe: pe[0]))
            changed.append(view.name)
            erased += len(events)
            written += [physical(t.name) for p in projections for t in p.tables]
        tables.apply([Put(VIEWS.name, view.name.encode(), n.V_ERASED, b"%d" % head, _now())])
    return {"views": changed, "messages": erased, "tables": written}


def _versions(rows: Rows, ids: set[UUID], stop: int) -> dict[UUID, list[tuple[int, int]]]:
    """``(position, version)`` of every event of ``ids`` up to ``stop``, per message, from
    the stored rows alone (nothing decoded). SQLite stores an id as 32 hex digits,
    PostgreSQL as a UUID: both forms are looked for."""
    wanted: dict[Any, UUID] = {}
    for i in ids:
        wanted[i] = wanted[i.hex] = i
    found: dict[UUID, list[tuple[int, int]]] = {}
    for page in rows(1, stop):
        for position, originator, version, _, _ in page:
            message = wanted.get(originator)
            if message is not None:
                found.setdefault(message, []).append((position, version))
    return found


def _last_at(events: list[tuple[int, int]], position: int) -> int | None:
    """The version a message had at ``position`` (None: it did not exist yet)."""
    versions = [v for p, v in events if p <= position]
    return max(versions) if versions else None


def _now() -> int:
    return time.time_ns() // 1000


__all__ = ["ERASING", "SavedView", "drop_view", "erase_purged", "erased_view_tables",
           "saved_view", "saved_views"]
