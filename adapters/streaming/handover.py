"""A partition's handover across a rebuild's switch (the stream projector's "Following
the catalog"): what a partition applied to tables since switched out, past the position the
switched-in tables start from (``Handover.gaps``), replayed from the log into them and
stamped with their generation (``Handover.repair``).

Physical table names are resolved through the catalog (``adapters.readside.host``), as
the read side does, and the catalog's generation is read at the start of every batch:
after a blue/green rebuild switched tables (``letterlog rebuild --engine spark`` on
HBase), the next batch writes the new ones. The rebuild caught the new tables up to the
log's head at its switch and recorded that position and the generation in the
projections' own tracking rows; every tracking row a worker writes carries the
generation it was written in. A partition's runners are (re)built from its tracking rows:
a position reached in an older generation and at or below the switch position is
carried over (the new tables hold those events; what follows is applied to them, the
overlap idempotently). A position *past* the switch position reached in an older
generation means this partition applied events to the old tables after the rebuild's
catch-up had read the log (the switch landed while a batch was in flight): those events
are not in the new tables. Given ``replay`` (the workers pass the event log's reader),
the projector repairs that before the batch: it reads positions ``switch+1..reached``
from the log and applies them to the new tables (untracked: every event of the range,
of every account; cells keep the highest version and ``counters`` skips an event at or
below its row's ``c:pos``, so an event another partition applies too, before or after,
counts once), then stamps the partition's tracking rows with the new generation. A crash
in between repeats the repair, with the same result. Without ``replay`` the batch fails
with ``HandoverGap`` naming the partition, projection and positions, and the worker
writes nothing and retries (records stay unacknowledged) until a rebuild switched in
later covers the positions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from adapters.streaming.batchstore import BatchStore
from adapters.streaming.partitions import TP, Physical, partition_projections
from domain.errors import CorruptEvent
from projections import names as n
from projections.registry import Projection
from projections.runner import ProjectionRunner
from projections.tablestore import TableStore
from projections.tracking import Tracking

log = logging.getLogger("letterlog.stream")

__all__ = ["Gap", "Handover"]


@dataclass(frozen=True)
class Gap:
    """One projection of one partition applied ``start+1..reached`` to switched-out tables."""

    projection: Projection
    name: str  # its tracking row's name (the partition's)
    start: int  # the position the switched-in tables start from
    reached: int
    applied_in: int  # the generation it applied them in
    generation: int  # the generation switched in

    def describe(self, tp: TP) -> str:
        return (f"{tp[0]}/{tp[1]}: projection {self.projection.name!r} applied events up to "
                f"position {self.reached} to the tables of generation {self.applied_in}, but "
                f"the tables switched in at generation {self.generation} start from position "
                f"{self.start}: positions {self.start + 1}..{self.reached} of this partition "
                "are not in them. Run the rebuild again (it catches up past them), or run "
                "the worker with the event log's settings (it replays them); until then "
                "this partition writes nothing")


def _chunks(items: Iterable[tuple[int, Any]], size: int) -> Iterable[list[tuple[int, Any]]]:
    chunk: list[tuple[int, Any]] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class Handover:
    """The handover checks of one projector bound to ``physical``'s tables: the tables'
    switches (each projection's start position and generation) read once, on first use."""

    def __init__(self, store: TableStore, physical: Physical,
                 projections: Sequence[Projection],
                 replay: Callable[[int, int], Iterable[tuple[int, Any]]] | None) -> None:
        self.store = store
        self.physical = physical
        self.projections = tuple(projections)
        self.replay = replay
        self.switches: dict[str, tuple[int, int]] | None = None

    def gaps(self, tp: TP) -> list[Gap]:
        """What this partition applied, to tables since switched out, past the position the
        tables switched in start from (see the module docstring)."""
        tracking = Tracking(self.store, self.physical(n.TRACKING))
        if self.switches is None:
            switches = {}
            for p in self.projections:
                start, generation = tracking.position_and_generation(p.name)
                if generation is not None:
                    switches[p.name] = (start, generation)
            self.switches = switches
        gaps = []
        for p in self.projections:
            switched = self.switches.get(p.name)
            if switched is None:
                continue
            start, generation = switched
            name = partition_projections([p], *tp)[0].name
            position, applied = tracking.position_and_generation(name)
            applied_in = applied or 0
            if applied_in < generation and position > start:
                gaps.append(Gap(p, name, start, position, applied_in, generation))
        return gaps

    def repair(self, tp: TP, gaps: list[Gap], batch: BatchStore) -> None:
        """Applies the gaps' positions from the log to the switched-in tables, then stamps
        the partition's tracking rows with their generation (see the module docstring)."""
        assert self.replay is not None
        first = min(g.start for g in gaps) + 1
        last = max(g.reached for g in gaps)
        projections = tuple(g.projection for g in gaps)
        log.warning("%s/%d: events %d..%d were applied to tables switched out (generation "
                    "%d); replaying them from the log into generation %d (%s)", tp[0], tp[1],
                    first, last, min(g.applied_in for g in gaps), gaps[0].generation,
                    ", ".join(p.name for p in projections))
        batch.begin()  # rows cached by an earlier batch may have been written since
        runner = ProjectionRunner(batch, projections, self.physical, track=False)
        replayed = skipped = 0
        for chunk in _chunks(self.replay(first, last), 1000):
            try:
                runner.apply_events(chunk)
            except CorruptEvent:  # its partition dead-lettered it: apply the others one by one
                for item in chunk:
                    try:
                        runner.apply_events([item])
                    except CorruptEvent as error:
                        skipped += 1
                        log.warning("replay skips position %d: %s", item[0], error)
            replayed += len(chunk)
        tracking = Tracking(self.store, self.physical(n.TRACKING))
        stamp = [tracking.stamp(g.name, g.generation) for g in gaps]
        self.store.apply(stamp)
        log.warning("%s/%d: handover gap repaired: %d events replayed (%d skipped as corrupt)",
                    tp[0], tp[1], replayed, skipped)
