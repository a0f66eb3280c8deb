"""Read models in a running letterlog: catch-up, queries, blue/green rebuild, verify.

The same ``ProjectionRunner`` and pure projectors serve every table store; this host wires
them to the embedded SQLite table store (``tables.sqlite`` in the data directory) or to any
other ``TableStore`` (HBase). A small catalog table maps each logical table to the physical
table readers use; a rebuild writes fresh physical tables and switches the catalog in one
``apply`` (atomic in SQLite; per row in HBase, where it is one row), so readers never see a
half-built table.
"""

from __future__ import annotations

import fcntl
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any
from uuid import UUID

from adapters.files.filemodes import private_file
from adapters.readside.catalog import Catalog
from adapters.readside.readview import (
    V_POSITION,
    V_PROJECTIONS,
    VIEW_NAME,
    VIEWS,
    NoCatalog,
    ReadView,
    view_physical,
)
from adapters.readside.verification import (
    Events,
    Progress,
    TableReport,
    progress_of,
    verify_tables,
)
from adapters.tables.memory import InMemoryTableStore
from domain.errors import InvalidCommand, NotFound, SettingsError
from domain.values import account_id_for
from projections import names as n
from projections.capabilities import Checkpointing, Compacting, DataVersioned
from projections.registry import ALL, TRACKING_SPEC, Projection, select
from projections.runner import ProjectionRunner
from projections.tablestore import (
    Put,
    TableNotFound,
    TableStore,
)
from projections.tracking import Tracking

_REBUILT = re.compile(r"__g\d+_\d+$")



Fold = Callable[[TableStore, tuple[Projection, ...], Callable[[str], str], int,
                 "Progress | None"], ProjectionRunner]


class ProjectionHost:
    """Owns the live runner of one table store and answers queries from it."""

    def __init__(self, tables: TableStore, events: Events, lock_path: Path | None,
                 max_position: Callable[[], int], *, live: bool = True,
                 parallel: Callable[[int, Fold], Fold] | None = None) -> None:
        self.live = live  # False: others (stream workers) keep the tables current
        # ``parallel(workers, single)``: a rebuild's fold over several processes
        # (``rangefold.RangeFold``; 0 workers: the cores), ``single`` below its threshold
        self._parallel = parallel
        self.tables = tables
        self.events = events
        self.max_position = max_position
        self.catalog = Catalog(tables)
        self.catalog.refresh()
        self._data_version: Any = None
        # asked once: a runtime-checkable Protocol's isinstance looks up each member
        self._versioned = tables if isinstance(tables, DataVersioned) else None
        if lock_path:
            private_file(lock_path)
        self._lock_file = open(lock_path, "a+") if lock_path else None  # noqa: SIM115
        # flock excludes other processes only (one open file, shared by this process's
        # threads); the thread lock excludes this process's threads. Taken in that order.
        self._thread_lock = threading.RLock()
        self._depth = 0  # how deep this process is inside _locked (re-entrant)
        self.runner = self._live_runner()

    def _live_runner(self) -> ProjectionRunner:
        runner = ProjectionRunner(self.tables, ALL, physical=self.catalog.physical)
        runner.create_tables()
        return runner

    def checkpoint(self) -> bool:
        """Copies what the table store's write-ahead log holds into its file, as far as no
        reader's snapshot still needs it, without waiting for anyone (SQLite's ``PASSIVE``
        checkpoint): work the last connection's close would otherwise do. False for a store
        without a write-ahead log of its own (HBase)."""
        tables = self.tables
        if not isinstance(tables, Checkpointing):
            return False
        tables.checkpoint("PASSIVE")
        return True

    def close(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()
        self.tables.close()

    # -- catch-up ----------------------------------------------------------------------------
    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Excludes every other thread of this process and every other process."""
        with self._thread_lock:
            if self._depth == 0 and self._lock_file is not None:
                fcntl.flock(self._lock_file, fcntl.LOCK_EX)
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._lock_file is not None:
                    fcntl.flock(self._lock_file, fcntl.LOCK_UN)

    def compact(self) -> dict[str, int] | None:
        """The table store's file rewritten with full pages, excluding every projecting
        thread and process (ADR 0030); None if the store has no such step (HBase compacts
        its own files)."""
        tables = self.tables
        if not isinstance(tables, Compacting):
            return None
        with self._locked():
            before = tables.file_bytes()
            freed = tables.compact()
        return {"bytes_before": before, "bytes_after": before - freed, "bytes_freed": freed}

    def catch_up(self, saved: Sequence[tuple[int, Any]] = ()) -> int:
        """Applies every event past the tracked position; returns how many were new.

        ``saved`` are events this process has just appended, with their positions: when they
        are exactly the next ones to apply, they are applied as they are instead of being
        read back and decoded from the log.
        """
        if not self.live:
            return 0
        with self._locked():
            try:
                return self._catch_up(saved)
            except BaseException:
                # What the failed batch wrote is not known here: read tracking again next time.
                self.runner.reload_positions()
                raise

    def _catch_up(self, saved: Sequence[tuple[int, Any]] = ()) -> int:
        if not self._untouched_elsewhere():
            if self.catalog.refresh():
                self.runner = self._live_runner()
            elif self._lock_file is not None and self._moved_elsewhere():
                self.runner.reload_positions()  # another process moved tracking on
        start = self.runner.position() + 1
        if saved and _contiguous_from(saved, start):
            # Whatever others append after these, they project themselves; if one of them
            # stops before it does, the next catch-up that finds a gap reads the log.
            return self.runner.apply_events(saved)
        return self.runner.apply_events(self.events(start=start))

    def _untouched_elsewhere(self) -> bool:
        """True when no other connection has committed to the tables since the last check
        (SQLite's ``data_version``, no table read): catalog and tracking are as this runner
        left them, so neither needs reading."""
        if self._versioned is None:
            return False
        version = self._versioned.data_version()
        untouched = version == self._data_version
        self._data_version = version
        return bool(untouched)

    def _moved_elsewhere(self) -> bool:
        """One read: has another process applied events past what this runner knows?"""
        known = self.runner.positions()
        probe = ALL[0].name
        tracking = Tracking(self.tables, self.physical(n.TRACKING))
        return tracking.position(probe) > known.get(probe, 0)

    def physical(self, logical: str) -> str:
        return self.catalog.physical(logical)

    # -- rebuild and verify ----------------------------------------------------------------------
    def _fold(self, store: TableStore, projections: tuple[Projection, ...],
              physical: Callable[[str], str], stop: int | None,
              progress: Progress | None) -> ProjectionRunner:
        runner = ProjectionRunner(store, projections, physical=physical)
        runner.create_tables()
        total = stop if stop is not None else self.max_position()
        runner.apply_events(self.events(start=1, stop=stop), fold=True,
                            progress=progress_of(total, progress))
        return runner

    def default_fold(self, workers: int | None = None) -> Fold:
        """The fold of a rebuild or a view: over ``workers`` processes where this host was
        given a ``parallel`` fold (``None`` or 0: as many as it chooses; 1: this process)."""
        if self._parallel is None or workers == 1:
            return self._fold
        return self._parallel(workers or 0, self._fold)

    def rebuild(self, names: list[str] | None = None, progress: Progress | None = None,
                fold: Fold | None = None, workers: int | None = None) -> dict[str, Any]:
        """Blue/green: build fresh physical tables, catch up, switch readers atomically.

        ``fold(store, projections, physical, stop, progress)`` builds the fresh tables up to
        ``stop`` and returns a runner over them (default: ``default_fold(workers)``; the
        Spark job passes its own). Where others keep the tables current (stream workers on HBase),
        only a given ``fold`` may rebuild, and the old tables are left for the operator."""
        if not self.live and fold is None:
            raise SettingsError("rebuild runs on the embedded tables; for HBase, rebuild "
                                "with --engine spark, the workers stopped (see docs/spark.md)")
        projections = select(names) if names else ALL
        self.drop_leftovers()
        generation = self.catalog.generation + 1
        suffix = f"__g{generation}_{int(time.time())}"
        rebuilt = {t.name: t.name + suffix for p in projections for t in p.tables}
        rebuilt[n.TRACKING] = n.TRACKING + suffix
        t0 = time.perf_counter()
        head = self.max_position()
        runner = (fold or self.default_fold(workers))(
            self.tables, projections, lambda t: rebuilt.get(t, t), head, progress)
        with self._locked():
            runner.apply_events(self.events(start=head + 1))  # catch up what arrived meanwhile
            position = runner.position()
            # the generation these tables start at ``position``: stream workers check their
            # own positions against it (adapters.streaming.projector, handover)
            started = Tracking(self.tables, self.physical(n.TRACKING))
            tracking = [put for p in projections
                        for put in started.started(p.name, position, generation)]
            old = {t: self.physical(t) for t in rebuilt if t != n.TRACKING}
            self.catalog.switch({t: rebuilt[t] for t in old}, tracking)
            if self.live:
                self.runner = self._live_runner()
                self._catch_up()
        if self.live:
            for table in old.values():
                self.tables.drop_table(table)
        self.tables.drop_table(rebuilt[n.TRACKING])
        seconds = time.perf_counter() - t0
        return {"projections": [p.name for p in projections], "position": position,
                "generation": self.catalog.generation, "seconds": round(seconds, 3),
                "events_per_s": round(position / seconds, 1) if seconds else None,
                "tables": {t: rebuilt[t] for t in old}}

    def position(self) -> int:
        """The log position the tables reflect (stream workers: the log's head once their
        lag is 0)."""
        return self.runner.position() if self.live else self.max_position()

    # -- time travel -----------------------------------------------------------------------
    def build_view(self, view: str, names: list[str] | None, stop: int,
                   fold: Fold) -> dict[str, Any]:
        """Folds the log up to ``stop`` into the read-only view ``view`` (its own physical
        tables, never switched in, never caught up); a view of that name is replaced."""
        if not VIEW_NAME.match(view):
            raise InvalidCommand(f"--view: {view!r} is not 1-40 ASCII letters and digits")
        head = self.max_position()
        if not 0 <= stop <= head:
            raise InvalidCommand(f"--until-position: {stop} is not in 0..{head} (the log)")
        projections = select(names) if names else ALL
        physical = view_physical(view)
        for spec in (*(t for p in projections for t in p.tables), TRACKING_SPEC):
            self.tables.drop_table(physical(spec.name))
        t0 = time.perf_counter()
        fold(self.tables, projections, physical, stop, None)
        self.tables.create_table(VIEWS)
        stamp = time.time_ns() // 1000
        self.tables.apply([
            Put(VIEWS.name, view.encode(), V_POSITION, b"%d" % stop, stamp),
            Put(VIEWS.name, view.encode(), V_PROJECTIONS,
                ",".join(p.name for p in projections).encode(), stamp),
            # purges up to ``stop`` are in the fold; later ones are applied to the view by
            # ``adapters.readside.views.erase_purged`` (its builder calls it next)
            Put(VIEWS.name, view.encode(), n.V_ERASED, b"%d" % stop, stamp)])
        return {"view": view, "position": stop, "projections": [p.name for p in projections],
                "seconds": round(time.perf_counter() - t0, 3)}

    def view(self, name: str) -> ReadView:
        """The named view, to read (``NotFound`` if there is none)."""
        try:
            row = self.tables.get(VIEWS.name, name.encode(), [V_POSITION])
        except TableNotFound:
            row = {}
        if not row:
            raise NotFound(f"--view: there is no view named {name!r}")
        return ReadView(self.tables, view_physical(name), int(row[V_POSITION]), self.catalog)

    def as_of(self, position: int, events: Iterable[tuple[int, Any]]) -> ReadView:
        """``events`` (one account's, up to ``position``) folded in memory, to read."""
        tables = InMemoryTableStore()
        runner = ProjectionRunner(tables, ALL)
        runner.create_tables()
        runner.apply_events(events, fold=True)
        return ReadView(tables, lambda t: t, position, NoCatalog())

    def drop_leftovers(self) -> list[str]:
        """Drops the fresh tables of a rebuild that died before its switch (the catalog does
        not name them); returns their names. One rebuild at a time per store."""
        self.catalog.refresh()
        live = set(self.catalog._map.values())
        gone = [t for t in self.tables.list_tables()
                if _REBUILT.search(t) and t not in live]
        for table in gone:
            self.tables.drop_table(table)
        return gone

    def verify(self, names: list[str] | None = None,
               progress: Progress | None = None, max_diffs: int = 10) -> list[TableReport]:
        """Rebuilds into scratch tables and compares them with the live ones, cell by cell."""
        projections = select(names) if names else ALL
        with self._locked():
            self._catch_up()
            # Stream workers track per partition; compare at the head once their lag is 0.
            position = self.runner.position() if self.live else self.max_position()
            return verify_tables(self.tables, self.physical, self.events, projections,
                                 position, progress, max_diffs)


def account_id(address: str) -> UUID:
    return account_id_for(address)


__all__ = ["Catalog", "ProjectionHost", "replace", "TRACKING_SPEC"]


def _contiguous_from(saved: Sequence[tuple[int, Any]], start: int) -> bool:
    """Are ``saved`` the positions ``start, start + 1, ...`` with nothing in between?"""
    return all(position == start + i for i, (position, _) in enumerate(saved))
