"""What the stream projector (``projector``) works with: the records, a batch's result and
decoded events, and one partition's runners (its projections renamed ``name@topic/partition``:
their own tracking rows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from tenacity import Retrying

from adapters.streaming.batchstore import BatchStore
from domain.errors import CorruptEvent
from projections.registry import Projection
from projections.runner import ProjectionRunner

__all__ = ["TP", "BatchResult", "Decoded", "HandoverGap", "Item", "Physical", "Poison",
           "Record", "lag", "partition_projections"]

TP = tuple[str, int]
Physical = Callable[[str], str]

class HandoverGap(RuntimeError):
    """Events a partition applied to tables switched out after the rebuild read the log
    (see the module docstring): not poison, not a store failure, nothing is written."""
# -- values -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    """One Kafka record as the projector needs it (``timestamp``: Kafka's, in seconds)."""

    topic: str
    partition: int
    offset: int
    value: bytes | None
    key: bytes | None = None
    timestamp: float | None = None


@dataclass
class BatchResult:
    records: int = 0
    applied: int = 0  # events new to the tables
    duplicates: int = 0  # events at or below their partition's tracked position
    dead_letters: int = 0
    offsets: dict[str, int] = field(default_factory=dict)  # "topic/partition" -> last offset

    def as_dict(self) -> dict[str, Any]:
        return {"records": self.records, "applied": self.applied,
                "duplicates": self.duplicates, "dead_letters": self.dead_letters,
                "offsets": dict(self.offsets)}


def partition_projections(projections: Iterable[Projection], topic: str,
                          partition: int) -> tuple[Projection, ...]:
    """The projections renamed for one partition: their own tracking rows."""
    return tuple(replace(p, name=f"{p.name}@{topic}/{partition}") for p in projections)


def _event_time(event: Any) -> float | None:
    stamp = getattr(event, "timestamp", None)
    if isinstance(stamp, datetime):
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=UTC)
        return stamp.timestamp()
    return None


# -- one partition ----------------------------------------------------------------------------

Item = tuple[Record, int, Any]  # record, position, event
Poison = tuple[Record, str, int | None]  # record, error, position if known


class _Partition:
    """The runners of one partition: ``plain`` projections (absolute cells only) fold the
    batch; read-modify-write ones (``rmw``) apply it live, their rows through the redo
    record (``BatchStore``)."""

    def __init__(self, store: BatchStore, tp: TP, plain: Sequence[Projection],
                 rmw: Sequence[Projection], physical: Physical) -> None:
        topic, partition = tp
        self.runners: list[tuple[ProjectionRunner, bool]] = []
        if plain:
            self.runners.append((ProjectionRunner(
                store, partition_projections(plain, topic, partition), physical,
                batch_size=1_000_000), True))
        if rmw:
            self.runners.append((ProjectionRunner(
                store, partition_projections(rmw, topic, partition), physical,
                batch_size=1_000_000), False))

    def position(self) -> int:
        return min((r.position() for r, _ in self.runners), default=0)

    def apply(self, events: Sequence[tuple[int, Any]]) -> None:
        """All events at once (raises ``CorruptEvent`` at the first bad one; what came
        before it is written)."""
        for runner, fold in self.runners:
            runner.apply_events(events, fold=fold)

    def apply_one(self, position: int, event: Any, retrying: Callable[[], Retrying]) -> None:
        """One event through each runner, each retried on its own: a projection that fails
        on it does not keep the others from applying it. Raises the first failure left."""
        failures: list[CorruptEvent] = []
        for runner, _ in self.runners:
            try:
                for attempt in retrying():
                    with attempt:
                        runner.apply_events([(position, event)])
            except CorruptEvent as error:
                failures.append(error)
        if failures:
            raise CorruptEvent("; ".join(str(f) for f in failures))


@dataclass(frozen=True)
class Decoded:
    """``StreamProjector.decode``'s result: the records by partition, each partition's
    decoded events and the records that failed to decode."""

    records: Sequence[Record]
    by_tp: dict[TP, list[Record]]
    items: dict[TP, tuple[list[Item], list[Poison]]]


@dataclass
class _Progress:
    offset: int = -1  # last offset handled (applied or dead-lettered)
    position: int = 0  # last log position applied
    event_time: float | None = None  # when the last applied event happened (epoch seconds)
    records: int = 0


def lag(progress: Mapping[TP, _Progress], highwaters: Mapping[TP, int],
        committed: Mapping[TP, int | None] | None, now: float) -> dict[str, Any]:
    """Lag per partition and in all: ``events`` = the partition's end offset minus the
    next offset to apply (from ``progress``, else ``committed``), and ``seconds`` = now minus
    the time of the last event applied while events are waiting (0 when caught up)."""
    parts: dict[str, dict[str, Any]] = {}
    total_events, worst = 0, 0.0
    for tp, highwater in sorted(highwaters.items()):
        done = progress.get(tp)
        if done is not None and done.offset >= 0:
            next_offset: int | None = done.offset + 1
        else:
            next_offset = (committed or {}).get(tp)
        events = max(0, highwater - (next_offset or 0))
        seconds = 0.0
        if events and done is not None and done.event_time is not None:
            seconds = max(0.0, now - done.event_time)
        total_events += events
        worst = max(worst, seconds)
        parts[f"{tp[0]}/{tp[1]}"] = {"highwater": highwater, "next_offset": next_offset,
                                     "events": events, "seconds": round(seconds, 3)}
    return {"events": total_events, "seconds": round(worst, 3), "partitions": parts}
