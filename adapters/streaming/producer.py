"""The relay's Kafka side: the topic made if the broker lacks it, the idempotent producer,
the records sent in position order by partition (``Sender``), and the relay's metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import MessageSizeTooLargeError
from aiokafka.partitioner import DefaultPartitioner
from prometheus_client import Counter, Gauge

from adapters.streaming.positions import RelayError

__all__ = ["Sender", "ensure_topic", "relay_metrics", "start_producer"]

log = logging.getLogger("letterlog.relay")

_TOPIC_ALREADY_EXISTS = 36
# a record's bytes besides its key and value, as aiokafka's ``send`` counts them against
# max_request_size (``LegacyRecordBatchBuilder.record_overhead``: 22 for magic 1 and 2)
_RECORD_OVERHEAD = 22


async def ensure_topic(bootstrap: str, topic: str, partitions: int,
                       replication_factor: int, request_timeout: float) -> None:
    """Creates ``topic`` with ``partitions`` unless the broker has it."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap,
                                request_timeout_ms=int(request_timeout * 1000))
    try:
        await admin.start()
        if topic in set(await admin.list_topics()):
            return
        response = await admin.create_topics(
            [NewTopic(topic, num_partitions=partitions,
                      replication_factor=replication_factor)],
            timeout_ms=int(request_timeout * 1000),
        )
        for err in response.topic_errors:
            name, code = err[0], err[1]
            message = err[2] if len(err) > 2 else ""
            if code not in (0, _TOPIC_ALREADY_EXISTS):
                raise RelayError(f"kafka topic {name!r} cannot be created: error {code} "
                                 f"{message or ''}".rstrip())
        log.info("created kafka topic %s (%d partitions)", topic, partitions)
    finally:
        await admin.close()


async def start_producer(bootstrap: str, request_timeout: float,
                         producer_options: dict[str, Any]) -> Any:
    """An idempotent producer (``acks="all"``), started."""
    options: dict[str, Any] = {
        "linger_ms": 5,
        "max_batch_size": 512 * 1024,
        "request_timeout_ms": int(request_timeout * 1000),
        # a broker that went away: reconnect twice a second at most, not ten times
        "retry_backoff_ms": 500,
    }
    options.update(producer_options)
    options.update(enable_idempotence=True, acks="all")  # not negotiable: order + no loss
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **options)
    try:
        await producer.start()
    except BaseException:
        with contextlib.suppress(Exception):
            await producer.stop()
        raise
    return producer


class Sender:
    """Sends a batch of ``(position, key, value)`` records to ``topic`` and waits for every
    ack; the partition of each key is remembered (``partitions``)."""

    def __init__(self, topic: str, producer_options: dict[str, Any]) -> None:
        self.topic = topic
        self.producer_options = producer_options
        self._partition_of: dict[bytes, int] = {}  # key -> partition, for ``_known``
        self._known: tuple[int, ...] = ()  # the topic's partitions the cache was built for

    async def send(self, producer: Any, records: list[tuple[int, bytes, bytes]]) -> None:
        """Sends ``records`` (in position order) and waits for every ack. With Kafka's default
        partitioner the records of one partition go as producer batches built here
        (``create_batch``/``send_batch``), in position order, each full batch queued behind
        the partition's previous one: the producer sends a partition's batches one after the
        other, with the idempotent producer's sequence numbers, so the order and the
        exactly-once append within a producer session are those of ``send`` -- without its
        per-record future and bookkeeping, which was about half of the relay's CPU."""
        partition_of = await self.partitions(producer)
        if self.custom_partitioner():
            await self._send_each(producer, records, partition_of)
            return
        by_partition: dict[int, list[tuple[int, bytes, bytes]]] = {}
        for record in records:
            partition = partition_of(record[1])
            assert partition is not None
            by_partition.setdefault(partition, []).append(record)
        limit = self.max_record_size()
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

    def custom_partitioner(self) -> bool:
        return "partitioner" in self.producer_options

    def max_record_size(self) -> int:
        return int(self.producer_options.get("max_request_size", 1024 * 1024))

    async def _send_each(self, producer: Any, records: list[tuple[int, bytes, bytes]],
                         partition_of: Callable[[bytes], int | None]) -> None:
        """One ``send`` per record: the producer's own partitioner decides."""
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

    async def partitions(self, producer: Any) -> Callable[[bytes], int | None]:
        """Kafka's default partitioner (murmur2 of the key), remembered per key: a relay
        keys by account, so a handful of keys cover millions of records and the pure-Python
        hash would otherwise run for each. With a partitioner of the caller's own, it decides."""
        if self.custom_partitioner():
            return lambda key: None
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


_gauges: dict[str, Any] = {}
_gauges_lock = threading.Lock()


def relay_metrics() -> dict[str, Any]:
    with _gauges_lock:
        if not _gauges:
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

