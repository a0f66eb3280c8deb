"""The relay's watch on itself (``OutboxRelay`` inherits it): how far it is behind the log
(``lag``), its gauges and progress lines, and the reporter thread that keeps them current
and notices when the log answers again after an outage.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from adapters.eventlog.records import mapper
from adapters.streaming.positions import RelayError, RelayPosition
from adapters.streaming.producer import relay_metrics
from domain.errors import CorruptEvent

__all__ = ["PROBE_EVERY", "RelayWatch", "decode_notification"]

PROBE_EVERY = 1.0
"""Seconds between the reporter's questions to a log that does not answer (``_reporting``)."""


def decode_notification(n: Any) -> Any:
    """The event of a notification; ``CorruptEvent`` naming it if it cannot be decoded."""
    try:
        return mapper().to_domain_event(n)
    except Exception as e:
        raise corrupt_event(n, e) from e


def corrupt_event(n: Any, error: Exception) -> CorruptEvent:
    """``CorruptEvent`` naming notification ``n`` and why it cannot be decoded."""
    return CorruptEvent(f"event at position {n.id} (aggregate {n.originator_id}, version "
                        f"{n.originator_version}, topic {n.topic!r}) cannot be decoded: "
                        f"{type(error).__name__}: {error}")


class RelayWatch:
    """Lag, gauges and progress of a relay (the state it reads is the relay's own)."""

    read: Callable[[int, int], Sequence[Any]]
    position: RelayPosition
    head: Callable[[], int | None] | None
    published: int
    _position: int | None
    _inflight: float | None
    _reading: float | None

    def lag(self) -> tuple[int, float]:
        """(events behind, seconds behind): positions between the recorded one and the log
        head (ids skipped by the database count too, so it is an upper bound), and the age of
        the oldest unpublished event (0 when caught up)."""
        if self.head is None:
            raise RelayError("lag needs head(): build the relay with head=...")
        return self._lag_at(self.position.load())

    def _lag_at(self, position: int) -> tuple[int, float]:
        assert self.head is not None
        head = int(self.head() or 0)
        if head <= position:
            return 0, 0.0
        notifications = self.read(position + 1, 1)
        if not notifications:
            return 0, 0.0
        stamp = getattr(decode_notification(notifications[0]), "timestamp", None)
        seconds = 0.0
        if isinstance(stamp, datetime):
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=UTC)
            seconds = max(0.0, (datetime.now(UTC) - stamp).total_seconds())
        return head - position, seconds



    def _reporting(self, stop: threading.Event, done: threading.Event, slog: Any,
                   every: float, kafka: Any, database: Any, back: threading.Event) -> None:
        """The reporter thread: progress lines and gauges every ``every`` seconds; a Kafka
        call in flight for long is reported as Kafka not answering. While the log does not
        answer, it asks it every ``PROBE_EVERY`` seconds (its position's own connection,
        not the pool's) and, once it answers, sets ``back``: the loop stops waiting out the
        outage and publishes again at once, however long its back-off had grown."""
        next_report = next_probe = 0.0
        while not (stop.is_set() or done.is_set()):
            inflight, reading = self._inflight, self._reading
            if inflight is not None:
                kafka.waiting(inflight)
            if reading is not None:
                database.waiting(reading)
            now = time.monotonic()
            if now >= next_report:
                next_report = now + every
                if self._report(slog, database) and database.since is not None:
                    back.set()
            elif database.since is not None and reading is None and now >= next_probe:
                next_probe = now + PROBE_EVERY
                if self._report(slog, None, say=False):
                    back.set()
            done.wait(min(every, PROBE_EVERY))

    @staticmethod
    def _unknown(metrics: dict[str, Any]) -> None:
        """The log does not answer: the gauges say so instead of the last lag they knew."""
        metrics["up"].set(0)
        metrics["lag_events"].set(float("nan"))
        metrics["lag_seconds"].set(float("nan"))

    def _report(self, slog: Any, database: Any = None, *, say: bool = True) -> bool:
        """The relay's gauges (position, head, lag, up) and, if ``say``, one progress line;
        whether the log answered."""
        metrics = relay_metrics()
        position = self._position
        reading = self._reading
        if reading is not None and time.monotonic() - reading >= 5.0:
            # the loop's own read of the log hangs: asking the log again would hang too
            self._unknown(metrics)
            if say:
                slog.info("progress", position=position, published=self.published,
                          behind_events="unknown", behind_seconds="unknown")
            return False
        try:
            if position is None or not say:  # a probe asks the log itself
                position = self.position.load()
            events, seconds = self._lag_at(position) if self.head is not None else (0, 0.0)
        except Exception as error:  # noqa: BLE001 - the log may be down: say what is known
            if database is not None:
                database.failed(error)
            self._unknown(metrics)
            if say:
                slog.info("progress", position=position, published=self.published,
                          behind_events="unknown", behind_seconds="unknown")
            return False
        metrics["up"].set(1)
        metrics["position"].set(position)
        metrics["lag_events"].set(events)
        metrics["lag_seconds"].set(seconds)
        if say:
            slog.info("progress", position=position, published=self.published,
                      behind_events=events, behind_seconds=round(seconds, 1))
        return True

