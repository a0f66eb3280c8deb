"""The projection runner: events in, table mutations out, tracked per projection.

``ProjectionRunner.apply_events`` feeds each ``(position, event)`` to every projection that
handles the event's class, skips events at or below a projection's tracked position, and
writes one ``store.apply`` per batch that also holds the projections' new tracking positions.

Two modes:

* **live** (default): batches of ``batch_size`` events. Mutations pass through unchanged,
  except those of tables a projection *reads* (``counters``): those rows are folded in a
  ``MutationFold`` that the projection's ``read`` sees, so a batch reads its own pending
  writes, and only each cell's final value is written.
* **fold** (``fold=True``, for rebuilds): every table is folded in memory (the writes of
  ``batch_size`` events at a time) and written once at the end (or whenever
  ``fold_max_cells`` cells are pending), rows in key order, with the cyclic garbage
  collector paused (the fold holds millions of small acyclic objects). A store with a
  ``load`` method (``BulkLoading``: SQLite) takes the folded tables as plain records
  (``MutationFold.contents``), straight into its fresh tables; others get mutations. A fold
  keeps, per row, only the final visible puts and the highest row/column delete versions and
  writes those deletes too, so a folded rebuild holds the same visible cells and versions as
  a live projection of the same events (equal ``table_digest``), and hides a late re-applied
  old put exactly like the live table does. A projection with a ``folder`` (``counters``:
  read-modify-write, one row per account rewritten by most events; ``mailboxes``: a
  mailbox's ``highestmodseq`` rewritten by every message event) runs through it in a fold:
  those rows stay integers in memory and only their final cells reach the fold, the same
  ones a fold of its per-event output would hold (ADR 0033).

``physical(name)`` maps logical table names (those in ``projections.names``) to the physical
tables written and read, the tracking table included (blue/green rebuilds).

Errors: an event whose class is not a letterlog domain event, a bad position, or a projector
failing on an event raises ``CorruptEvent`` naming the position, aggregate id and version;
what the batch held before that event is written first, so tracking stops just before it.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from domain.errors import CorruptEvent
from projections import names as n
from projections.capabilities import BulkLoading
from projections.codec import put
from projections.keys import RowReader
from projections.registry import ALL, DOMAIN_EVENTS, TRACKING_SPEC, Folder, Projection
from projections.tablestore import (
    MAX_VERSION,
    CellRecord,
    Cells,
    DeleteColumn,
    DeleteRow,
    Mutation,
    Put,
    TableLoad,
    TableSpec,
    TableStore,
    TombRecord,
)
from projections.tracking import Tracking


def identity(name: str) -> str:
    return name


class _ReadFailed(Exception):
    """Carries an error raised while reading the store, so that it is not taken for a
    corrupt event."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


Cell = tuple[bytes, int]
_View = tuple[dict[bytes, Cell], dict[bytes, bytes]]  # visible cells, and their values


class MutationFold:
    """Folds mutations into, per row, the final visible puts and the highest deletes.

    Applying ``mutations()`` to a store has the same visible effect as applying everything
    folded, in any order (HBase version semantics: a put is hidden by a delete of a version
    ``>=`` its own; the highest version wins). ``read`` gives a row as the store plus the
    folded mutations would show it; ``load(table, row)`` fetches the stored row, once.
    The ``Put`` objects folded are kept and handed back, not copied.
    """

    def __init__(self, load: Callable[[str, bytes], Cells] | None = None) -> None:
        self._load = load
        self._written: dict[str, dict[bytes, dict[bytes, Put]]] = {}
        self._row_tombs: dict[str, dict[bytes, int]] = {}
        self._col_tombs: dict[str, dict[bytes, dict[bytes, int]]] = {}
        self._views: dict[str, dict[bytes, _View]] = {}  # rows read: table -> row -> view
        self.cells = 0  # puts held

    @property
    def empty(self) -> bool:
        return not (self._written or self._row_tombs or self._col_tombs)

    def apply(self, m: Mutation) -> None:
        self.extend((m,))

    def extend(self, mutations: Iterable[Mutation]) -> None:
        """Fold each mutation in (puts, several to one row, are the common case)."""
        written, row_tombs, col_tombs, views = (
            self._written, self._row_tombs, self._col_tombs, self._views)
        last_table: str | None = None
        last_row: bytes | None = None
        cells: dict[bytes, Put] = {}
        row_tomb = -1
        column_tombs: dict[bytes, int] | None = None
        view: _View | None = None
        added = 0
        for m in mutations:
            if type(m) is not Put:
                if type(m) is DeleteColumn:
                    self._delete_column(m.table, m.row, m.column, m.version)
                elif type(m) is DeleteRow:
                    self._delete_row(m.table, m.row, m.version)
                else:
                    raise TypeError(f"mutation: {m!r:.80} is not a Put, DeleteColumn, DeleteRow")
                last_table = None
                continue
            table, row, version = m.table, m.row, m.version
            if row is not last_row or table is not last_table:
                rows = written.get(table)
                if rows is None:
                    rows = written[table] = {}
                found = rows.get(row)
                if found is None:
                    found = rows[row] = {}
                cells, last_table, last_row = found, table, row
                tombs = row_tombs.get(table)
                row_tomb = -1 if tombs is None else tombs.get(row, -1)
                by_row = col_tombs.get(table)
                column_tombs = None if by_row is None else by_row.get(row)
                viewed = views.get(table) if views else None
                view = None if viewed is None else viewed.get(row)
            if version <= row_tomb:
                continue
            column = m.column
            if column_tombs is not None and version <= column_tombs.get(column, -1):
                continue
            kept = cells.get(column)
            if kept is None:
                added += 1
            elif version < kept.version:
                continue
            cells[column] = m
            if view is not None:
                visible, values = view
                old = visible.get(column)
                if old is None or version >= old[1]:
                    visible[column] = (m.value, version)
                    values[column] = m.value
        self.cells += added

    def _hidden(self, table: str, row: bytes, column: bytes, version: int) -> bool:
        rows = self._row_tombs.get(table)
        if rows is not None and version <= rows.get(row, -1):
            return True
        columns = self._col_tombs.get(table)
        if columns is not None:
            tombs = columns.get(row)
            if tombs is not None and version <= tombs.get(column, -1):
                return True
        return False

    def _delete_column(self, table: str, row: bytes, column: bytes, version: int) -> None:
        if self._hidden(table, row, column, version):
            return  # an equal or higher delete covers it already
        self._col_tombs.setdefault(table, {}).setdefault(row, {})[column] = version
        rows = self._written.get(table)
        cells = None if rows is None else rows.get(row)
        if rows is not None and cells is not None:
            kept = cells.get(column)
            if kept is not None and kept.version <= version:
                del cells[column]
                self.cells -= 1
                if not cells:
                    del rows[row]
        seen = self._views.get(table, {}).get(row)
        if seen is not None:
            visible, view = seen
            old = visible.get(column)
            if old is not None and old[1] <= version:
                del visible[column]
                del view[column]

    def _delete_row(self, table: str, row: bytes, version: int) -> None:
        tombs = self._row_tombs.setdefault(table, {})
        if version <= tombs.get(row, -1):
            return
        tombs[row] = version
        rows = self._written.get(table)
        cells = None if rows is None else rows.get(row)
        if rows is not None and cells is not None:
            kept = {c: p for c, p in cells.items() if p.version > version}
            self.cells -= len(cells) - len(kept)
            if kept:
                rows[row] = kept
            else:
                del rows[row]
        columns = self._col_tombs.get(table)
        if columns is not None and row in columns:
            left = {c: v for c, v in columns[row].items() if v > version}
            if left:
                columns[row] = left
            else:
                del columns[row]
        viewed = self._views.get(table)
        if viewed is not None and row in viewed:
            visible = {c: cell for c, cell in viewed[row][0].items() if cell[1] > version}
            viewed[row] = (visible, {c: value for c, (value, _) in visible.items()})

    def read(self, table: str, row: bytes) -> dict[bytes, bytes]:
        """The row's visible values (do not modify the returned dict)."""
        viewed = self._views.get(table)
        if viewed is None:
            viewed = self._views[table] = {}
        seen = viewed.get(row)
        if seen is None:
            stored = self._load(table, row) if self._load is not None else {}
            visible = {c: cell for c, cell in stored.items()
                       if not self._hidden(table, row, c, cell[1])}
            cells = self._written.get(table, {}).get(row)
            if cells:
                for c, p in cells.items():
                    old = visible.get(c)
                    if old is None or p.version >= old[1]:
                        visible[c] = (p.value, p.version)
            seen = viewed[row] = (visible, {c: value for c, (value, _) in visible.items()})
        return seen[1]

    def mutations(self, physical: Callable[[str], str] = identity) -> list[Mutation]:
        """The folded rows as mutations, in (table, row, column) order, deletes first."""
        out: list[Mutation] = []
        append = out.append
        for table in sorted(self._written.keys() | self._row_tombs.keys() | self._col_tombs.keys()):
            target = physical(table)
            rows = self._written.get(table, {})
            row_tombs = self._row_tombs.get(table, {})
            col_tombs = self._col_tombs.get(table, {})
            keys = rows.keys() | row_tombs.keys() | col_tombs.keys() if row_tombs or col_tombs \
                else rows.keys()
            for row in sorted(keys):
                version = row_tombs.get(row)
                if version is not None:
                    append(DeleteRow(target, row, version))
                tombs = col_tombs.get(row)
                if tombs:
                    for column in sorted(tombs):
                        append(DeleteColumn(target, row, column, tombs[column]))
                cells = rows.get(row)
                if not cells:
                    continue
                if target == table:
                    out.extend(cells[column] for column in sorted(cells))
                else:
                    for column in sorted(cells):
                        p = cells[column]
                        append(put(target, row, column, p.value, p.version))
        return out

    def contents(self, physical: Callable[[str], str] = identity) -> list[TableLoad]:
        """The folded tables as ``TableLoad``s (the data of ``mutations()``, as records)."""
        loads: list[TableLoad] = []
        for table in sorted(self._written.keys() | self._row_tombs.keys() | self._col_tombs.keys()):
            rows = self._written.get(table, {})
            cells: list[CellRecord] = []
            add = cells.append
            for row in sorted(rows):
                found = rows[row]
                for column in sorted(found):
                    add((row, column, found[column].value, found[column].version))
            tombs: list[TombRecord] = [(row, b"", v) for row, v in
                                       self._row_tombs.get(table, {}).items()]
            for row, columns in self._col_tombs.get(table, {}).items():
                tombs.extend((row, column, v) for column, v in columns.items())
            tombs.sort()
            loads.append(TableLoad(physical(table), cells, tombs))
        return loads

    def clear(self) -> None:
        self._written.clear()
        self._row_tombs.clear()
        self._col_tombs.clear()
        self._views.clear()
        self.cells = 0


def _retable(m: Mutation, table: str) -> Mutation:
    if type(m) is Put:
        return put(table, m.row, m.column, m.value, m.version)
    return replace(m, table=table)


def _describe(event: object) -> str:
    cls = type(event)
    return (
        f"aggregate {getattr(event, 'originator_id', '?')} "
        f"version {getattr(event, 'originator_version', '?')} "
        f"({cls.__module__}:{cls.__qualname__})"
    )


def error_text(error: BaseException) -> str:
    """An exception as a log line or a dead letter keeps it: its class and message, not its
    ``repr`` (a ``UnicodeError``'s quotes the whole string or bytes it failed on, which may
    be a subject or a sender: message content must not reach logs or dead letters)."""
    return f"{type(error).__name__}: {error}"


def corrupt(position: object, event: object, reason: str) -> CorruptEvent:
    return CorruptEvent(f"corrupt event at position {position}: {_describe(event)}: {reason}")


_Route = tuple[tuple[int, Projection], ...]
_Step = tuple[int, Callable[[Any, int, RowReader], list[Mutation]], bool, str]


class ProjectionRunner:
    """Applies events to projections and tracks, per projection, the last position applied."""

    def __init__(
        self,
        store: TableStore,
        projections: Sequence[Projection] = ALL,
        physical: Callable[[str], str] = identity,
        *,
        batch_size: int = 2000,
        fold_max_cells: int = 4_000_000,
        track: bool = True,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size: must be at least 1")
        self.store = store
        self.projections = tuple(projections)
        self.physical = physical
        self.batch_size = batch_size
        self.fold_max_cells = fold_max_cells
        self.track = track
        self._reads = frozenset(t for p in self.projections for t in p.reads)
        self._physical_names: dict[str, str] = {}
        self._positions: dict[str, int] | None = None
        self._routes: dict[type, _Route] = {}

    # -- tables and tracking -------------------------------------------------------------------

    @property
    def table_specs(self) -> tuple[TableSpec, ...]:
        specs = [spec for p in self.projections for spec in p.tables]
        return (*specs, TRACKING_SPEC)

    def create_tables(self) -> None:
        """Create every table of these projections (and tracking) under its physical name."""
        for spec in self.table_specs:
            self.store.create_table(replace(spec, name=self._name(spec.name)))

    def _name(self, table: str) -> str:
        physical = self._physical_names.get(table)
        if physical is None:
            physical = self._physical_names[table] = self.physical(table)
        return physical

    def positions(self) -> dict[str, int]:
        """The last position applied, per projection (0: none), as tracked in the store.
        An untracked runner (``track=False``: one of several folding disjoint parts of the
        log into the same tables, whose positions say nothing about each other's) starts
        from 0 and writes no position; whoever runs them records the position at the end."""
        if self._positions is None and not self.track:
            self._positions = {p.name: 0 for p in self.projections}
        if self._positions is None:
            tracking = Tracking(self.store, self._name(n.TRACKING))
            self._positions = tracking.positions(p.name for p in self.projections)
        return dict(self._positions)

    def reload_positions(self) -> None:
        """Read the tracked positions from the store again on next use (another process
        moved them on, or a batch failed and what it wrote is unknown)."""
        self._positions = None

    def position(self) -> int:
        """The position every projection of this runner has reached."""
        return min(self.positions().values(), default=0)

    def rewind(self, position: int = 0) -> None:
        """Forget (in this runner only) what was applied after ``position``: the next
        ``apply_events`` applies those events again. Tables stay as they are; re-applying
        is idempotent. For tests, replays and repairs."""
        current = self.positions()
        self._positions = {name: min(pos, position) for name, pos in current.items()}

    # -- applying events -------------------------------------------------------------------------

    def _route(self, cls: type) -> _Route:
        route = self._routes.get(cls)
        if route is None:
            if cls not in DOMAIN_EVENTS:
                raise TypeError(f"{cls.__module__}:{cls.__qualname__} is not a letterlog event")
            route = tuple(
                (i, p) for i, p in enumerate(self.projections) if not p.handles or cls in p.handles
            )
            self._routes[cls] = route
        return route

    def apply_events(self, items: Iterable[tuple[int, Any]], *, fold: bool = False,
                     progress: Callable[[int], None] | None = None) -> int:
        """Apply ``(position, event)`` pairs; returns how many events were new to at least
        one projection. Live mode writes every ``batch_size`` events; ``fold=True`` writes
        once at the end (see the module docstring). A fold holds millions of small acyclic
        objects: it runs with the cyclic garbage collector paused (restored afterwards).
        ``progress(n)``: how many events were taken so far, every ``batch_size`` events and
        at the end."""
        if not fold:
            return self._apply(items, False, progress)
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._apply(items, True, progress)
        finally:
            if collecting:
                gc.enable()

    def _apply(self, items: Iterable[tuple[int, Any]], fold: bool,
               progress: Callable[[int], None] | None = None) -> int:
        positions = self.positions()
        starts = [positions[p.name] for p in self.projections]
        lowest = min(starts, default=0)
        # A projection that reads its own tables has its writes folded at once (its next read
        # must see them); in fold mode the others' are buffered in ``pending`` and folded
        # every ``batch_size`` events; in live mode they go to the store as they are.
        reads_own = [any(t.name in self._reads for t in p.tables) for p in self.projections]
        # A projection with a folder of its own (``counters``, ``mailboxes``) runs through it
        # in a fold; it keeps its effect in memory, drained into the fold by ``_flush``. It
        # comes last in an event's steps, so an event another projection fails on never
        # reaches it.
        folders: dict[int, Folder] = {i: p.folder() for i, p in enumerate(self.projections)
                                      if fold and p.folder is not None}
        projectors = [folders[i].project if i in folders else p.project
                      for i, p in enumerate(self.projections)]
        retable = self.physical is not identity and not fold
        overlay = MutationFold(self._load)
        pending: list[Mutation] = []
        reader = self._reader(overlay, fold)
        steps: dict[type, tuple[_Step, ...]] = {}  # per event class: what to call, in order
        top = applied = in_batch = taken = 0
        own: list[Mutation] = []  # this event's writes to tables their projection reads
        for position, event in items:
            if type(position) is not int or not 0 < position <= MAX_VERSION:
                self._flush(pending, overlay, top, fold, folders)
                raise corrupt(position, event, f"position {position!r} is not a log position")
            route = steps.get(type(event))
            if route is None:
                try:
                    route = steps[type(event)] = tuple(
                        (starts[i], projectors[i], reads_own[i] and i not in folders, p.name)
                        for i, p in sorted(self._route(type(event)),
                                           key=lambda route: route[0] in folders))
                except TypeError as error:
                    self._flush(pending, overlay, top, fold, folders)
                    raise corrupt(position, event, str(error)) from None
            mark = len(pending)  # an event is folded whole or not at all
            for start, project, reads, name in route:
                if position <= start:
                    continue
                try:
                    mutations = project(event, position, reader)
                except Exception as error:
                    del pending[mark:]
                    own.clear()
                    self._flush(pending, overlay, top, fold, folders)
                    if isinstance(error, _ReadFailed):
                        raise error.error from None
                    raise corrupt(
                        position, event, f"projection {name!r} failed: {error_text(error)}"
                    ) from error
                if reads:
                    own += mutations
                elif retable:
                    pending.extend(_retable(m, self._name(m.table)) for m in mutations)
                else:
                    pending += mutations
            if own:
                overlay.extend(own)
                own.clear()
            if position > lowest:
                applied += 1
            if position > top:
                top = position
            in_batch += 1
            if in_batch >= self.batch_size:
                taken += in_batch
                in_batch = 0
                if progress is not None:
                    progress(taken)
                if not fold:
                    self._flush(pending, overlay, top, fold, folders)
                else:
                    overlay.extend(pending)
                    pending.clear()
                    if overlay.cells >= self.fold_max_cells:
                        self._flush(pending, overlay, top, fold, folders)
        self._flush(pending, overlay, top, fold, folders)
        if progress is not None:
            progress(taken + in_batch)
        return applied

    def _flush(self, pending: list[Mutation], overlay: MutationFold, top: int, fold: bool,
               folders: dict[int, Folder]) -> None:
        """Write the batch and, in the same ``apply``, every projection's new position."""
        assert self._positions is not None
        store = self.store
        load = store.load if fold and isinstance(store, BulkLoading) else None
        if fold:
            for folder in folders.values():
                overlay.extend(folder.drain())
            overlay.extend(pending)
            pending.clear()
        loads = overlay.contents(self._name) if load is not None and not overlay.empty else []
        batch = pending if overlay.empty or loads else pending + overlay.mutations(self._name)
        tracking = Tracking(self.store, self._name(n.TRACKING))
        advanced = [p.name for p in self.projections if top > self._positions[p.name]]
        for name in advanced if self.track else ():
            batch.append(tracking.record(name, top))
        if loads:
            assert load is not None
            load(loads, batch)
        elif batch:
            self.store.apply(batch)
        for name in advanced:
            self._positions[name] = top
        pending.clear()
        overlay.clear()

    def _load(self, table: str, row: bytes) -> Cells:
        try:
            return self.store.get_cells(self._name(table), row)
        except Exception as error:
            raise _ReadFailed(error) from error

    def _reader(self, overlay: MutationFold, fold: bool) -> RowReader:
        reads = self._reads

        def read(table: str, row: bytes) -> dict[bytes, bytes]:
            if not fold and table not in reads:
                raise _ReadFailed(
                    ValueError(f"table {table!r} is read by a projection that does not declare it")
                )
            return overlay.read(table, row)

        return read
