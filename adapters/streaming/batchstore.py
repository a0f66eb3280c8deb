"""The table store as one stream batch sees it (``adapters.streaming.projector``): reads
of rows the batch changed come from the batch, a counters row the batch read is cached, and
the batch's mutations of a row ``counters`` reads are parked in ``stream_redo`` until all are
written, so that a crash mid-batch leaves a row that is completed before it is read again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import msgpack

from projections import names as n
from projections.capabilities import BulkLoading
from projections.tablestore import (
    Cells,
    DeleteColumn,
    DeleteRow,
    Mutation,
    Put,
    Row,
    TableLoad,
    TableSpec,
    TableStore,
)
from projections.tracking import is_position, tracking_generation

log = logging.getLogger("letterlog.stream")

REDO = TableSpec(n.STREAM_REDO, (n.F_REDO,), split_by_salt=False)
REDO_MUTATIONS = n.REDO_MUTATIONS


# -- the store as one batch sees it -----------------------------------------------------------


@dataclass
class _CachedRow:
    cells: Cells
    row_tomb: int = -1
    column_tombs: dict[bytes, int] = field(default_factory=dict)

    def apply(self, m: Mutation) -> None:
        """HBase semantics: the highest version wins, a delete hides versions <= its own."""
        if type(m) is Put:
            if m.version <= max(self.row_tomb, self.column_tombs.get(m.column, -1)):
                return
            kept = self.cells.get(m.column)
            if kept is None or m.version >= kept[1]:
                self.cells[m.column] = (m.value, m.version)
        elif type(m) is DeleteColumn:
            self.column_tombs[m.column] = max(m.version, self.column_tombs.get(m.column, -1))
            kept = self.cells.get(m.column)
            if kept is not None and kept[1] <= m.version:
                del self.cells[m.column]
        elif type(m) is DeleteRow:
            self.row_tomb = max(self.row_tomb, m.version)
            self.cells = {c: cell for c, cell in self.cells.items() if cell[1] > m.version}


def _redo_key(table: str, row: bytes) -> bytes:
    return table.encode() + b"\x00" + row


def _encode_redo(mutations: list[Mutation]) -> bytes:
    out = []
    for m in mutations:
        if type(m) is Put:
            out.append((0, m.column, m.value, m.version))
        elif type(m) is DeleteColumn:
            out.append((1, m.column, b"", m.version))
        else:
            out.append((2, b"", b"", m.version))
    return bytes(msgpack.packb(out, use_bin_type=True))


def _decode_redo(table: str, row: bytes, data: bytes) -> list[Mutation]:
    out: list[Mutation] = []
    for kind, column, value, version in msgpack.unpackb(data, raw=False):
        if kind == 0:
            out.append(Put(table, row, column, value, version))
        elif kind == 1:
            out.append(DeleteColumn(table, row, column, version))
        else:
            out.append(DeleteRow(table, row, version))
    return out


class BatchStore:
    """The table store as a batch writes it (see the module docstring):

    * tracking rows are held back until ``flush`` (after every data write of the batch);
    * rows of ``cached`` tables (those a projection reads) are written through a redo record
      when they hold several versions, and a redo record left by a crash is completed before
      such a row is read;
    * those rows are read once and kept current with what this batch writes. The cache lives
      for one batch (``begin`` clears it): within a batch this worker owns the partitions,
      hence the rows. After a failed write it is dropped, since what reached the store is
      unknown."""

    def __init__(self, store: TableStore, tracking: str, cached: frozenset[str],
                 redo: str, generation: int | None = None) -> None:
        self.store = store
        self.tracking = tracking
        self.cached = cached
        self.redo = redo
        self.generation = generation  # written beside each tracked position (if known)
        self._lock = threading.Lock()
        self._rows: dict[tuple[str, bytes], _CachedRow] = {}
        self._held: dict[tuple[bytes, bytes], Put] = {}
        #: while a batch writes behind (``begin(behind=True)``): the folds of tables no
        #: projection reads, kept for ``detach`` instead of written at once
        self._behind: list[TableLoad] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def begin(self, *, behind: bool = False) -> None:
        """A new batch: the row cache cleared; with ``behind`` the folds of tables no
        projection reads are kept (``load``) until ``detach`` hands them over. What an
        attempt that failed kept is kept on (with ``behind``) or written now: its runners
        have moved past those events and will not fold them again."""
        with self._lock:
            self._rows.clear()
            left = self._behind or []  # kept by an attempt that failed (its runners moved on)
            self._behind = left if behind else None
        if left and not behind:
            self.write_loads(left)

    def detach(self) -> tuple[list[TableLoad], list[Put]]:
        """Ends a batch written behind: its kept folds (every partition's, to be written as
        one: ``write_loads``) and its tracking rows held back (``write_tracking``, once those
        are written). Nothing of the batch is kept here any more."""
        with self._lock:
            loads, self._behind = self._behind or [], None
            held, self._held = list(self._held.values()), {}
        return loads, held

    def drain(self) -> None:
        """Writes what a failed attempt left kept (its folds, then its tracking rows): before
        this store is given up for another (the catalog switched)."""
        loads, held = self.detach()
        self.write_loads(loads)
        self.write_tracking(held)

    def write_loads(self, loads: Sequence[TableLoad]) -> None:
        """Writes folds of tables no projection reads: the store's own ``load`` if it has one
        (all of them planned together: per table, calls filled across partitions), else
        ``apply`` of their mutations."""
        if not loads:
            return
        store = self.store
        if isinstance(store, BulkLoading):
            store.load(loads)
        else:
            store.apply([m for load in loads for m in load.mutations()])

    def apply(self, mutations: Iterable[Mutation]) -> None:
        data: list[Mutation] = []
        held: list[Put] = []
        guarded: dict[tuple[str, bytes], list[Mutation]] = {}
        tracking, cached = self.tracking, self.cached
        for m in mutations:
            if m.table == tracking and type(m) is Put:
                held.append(m)
                continue
            data.append(m)
            if m.table in cached:
                guarded.setdefault((m.table, m.row), []).append(m)
        if data:
            try:
                self._write(data, guarded)
            except BaseException:
                with self._lock:
                    self._rows.clear()
                raise
            if guarded:
                with self._lock:
                    for key, ms in guarded.items():
                        row = self._rows.get(key)
                        if row is not None:
                            for m in ms:
                                row.apply(m)
        if held:
            with self._lock:
                for m in held:
                    cell = (m.row, m.column)
                    kept = self._held.get(cell)
                    if kept is None or m.version >= kept.version:
                        self._held[cell] = m

    def load(self, loads: Sequence[TableLoad], mutations: Iterable[Mutation] = ()) -> None:
        """A fold's tables (``BulkLoading``, what a folding runner hands over): those of
        tables no projection reads go to the store's own ``load`` when it has one (HBase:
        the folded cells straight into Thrift2 calls, without mutations to reduce again);
        everything else, and every table on a store without ``load``, through ``apply``
        (tracking held back, read rows through their redo record). The bulk part is written
        first; tracking rows still wait for ``flush``."""
        bulk: list[TableLoad] = []
        rest: list[Mutation] = []
        store = self.store
        direct = isinstance(store, BulkLoading)
        # a fold hands its cells as an iterator, read once; a load may be written again (a
        # write behind that failed, kept for the retry): its cells are listed first
        loads = [load if isinstance(load.cells, list | tuple) else replace(
            load, cells=list(load.cells)) for load in loads]
        for load in loads:
            if load.table in self.cached or load.table == self.tracking:
                rest.extend(load.mutations())
            elif self._behind is not None:
                with self._lock:
                    self._behind.append(load)  # written by ``write_loads``, after ``detach``
            elif direct:
                bulk.append(load)
            else:
                rest.extend(load.mutations())
        if bulk:
            assert isinstance(store, BulkLoading)
            try:
                store.load(bulk)
            except BaseException:
                with self._lock:
                    self._rows.clear()
                raise
        self.apply([*rest, *mutations])

    def _write(self, data: list[Mutation],
               guarded: dict[tuple[str, bytes], list[Mutation]]) -> None:
        # a row of one version and one kind of mutation is one atomic call on any adapter;
        # several versions (Thrift1: a call each) or puts and deletes (Thrift2: a putMultiple
        # and a deleteMultiple) are several
        torn = {key: ms for key, ms in guarded.items()
                if len({(m.version, type(m) is Put) for m in ms}) > 1}
        if not torn:
            self.store.apply(data)
            return
        version = max(m.version for ms in torn.values() for m in ms)
        self.store.apply([Put(self.redo, _redo_key(t, r), REDO_MUTATIONS, _encode_redo(ms),
                              version) for (t, r), ms in torn.items()])
        self.store.apply(data)
        self.store.apply([DeleteRow(self.redo, _redo_key(t, r), version) for t, r in torn])

    def _complete(self, table: str, row: bytes) -> None:
        """Finishes the write a crash interrupted, if any (then the row is whole again)."""
        key = _redo_key(table, row)
        found = self.store.get_cells(self.redo, key, [REDO_MUTATIONS])
        if REDO_MUTATIONS in found:
            value, version = found[REDO_MUTATIONS]
            log.warning("%s row %r: completing a write interrupted at version %d",
                        table, row, version)
            self.store.apply(_decode_redo(table, row, value))
            self.store.apply([DeleteRow(self.redo, key, version)])

    def flush(self) -> None:
        """Writes the tracking rows held back (call once the batch's data is written)."""
        with self._lock:
            held, self._held = list(self._held.values()), {}
        self._flush(held)

    def write_tracking(self, held: Sequence[Put]) -> None:
        """Writes tracking rows ``detach`` handed over (once their batch's data is written);
        a failure leaves nothing to undo: call it again."""
        if held:
            stamps: list[Mutation] = []
            if self.generation is not None:
                stamps = [tracking_generation(m.table, m.row.decode(), self.generation)
                          for m in held if is_position(m)]
            self.store.apply([*held, *stamps])

    def _flush(self, held: list[Put]) -> None:
        try:
            self.write_tracking(held)
        except BaseException:
            with self._lock:
                for m in held:
                    self._held.setdefault((m.row, m.column), m)
            raise

    def get_cells(self, table: str, row: bytes, columns: Sequence[bytes] | None = None) -> Cells:
        if columns is not None or table not in self.cached:
            return self.store.get_cells(table, row, columns)
        key = (table, row)
        with self._lock:
            cached = self._rows.get(key)
            if cached is not None:
                return dict(cached.cells)
        self._complete(table, row)
        cells = self.store.get_cells(table, row)
        with self._lock:
            cached = self._rows.setdefault(key, _CachedRow(dict(cells)))
            return dict(cached.cells)

    def get(self, table: str, row: bytes, columns: Sequence[bytes] | None = None) -> Row:
        if columns is not None or table not in self.cached:
            return self.store.get(table, row, columns)
        return {c: v for c, (v, _) in self.get_cells(table, row).items()}


