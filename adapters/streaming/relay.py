"""The outbox relay: the notification log, in position order, onto one Kafka topic.

    relay = adapters.bootstrap.relay(settings)       # or OutboxRelay(read, bootstrap, topic, pos)
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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from adapters.eventlog.records import account_key, mapper, record_from_notification
from adapters.streaming.positions import (
    FilePosition,
    PostgresPosition,
    RelayBusy,
    RelayError,
    RelayPosition,
)
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
_TOPIC_ALREADY_EXISTS = 36
# a record's bytes besides its key and value, as aiokafka's ``send`` counts them against
# max_request_size (``LegacyRecordBatchBuilder.record_overhead``: 22 for magic 1 and 2)
_RECORD_OVERHEAD = 22


class InjectedCrash(RuntimeError):  # noqa: N818 - it is what it says
    """Raised by ``crash_after_publish``: the batch was acked, its position not recorded."""


# --------------------------------------------------------------------------- the relay


class OutboxRelay:
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
        self._partition_of: dict[bytes, int] = {}  # key -> partition, for ``_known``
        self._known: tuple[int, ...] = ()  # the topic's partitions the cache was built for
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
            from adapters.streaming.telemetry import pace_kafka_metadata

            pace_kafka_metadata()
            self._runner = asyncio.Runner()
        if not self._topic_ready or self._producer is None:
            self._inflight = time.monotonic()
        if not self._topic_ready:
            self._runner.run(self._ensure_topic())
            self._topic_ready = True
        if self._producer is None:
            self._producer = self._runner.run(self._start_producer())

    async def _ensure_topic(self) -> None:
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap,
                                    request_timeout_ms=int(self.request_timeout * 1000))
        try:
            await admin.start()
            if self.topic in set(await admin.list_topics()):
                return
            response = await admin.create_topics(
                [NewTopic(self.topic, num_partitions=self.partitions,
                          replication_factor=self.replication_factor)],
                timeout_ms=int(self.request_timeout * 1000),
            )
            for err in response.topic_errors:
                name, code = err[0], err[1]
                message = err[2] if len(err) > 2 else ""
                if code not in (0, _TOPIC_ALREADY_EXISTS):
                    raise RelayError(f"kafka topic {name!r} cannot be created: error {code} "
                                     f"{message or ''}".rstrip())
            log.info("created kafka topic %s (%d partitions)", self.topic, self.partitions)
        finally:
            await admin.close()

    async def _start_producer(self) -> Any:
        from aiokafka import AIOKafkaProducer

        options: dict[str, Any] = {
            "linger_ms": 5,
            "max_batch_size": 512 * 1024,
            "request_timeout_ms": int(self.request_timeout * 1000),
            # a broker that went away: reconnect twice a second at most, not ten times
            "retry_backoff_ms": 500,
        }
        options.update(self.producer_options)
        options.update(enable_idempotence=True, acks="all")  # not negotiable: order + no loss
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, **options)
        try:
            await producer.start()
        except BaseException:
            with contextlib.suppress(Exception):
                await producer.stop()
            raise
        return producer

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
        from aiokafka.errors import KafkaError
        from eventsourcing.persistence import InterfaceError, OperationalError

        transient: tuple[type[BaseException], ...] = (
            KafkaError, ConnectionError, TimeoutError, OperationalError, InterfaceError)
        try:
            import psycopg
            import psycopg_pool

            transient += (psycopg.OperationalError, psycopg.InterfaceError,
                          psycopg_pool.PoolTimeout)
        except ImportError:
            pass
        from tenacity import RetryCallState, retry_if_exception_type

        from adapters.streaming.telemetry import Stall, logger, waiting_out

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

    def _check_broker(self) -> None:
        """An idle relay's question to the broker (its metadata, bounded); raises
        ``KafkaError`` when it does not answer."""
        if self._producer is None or self._runner is None:
            return
        from aiokafka.errors import KafkaError

        client = self._producer.client
        started = time.monotonic()
        self._inflight = started
        try:
            self._runner.run(asyncio.wait_for(client.fetch_all_metadata(),
                                              self.request_timeout))
        except TimeoutError:
            raise KafkaError(f"no metadata from the broker in {self.request_timeout:.0f} s"
                             ) from None

    @staticmethod
    def _unknown(metrics: dict[str, Any]) -> None:
        """The log does not answer: the gauges say so instead of the last lag they knew."""
        metrics["up"].set(0)
        metrics["lag_events"].set(float("nan"))
        metrics["lag_seconds"].set(float("nan"))

    def _report(self, slog: Any, database: Any = None, *, say: bool = True) -> bool:
        """The relay's gauges (position, head, lag, up) and, if ``say``, one progress line;
        whether the log answered."""
        metrics = _relay_metrics()
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

    @staticmethod
    def _decode(n: Any) -> Any:
        try:
            return mapper().to_domain_event(n)
        except Exception as e:
            raise CorruptEvent(
                f"event at position {n.id} (aggregate {n.originator_id}, version "
                f"{n.originator_version}, topic {n.topic!r}) cannot be decoded: "
                f"{type(e).__name__}: {e}"
            ) from e

    def _key(self, n: Any) -> bytes:
        try:
            return account_key(n.originator_id, n.topic, bytes(n.state))
        except Exception as e:
            raise CorruptEvent(
                f"event at position {n.id} (aggregate {n.originator_id}, version "
                f"{n.originator_version}, topic {n.topic!r}) cannot be decoded: "
                f"{type(e).__name__}: {e}"
            ) from e

    def _publish(self, records: list[tuple[int, bytes, bytes]]) -> None:
        assert self._runner is not None
        self._inflight = time.monotonic()
        try:
            self._runner.run(self._send(records))
        except BaseException:
            # a fresh producer session next time (new producer id, sequences from 0); the
            # unrecorded batch is sent again from the recorded position
            self._stop_producer()
            raise
        self.published += len(records)
        _relay_metrics()["published"].inc(len(records))

    async def _send(self, records: list[tuple[int, bytes, bytes]]) -> None:
        """Sends ``records`` (in position order) and waits for every ack. With Kafka's default
        partitioner the records of one partition go as producer batches built here
        (``create_batch``/``send_batch``), in position order, each full batch queued behind
        the partition's previous one: the producer sends a partition's batches one after the
        other, with the idempotent producer's sequence numbers, so the order and the
        exactly-once append within a producer session are those of ``send`` -- without its
        per-record future and bookkeeping, which was about half of the relay's CPU."""
        producer = self._producer
        partition_of = await self._partitions(producer)
        if self._custom_partitioner():
            await self._send_each(producer, records, partition_of)
            return
        by_partition: dict[int, list[tuple[int, bytes, bytes]]] = {}
        for record in records:
            partition = partition_of(record[1])
            assert partition is not None
            by_partition.setdefault(partition, []).append(record)
        limit = self._max_record_size()
        futures: list[Any] = []
        try:
            for partition, mine in by_partition.items():
                batch = producer.create_batch()
                for position, key, value in mine:
                    if len(key) + len(value) + _RECORD_OVERHEAD > limit:
                        raise RelayError(f"event at position {position} ({len(value)} bytes) "
                                         f"is too large for the producer (max_request_size "
                                         f"{limit})")
                    if batch.append(key=key, value=value, timestamp=None) is None:
                        batch.close()  # full: queue it, go on in a fresh one
                        futures.append(await producer.send_batch(batch, self.topic,
                                                                 partition=partition))
                        batch = producer.create_batch()
                        if batch.append(key=key, value=value, timestamp=None) is None:
                            raise RelayError(f"event at position {position} does not fit "
                                             "an empty producer batch")
                batch.close()
                futures.append(await producer.send_batch(batch, self.topic,
                                                         partition=partition))
        except BaseException:
            for f in futures:
                f.cancel()
            raise
        await asyncio.gather(*futures)

    def _custom_partitioner(self) -> bool:
        return "partitioner" in self.producer_options

    def _max_record_size(self) -> int:
        return int(self.producer_options.get("max_request_size", 1024 * 1024))

    async def _send_each(self, producer: Any, records: list[tuple[int, bytes, bytes]],
                         partition_of: Callable[[bytes], int | None]) -> None:
        """One ``send`` per record: the producer's own partitioner decides."""
        from aiokafka.errors import MessageSizeTooLargeError

        futures = []
        for position, key, value in records:
            try:
                futures.append(await producer.send(self.topic, value, key=key,
                                                   partition=partition_of(key)))
            except MessageSizeTooLargeError as e:
                for f in futures:
                    f.cancel()
                raise RelayError(f"event at position {position} ({len(value)} bytes) is too "
                                 f"large for the producer: {e}") from e
        await asyncio.gather(*futures)

    async def _partitions(self, producer: Any) -> Callable[[bytes], int | None]:
        """Kafka's default partitioner (murmur2 of the key), remembered per key: a relay
        keys by account, so a handful of keys cover millions of records and the pure-Python
        hash would otherwise run for each. With a partitioner of the caller's own, it decides."""
        if self._custom_partitioner():
            return lambda key: None
        from aiokafka.partitioner import DefaultPartitioner

        partitions = tuple(sorted(await producer.partitions_for(self.topic)))
        if partitions != self._known:
            self._known, self._partition_of = partitions, {}
        cache, choose = self._partition_of, DefaultPartitioner()

        def partition_of(key: bytes) -> int | None:
            found = cache.get(key)
            if found is None:
                found = cache[key] = choose(key, list(partitions), list(partitions))
            return found

        return partition_of

    # -- monitoring -------------------------------------------------------------------------
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
        stamp = getattr(self._decode(notifications[0]), "timestamp", None)
        seconds = 0.0
        if isinstance(stamp, datetime):
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=UTC)
            seconds = max(0.0, (datetime.now(UTC) - stamp).total_seconds())
        return head - position, seconds


PROBE_EVERY = 1.0
"""Seconds between the reporter's questions to a log that does not answer (``_reporting``)."""

_gauges: dict[str, Any] = {}
_gauges_lock = threading.Lock()


def _relay_metrics() -> dict[str, Any]:
    with _gauges_lock:
        if not _gauges:
            from prometheus_client import Counter, Gauge

            _gauges["position"] = Gauge("letterlog_relay_position",
                                        "Last log position the broker acknowledged")
            _gauges["lag_events"] = Gauge("letterlog_relay_lag_events",
                                          "Log positions not yet published")
            _gauges["lag_seconds"] = Gauge("letterlog_relay_lag_seconds",
                                           "Age of the oldest event not yet published")
            _gauges["up"] = Gauge("letterlog_relay_up",
                                  "1 while the log answers the relay, 0 while it does not "
                                  "(the lag gauges are then NaN: unknown)")
            _gauges["published"] = Counter("letterlog_relay_published",
                                           "Records the broker acknowledged")
        return _gauges

