"""The projection runner: events in, table mutations out, tracked per projection.

``ProjectionRunner.apply_events`` feeds each ``(position, event)`` to every projection that
handles the event's class, skips events at or below a projection's tracked position, and
writes one ``store.apply`` per batch that also holds the projections' new tracking positions.

Two modes:

* **live** (default): batches of ``batch_size`` events. Mutations pass through unchanged,
  except those of tables a projection *reads* (``counters``): those rows are folded in a
  ``MutationFold`` (``mutationfold``) that the projection's ``read`` sees, so a batch reads
  its own pending writes, and only each cell's final value is written.
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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any, cast

from domain.errors import CorruptEvent
from projections import names as n
from projections.capabilities import BulkLoading
from projections.keys import RowReader
from projections.mutationfold import FoldInput, MutationFold, identity, to_table
from projections.registry import (
    ALL,
    DOMAIN_EVENTS,
    FOLD_FORMS,
    TRACKING_SPEC,
    Folder,
    Projection,
)
from projections.tablestore import (
    MAX_VERSION,
    Cells,
    Mutation,
    TableSpec,
    TableStore,
)
from projections.tracking import Tracking

__all__ = ["MutationFold", "ProjectionRunner", "corrupt", "error_text", "identity", "teed"]


class _ReadFailed(Exception):
    """Carries an error raised while reading the store, so that it is not taken for a
    corrupt event."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


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


def teed(items: Iterable[tuple[int, Any]], partial: Any) -> Iterator[tuple[int, Any]]:
    """``items``, each also given to ``partial.project(event, position)`` on its way (a range
    fold's counters as mergeable parts, ``projections.counters.CounterPartialFold``, ADR
    0061); ``None``: ``items`` as they are. An event it fails on is ``corrupt``."""
    if partial is None:
        yield from items
        return
    for position, event in items:
        try:
            partial.project(event, position)
        except Exception as error:
            raise corrupt(position, event, f"projection 'counters' failed: {error}") from error
        yield position, event


_Route = tuple[tuple[int, Projection], ...]
_Step = tuple[int, Callable[[Any, int, RowReader], Sequence[FoldInput]], bool, str]
"""What an event is given to: the projection's index, its ``project`` (in a fold its
``folder``'s, or its fold form, ``registry.FOLD_FORMS``: a ``RowPut`` per row), whether its
writes are folded at once (it reads its own tables), its name."""


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
        # A projection that reads its own tables has its writes folded at once (its next
        # read must see them).
        self._reads_own = [any(t.name in self._reads for t in p.tables)
                           for p in self.projections]
        self._physical_names: dict[str, str] = {}
        self._positions: dict[str, int] | None = None
        self._routes: dict[type, _Route] = {}
        # Live mode: per event class, its steps (kept across calls: a single delivery's
        # catch-up is one call) and the tracking table, once named.
        self._live_steps: dict[type, tuple[_Step, ...]] = {}
        self._tracking: Tracking | None = None

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
        # The writes of a projection that reads its own tables are folded at once; in fold
        # mode the others' are buffered in ``pending`` and folded every ``batch_size``
        # events; in live mode they go to the store as they are.
        reads_own = self._reads_own
        # A projection with a folder of its own (``counters``, ``mailboxes``) runs through it
        # in a fold; it keeps its effect in memory, drained into the fold by ``_flush``. It
        # comes last in an event's steps, so an event another projection fails on never
        # reaches it.
        folders: dict[int, Folder] = {i: p.folder() for i, p in enumerate(self.projections)
                                      if p.folder is not None} if fold else {}
        retable = self.physical is not identity and not fold
        overlay = MutationFold(self._load)
        pending: list[FoldInput] = []  # a fold's hold RowPuts too
        reader = self._reader(overlay, fold)
        # per event class: what to call, in order (a fold's folders are its own)
        steps: dict[type, tuple[_Step, ...]] = {} if fold else self._live_steps
        name_of = self._name
        top = applied = in_batch = taken = 0
        own: list[FoldInput] = []  # this event's writes to tables their projection reads
        for position, event in items:
            if type(position) is not int or not 0 < position <= MAX_VERSION:
                self._flush(pending, overlay, top, fold, folders)
                raise corrupt(position, event, f"position {position!r} is not a log position")
            route = steps.get(type(event))
            if route is None:
                try:
                    route = steps[type(event)] = tuple(
                        (i, folders[i].project if i in folders
                         else FOLD_FORMS.get(p.project, p.project) if fold else p.project,
                         reads_own[i] and i not in folders, p.name)
                        for i, p in sorted(self._route(type(event)),
                                           key=lambda route: route[0] in folders))
                except TypeError as error:
                    self._flush(pending, overlay, top, fold, folders)
                    raise corrupt(position, event, str(error)) from None
            mark = len(pending)  # an event is folded whole or not at all
            for index, project, reads, name in route:
                if position <= starts[index]:
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
                elif retable:  # a Put is copied only where its physical name differs
                    for m in mutations:
                        table = name_of(m.table)
                        pending.append(m if table == m.table else to_table(m, table))
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

    def _flush(self, pending: list[FoldInput], overlay: MutationFold, top: int, fold: bool,
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
        # live: Mutations only (a RowPut comes from a fold form, and a fold's are folded above)
        batch = cast("list[Mutation]", pending)
        if not (overlay.empty or loads):
            batch += overlay.mutations(self._name)
        tracking = self._tracking
        if tracking is None:
            tracking = self._tracking = Tracking(self.store, self._name(n.TRACKING))
        advanced = [p.name for p in self.projections if top > self._positions[p.name]]
        if advanced and self.track:
            batch += tracking.records(advanced, top)
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
