"""Tracking rows: how far each projection has applied the log, and in which generation of
its tables. One owner for every runtime (the embedded host, the stream workers, the Spark
job, ``letterlog lag``), as eventsourcing's ``TrackingRecorder`` is for its processes.

The table ``tracking`` (``names.TRACKING``; its physical name through the catalog) holds one
row per projection (``tracking_row``); a stream partition's projections are renamed
``name@topic/partition``, so each partition tracks its own. The rule, in one place: the
position a projection has applied is the cell ``t:position`` of its row, value and version
the position (at least 1: a version-0 cell would not hide an older one); the generation its
tables started at (a rebuild's switch) is ``t:generation``, version generation + 1. Absent:
0. A position is written in the same ``apply`` as the batch's data (``ProjectionRunner``),
or after it (the stream workers' ``BatchStore``), never before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from projections import names as n
from projections.tablemodel import Mutation, Put
from projections.tablestore import TableStore

__all__ = ["Tracking", "is_position", "tracked", "tracking_generation", "tracking_position",
           "tracking_positions", "tracking_row"]


def tracking_row(projection: str) -> bytes:
    """A projection's row in ``tracking``."""
    return projection.encode()


def tracking_position(table: str, projection: str, position: int) -> Put:
    """The put recording that ``projection`` has applied the log up to ``position``."""
    return tracking_positions(table, (projection,), position)[0]


def tracking_positions(table: str, projections: Iterable[str], position: int) -> list[Put]:
    """``tracking_position`` of each of ``projections``, all at ``position`` (one value
    object shared by every put: a store may bind it once)."""
    value, version = b"%d" % position, max(position, 1)
    return [Put(table, tracking_row(name), n.TR_POSITION, value, version)
            for name in projections]


def tracking_generation(table: str, projection: str, generation: int) -> Put:
    """The put recording the generation ``projection``'s tables started at."""
    return Put(table, tracking_row(projection), n.TR_GENERATION, b"%d" % generation,
               generation + 1)


def tracked(cells: Mapping[bytes, bytes], column: bytes = n.TR_POSITION) -> int:
    """A tracking row's position (or, ``column=TR_GENERATION``, generation); 0 if absent."""
    return int(cells.get(column, b"0"))


def is_position(mutation: Mutation) -> bool:
    """Whether ``mutation`` records a position (not a generation)."""
    return isinstance(mutation, Put) and mutation.column == n.TR_POSITION


class Tracking:
    """The tracking table ``table`` of ``store``: positions and generations read, and the
    puts that record them (applied by the caller, with or after the data they follow)."""

    def __init__(self, store: TableStore, table: str = n.TRACKING) -> None:
        self.store = store
        self.table = table

    def position(self, projection: str) -> int:
        """The position ``projection`` has applied (0: none)."""
        return tracked(self.store.get(self.table, tracking_row(projection), [n.TR_POSITION]))

    def positions(self, projections: Iterable[str]) -> dict[str, int]:
        """``position`` of each of ``projections``."""
        return {name: self.position(name) for name in projections}

    def position_and_generation(self, projection: str) -> tuple[int, int | None]:
        """The position ``projection`` has applied and the generation it was reached in
        (None: no generation recorded, the tables were never switched under it)."""
        row = self.store.get(self.table, tracking_row(projection),
                             [n.TR_POSITION, n.TR_GENERATION])
        generation = tracked(row, n.TR_GENERATION) if n.TR_GENERATION in row else None
        return tracked(row), generation

    def by_partition(self) -> dict[str, dict[str, int]]:
        """The stream partitions' positions: ``{projection: {"topic/partition": position}}``
        (rows without a partition, the embedded host's, left out)."""
        found: dict[str, dict[str, int]] = {}
        for row, cells in self.store.scan(self.table, columns=[n.TR_POSITION]):
            name, _, partition = row.decode().partition("@")
            if partition:
                found.setdefault(name, {})[partition] = tracked(cells)
        return found

    def record(self, projection: str, position: int) -> Put:
        """The put recording that ``projection`` has applied up to ``position``."""
        return tracking_position(self.table, projection, position)

    def records(self, projections: Iterable[str], position: int) -> list[Put]:
        """``record`` of each of ``projections`` at one ``position`` (a live batch's)."""
        return tracking_positions(self.table, projections, position)

    def stamp(self, projection: str, generation: int) -> Put:
        """The put recording the generation ``projection``'s tables started at."""
        return tracking_generation(self.table, projection, generation)

    def started(self, projection: str, position: int, generation: int) -> list[Put]:
        """The puts of tables switched in at ``position`` in ``generation`` (a rebuild)."""
        return [self.record(projection, position), self.stamp(projection, generation)]
