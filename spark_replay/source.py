"""Extract for the rebuild: the event log read in parallel position ranges by RDD tasks.

``keyed_ranges`` is what the rebuild's ``by_account`` fold (``job.py``) reads, one position
range per task, as ``((account, position), row)`` pairs for a shuffle by account (measured
on the 100k bench log, local[1]: read + key + shuffle + sort of counters' events 5.8 s this
way, 16.2 s through the data source, ``datasource.py``, Arrow and a DataFrame shuffle). An
executor opens the event log from the settings shipped with the job and reads its range
page by page (``row_pages``, through the job's door ``adapters.bootstrap.spark``); an event
whose state is not a msgpack map or whose topic names no class fails the read with
``CorruptEvent`` naming position, aggregate, version and topic. Nothing here needs pyarrow,
which the executors of a rebuild may not have.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from eventsourcing.utils import resolve_topic

from adapters.bootstrap.spark import account_key, row_pages
from adapters.bootstrap.spark import corrupt_event as _corrupt
from adapters.bootstrap.spark import uuid_of as _uuid_of
from projections.registry import select
from spark_replay.settings import open_event_log

PAGE = 2000


def ranges(start: int, stop: int, parts: int, last: float = 1.0) -> list[tuple[int, int]]:
    """``start..stop`` (inclusive) cut into at most ``parts`` contiguous ranges; ``last``:
    the last range that many times the size of each other one."""
    if stop < start:
        return []
    if last != 1.0 and parts > 1 and stop - start + 1 >= 2 * parts:
        unit = (stop - start + 1) / (parts - 1 + last)
        cuts = [start + round(unit * i) for i in range(parts)] + [stop + 1]
        return [(lo, hi - 1) for lo, hi in zip(cuts, cuts[1:], strict=False)]
    size = -(-(stop - start + 1) // max(1, parts))
    return [(lo, min(lo + size - 1, stop)) for lo in range(start, stop + 1, size)]


def keyed_ranges(settings: dict[str, Any], handled: Sequence[str]
                 ) -> Callable[[Iterable[tuple[int, int]]], Iterator[tuple[Any, Any]]]:
    """The function ``RDD.mapPartitions`` runs on position ranges: every event of a class
    the ``handled`` projections handle, as ``((account, position), row)`` with ``row`` the
    stored ``(position, aggregate, version, topic, state)``; ``CorruptEvent`` as above."""

    def run(spans: Iterable[tuple[int, int]]) -> Iterator[tuple[Any, Any]]:
        keep = kept_topics(list(handled))
        log = open_event_log(settings)
        try:
            for start, stop in spans:
                for rows in row_pages(log, start, stop, PAGE):
                    for position, aggregate, version, topic, state in rows:
                        try:
                            if keep is not None and not keep(topic):
                                continue
                            state = bytes(state)
                            account = account_key(_uuid_of(aggregate), topic, state)
                        except Exception as e:
                            raise _corrupt(position, aggregate, version, topic, e) from e
                        yield (account, position), (position, aggregate, version, topic, state)
        finally:
            log.close()

    return run


def account_partition(key: tuple[bytes, int]) -> int:
    """The shuffle's partition function: the account's CRC-32 (the same in every Python
    process, unlike ``hash``); Spark takes it modulo the partitions."""
    return zlib.crc32(key[0])


def kept_topics(handled: list[str]) -> Callable[[str], bool] | None:
    """Whether an event of a topic is kept (``None``: every event): its class is handled by
    one of the ``handled`` projections (one handling every event keeps every event)."""

    projections = select(handled)
    if not projections or any(not p.handles for p in projections):
        return None
    classes = frozenset().union(*(p.handles for p in projections))
    known: dict[str, bool] = {}

    def kept(topic: str) -> bool:
        found = known.get(topic)
        if found is None:
            found = known[topic] = resolve_topic(topic) in classes
        return found

    return kept
