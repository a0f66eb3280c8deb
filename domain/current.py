"""Aggregates known to be current while nobody else writes to the log (ADR 0011).

The library's repository keeps a cache, but it fast-forwards every cached aggregate on every
``get``: one query for newer events plus a replay, per aggregate, per command, even when this
process is the only writer (the embedded default). This cache skips that work safely:

- It remembers ``known``, the log position up to which this process has seen every event.
  Before a command reads an aggregate, one cheap ``max position`` query checks that the log
  still ends at ``known``. If it moved, another writer appended: the whole cache is dropped
  and aggregates are loaded (and fast-forwarded) by the repository as usual.
- After this process saves, the saved aggregates are current only if the new events took the
  positions right after ``known`` (no other writer slipped in between); otherwise the cache
  is dropped. Any failed save drops it too.
- Correctness never rests on the cache alone: saving still checks each aggregate's version,
  so a decision taken on a stale copy fails with a concurrency conflict and is retried on
  freshly loaded aggregates.

- It also remembers aggregates found *not* to exist (``absent``, ``missing``): a delivery
  looks up the rule book and other aggregates that may never have been created, and each
  miss would otherwise be a query of the log. The same rule holds: forgotten as soon as the
  log moved under another writer, and an aggregate this process saves is no longer absent.

Hand-outs are copies (``MailAggregate.__deepcopy__`` is cheap), so a command that fails half
way never leaves a cached aggregate half-changed. What a save is given is kept as it is:
an aggregate changes only by triggering events, and one with pending events is not
handed out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from copy import deepcopy
from typing import Any
from uuid import UUID


class CurrentAggregates:
    def __init__(self, max_position: Callable[[], int | None], maxsize: int = 20000) -> None:
        self._max_position = max_position
        self._maxsize = maxsize
        self._cache: OrderedDict[UUID, Any] = OrderedDict()
        self._absent: set[UUID] = set()
        self._known: int | None = None
        self._lock = threading.RLock()  # commands may run in several threads
        self._local = threading.local()  # per thread: inside a checked command attempt?
        self.hits = 0
        self.drops = 0

    def begin(self) -> None:
        """At the start of each command attempt: is the log still where we left it?"""
        head = int(self._max_position() or 0)
        with self._lock:
            if head != self._known:
                self.drop()
                self._known = head
        self._local.checked = True

    def end(self) -> None:
        self._local.checked = False

    @contextmanager
    def reading(self) -> Iterator[int]:
        """Reads outside a command (a caller's rights checked first) through the cache, as
        an attempt reads: after one query of the log's head, which it gives. Inside an
        attempt or another reading: as it is."""
        if self._checked:
            yield int(self._known or 0)
            return
        self.begin()
        try:
            yield int(self._known or 0)
        finally:
            self.end()

    @property
    def _checked(self) -> bool:
        return bool(getattr(self._local, "checked", False))

    def get(self, aggregate_id: UUID) -> Any | None:
        """A private copy of the aggregate if it is known to be current, else None."""
        if not self._checked:
            return None
        with self._lock:
            agg = self._cache.get(aggregate_id)
            if agg is None:
                return None
            if agg._pending_events:  # changed after its save and never saved: not current
                del self._cache[aggregate_id]
                return None
            self._cache.move_to_end(aggregate_id)
            self.hits += 1
            return deepcopy(agg)

    def absent(self, aggregate_id: UUID) -> bool:
        """Whether the aggregate is known not to exist (no event of it in the log)."""
        if not self._checked:
            return False
        with self._lock:
            return aggregate_id in self._absent

    def missing(self, aggregate_id: UUID) -> None:
        """The log, read within a checked attempt, has no event of the aggregate."""
        if not self._checked:
            return
        with self._lock:
            if self._known is not None and len(self._absent) < self._maxsize:
                self._absent.add(aggregate_id)

    def saved(self, aggregates: Sequence[Any], positions: Sequence[int]) -> None:
        """After a save: remember the aggregates if nobody else appended in between."""
        if not positions:
            return
        with self._lock:
            contiguous = (self._checked and self._known is not None
                          and positions[0] == self._known + 1
                          and positions[-1] - positions[0] == len(positions) - 1)
            if not contiguous:
                self.drop()
                return
            self._known = positions[-1]
            for agg in aggregates:
                self._absent.discard(agg.id)
                if agg._pending_events:
                    continue  # not saved after all: not current
                # Kept as it is, not copied: aggregates change only by new (pending) events,
                # which ``get`` checks for; what it hands out is a copy.
                self._cache[agg.id] = agg
                self._cache.move_to_end(agg.id)
            while len(self._cache) > self._maxsize:
                self._cache.popitem(last=False)

    def drop(self) -> None:
        with self._lock:
            if self._cache:
                self.drops += 1
            self._cache.clear()
            self._absent.clear()
            self._known = None
