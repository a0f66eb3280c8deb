"""The outbox relay: the notification log, in position order, onto one Kafka topic.

    relay = adapters.bootstrap.scaleout.relay(settings)
    # or OutboxRelay(read, bootstrap, topic, pos)
    with relay:
        relay.run(stop)                              # or relay.run_once()

Each event becomes one record: key = its account id (16 bytes), value =
``record_from_notification(n).encode()`` (see ``adapters.eventlog.records``). One idempotent
producer (``acks="all"``) sends a batch in position order and waits for every ack; only then
is the batch's last position recorded durably (``RelayPosition``). After a crash the relay
resumes from the recorded position, so a crash between the acks and the record republishes
that batch: delivery is at least once, and a consumer that drops records whose position is not
above the highest it applied in that partition sees each event once, in log order.

An event that cannot be decoded stops the relay with ``CorruptEvent`` (position, aggregate,
version); the events before it are published and recorded first, nothing after it is.

The relay's Kafka side (topic, producer, sending by partition, metrics) is in ``producer``;
its lag, gauges and reporter thread in ``relaywatch``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from aiokafka.errors import KafkaError
from eventsourcing.persistence import InterfaceError, OperationalError
from tenacity import RetryCallState, retry_if_exception_type

from adapters.eventlog.records import account_key, record_from_notification
from adapters.streaming.positions import (
    POSTGRES_TRANSIENT,
    FilePosition,
    PostgresPosition,
    RelayBusy,
    RelayError,
    RelayPosition,
)
from adapters.streaming.producer import Sender, ensure_topic, relay_metrics, start_producer
from adapters.streaming.relaywatch import RelayWatch, corrupt_event
from adapters.streaming.telemetry import Stall, logger, pace_kafka_metadata, waiting_out
from domain.errors import CorruptEvent, SettingsError

__all__ = [
    "CorruptEvent",
    "FilePosition",
    "InjectedCrash",
    "OutboxRelay",
    "PostgresPosition",
    "RelayBusy",
    "RelayError",
    "RelayPosition",
]

log = logging.getLogger("letterlog.relay")

Read = Callable[[int, int], Sequence[Any]]  # (start position, limit) -> notifications, id >= start

DEFAULT_PARTITIONS = 6


class InjectedCrash(RuntimeError):  # noqa: N818 - it is what it says
    """Raised by ``crash_after_publish``: the batch was acked, its position not recorded."""


# --------------------------------------------------------------------------- the relay


class OutboxRelay(RelayWatch):
    """Tails the notification log and publishes every event to Kafka, keyed by account.

    ``read(start, limit)`` returns up to ``limit`` notifications with ``id >= start`` in id
    order (ids may have gaps). ``head()`` (optional) returns the highest id, for ``lag``.
    Not thread-safe: one relay, one thread; ``run`` for a daemon, ``run_once`` for a pass.
    """

    def __init__(
        self,
        read: Read,
        bootstrap: str,
        topic: str,
        position: RelayPosition,
        *,
        batch: int = 500,
        partitions: int = DEFAULT_PARTITIONS,
        replication_factor: int = 1,
        head: Callable[[], int | None] | None = None,
        crash_after_publish: bool = False,
        producer_options: dict[str, Any] | None = None,
        request_timeout: float = 30.0,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        if batch < 1:
            raise SettingsError(f"relay batch: {batch} must be at least 1")
        if partitions < 1:
            raise SettingsError(f"relay partitions: {partitions} must be at least 1")
        if not bootstrap:
            raise SettingsError("LETTERLOG_KAFKA_BOOTSTRAP: the relay needs host:port")
        self.read = read
        self.bootstrap = bootstrap
        self.topic = topic
        self.position = position
        self.batch = batch
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.head = head
        self.crash_after_publish = crash_after_publish
        self.producer_options = dict(producer_options or {})
        self.request_timeout = request_timeout
        self.published = 0  # records acked since this relay started (duplicates included)
        self._on_close = on_close
        self._runner: asyncio.Runner | None = None
        self._producer: Any = None
        self._topic_ready = False
        self._acquired = False
        self._closed = False
        self._position: int | None = None  # the recorded position, while we hold it
        self._sender = Sender(topic, self.producer_options)
        self._inflight: float | None = None  # when the Kafka call now waited on started
        self._reading: float | None = None  # when the log read now waited on started

    # -- life cycle -------------------------------------------------------------------------
    def __enter__(self) -> OutboxRelay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._stop_producer()
        finally:
            if self._runner is not None:
                self._runner.close()
                self._runner = None
            if self._acquired:
                self.position.release()
                self._acquired = False
                self._position = None
            if self._on_close is not None:
                self._on_close()

    def _open(self) -> None:
        if self._closed:
            raise RelayError("the relay is closed")
        if not self._acquired:
            self.position.acquire()
            self._acquired = True
            self._position = self.position.load()
        if self._runner is None:
            pace_kafka_metadata()
            self._runner = asyncio.Runner()
        if not self._topic_ready or self._producer is None:
            self._inflight = time.monotonic()
        if not self._topic_ready:
            self._runner.run(ensure_topic(self.bootstrap, self.topic, self.partitions,
                                         self.replication_factor, self.request_timeout))
            self._topic_ready = True
        if self._producer is None:
            self._producer = self._runner.run(start_producer(
                self.bootstrap, self.request_timeout, self.producer_options))

    def _stop_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None and self._runner is not None:
            with contextlib.suppress(Exception):  # bounded: unsent batches are sent again
                self._runner.run(asyncio.wait_for(producer.stop(), 10))

    # -- publishing -------------------------------------------------------------------------
    def run_once(self, max_events: int | None = None) -> int:
        """Publishes everything in the log after the recorded position (at most ``max_events``)
        and returns how many records were acked."""
        return self._pump(max_events, None)

    def run(self, stop: threading.Event, poll_interval: float = 0.2,
            max_backoff: float = 30.0, report_every: float = 10.0) -> None:
        """Polls the log until ``stop`` is set. Broker or database outages are retried with
        capped, jittered backoff (tenacity, ``outages.waiting_out``: from ``poll_interval``
        up to ``max_backoff``), resuming from the recorded position; ``CorruptEvent`` and
        ``RelayError`` end the loop by raising. A thread of its own logs a ``progress`` line
        and sets the gauges every ``report_every`` seconds, whatever the loop is waiting on;
        a warning when Kafka or the event store has not answered for 5 s (a publish that
        hangs counts), a reminder every minute while it stays so, and a line when it answers
        again. While idle, the relay asks the broker for its metadata every ``report_every``
        seconds, so a broker that went away is noticed (and the producer, whose reconnection
        attempts would otherwise go on in the background, is closed until it is back)."""
        transient: tuple[type[BaseException], ...] = (
            KafkaError, ConnectionError, TimeoutError, OperationalError, InterfaceError,
            *POSTGRES_TRANSIENT)

        slog = logger("letterlog.relay")
        kafka, database = Stall("kafka", slog), Stall("the event store", slog)
        started = 0.0  # when the current attempt began
        next_check = time.monotonic() + report_every

        def cycle() -> int | None:
            """One pass: everything after the position published (None: stopped)."""
            nonlocal started, next_check
            if stop.is_set():
                return None
            started = time.monotonic()
            try:
                count = self._pump(None, stop)
                if count == 0 and time.monotonic() >= next_check:
                    next_check = time.monotonic() + report_every
                    self._check_broker()
                return count
            finally:
                self._inflight = None

        def failed(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome else None
            if error is not None:
                (kafka if isinstance(error, KafkaError) else database).failed(error, started)
            self._stop_producer()

        def waiting(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome else None
            log.debug("relay: %s: %s; retrying in %.1fs", type(error).__name__, error,
                      state.next_action.sleep if state.next_action else 0.0)

        # tenacity: a transient failure is retried after a capped, jittered wait, for ever
        # (the waits start again from poll_interval after a good pass); anything else raises
        back = threading.Event()  # the log answers the reporter again: no more waiting
        retrying = waiting_out(stop, first=poll_interval, cap=max_backoff,
                               retry=retry_if_exception_type(transient), after=failed,
                               before_sleep=waiting, wake=back)
        slog.info("relaying", topic=self.topic, bootstrap=self.bootstrap)
        done = threading.Event()
        reporter = threading.Thread(target=self._reporting, name="relay-progress", daemon=True,
                                    args=(stop, done, slog, report_every, kafka, database,
                                          back))
        reporter.start()
        try:
            while not stop.is_set():
                count = retrying(cycle)
                if count is None:  # stopped, maybe while waiting out an outage
                    break
                kafka.ok()
                database.ok()
                if count == 0:
                    stop.wait(poll_interval)
        finally:
            done.set()

    def _check_broker(self) -> None:
        """An idle relay's question to the broker (its metadata, bounded); raises
        ``KafkaError`` when it does not answer."""
        if self._producer is None or self._runner is None:
            return
        client = self._producer.client
        started = time.monotonic()
        self._inflight = started
        try:
            self._runner.run(asyncio.wait_for(client.fetch_all_metadata(),
                                              self.request_timeout))
        except TimeoutError:
            raise KafkaError(f"no metadata from the broker in {self.request_timeout:.0f} s"
                             ) from None

    def _pump(self, max_events: int | None, stop: threading.Event | None) -> int:
        self._open()
        assert self._position is not None
        position = self._position
        total = 0
        while max_events is None or total < max_events:
            if stop is not None and stop.is_set():
                break
            limit = self.batch if max_events is None else min(self.batch, max_events - total)
            self._reading = time.monotonic()  # a read that hangs (a pool waiting to connect)
            try:
                notifications = self.read(position + 1, limit)
            finally:
                self._reading = None
            if not notifications:
                break
            records: list[tuple[int, bytes, bytes]] = []
            corrupt: CorruptEvent | None = None
            last = position
            for n in notifications:
                if n.id <= last:
                    raise RelayError(f"the log returned position {n.id} after {last}: "
                                     "positions must strictly increase")
                last = n.id
                try:
                    records.append((n.id, self._key(n), record_from_notification(n).encode()))
                except CorruptEvent as e:
                    corrupt = e
                    break
            if records:
                self._publish(records)
                if self.crash_after_publish:
                    raise InjectedCrash(f"crash after publishing positions {records[0][0]}.."
                                        f"{records[-1][0]}, before recording them")
                position = records[-1][0]
                self.position.save(position)
                self._position = position
                total += len(records)
            if corrupt is not None:
                log.error("relay stopped at position %d: %s", position + 1, corrupt)
                raise corrupt
            if len(notifications) < limit:
                break  # nothing more in the log right now
        return total

    def _key(self, n: Any) -> bytes:
        try:
            return account_key(n.originator_id, n.topic, bytes(n.state))
        except Exception as e:
            raise corrupt_event(n, e) from e

    def _publish(self, records: list[tuple[int, bytes, bytes]]) -> None:
        assert self._runner is not None
        self._inflight = time.monotonic()
        try:
            self._runner.run(self._sender.send(self._producer, records))
        except BaseException:
            # a fresh producer session next time (new producer id, sequences from 0); the
            # unrecorded batch is sent again from the recorded position
            self._stop_producer()
            raise
        self.published += len(records)
        relay_metrics()["published"].inc(len(records))
