"""The outbox relay against real PostgreSQL and Kafka: every event once, keyed by account, in
order per account; resume without duplicates; a crash between ack and record republishes;
gaps in ids; a corrupt event stops it loudly."""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from adapters.bootstrap.scaleout import relay as make_relay
from adapters.config.settings import load_settings
from adapters.embedded import Letterlog
from adapters.eventlog.records import (
    account_of,
    decode_record,
    decode_value,
    record_from_notification,
)
from adapters.streaming.relay import (
    CorruptEvent,
    FilePosition,
    InjectedCrash,
    OutboxRelay,
    PostgresPosition,
    RelayBusy,
    RelayError,
)
from tests.factories import make_mail

services = pytest.mark.services
ACCOUNTS = ["ada@example.org", "grace@example.org", "alan@example.org", "edsger@example.org"]


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def bootstrap(kafka_server: Any) -> str:
    return str(kafka_server.bootstrap)


@pytest.fixture
def topic() -> str:
    return f"letterlog-test-{secrets.token_hex(5)}"


@pytest.fixture
def store(tmp_path: Path, pg_dsn: str) -> Iterator[Letterlog]:
    s = Letterlog.open(tmp_path / "data", event_store="postgres", postgres_dsn=pg_dsn)
    yield s
    s.close()


def relay_for(store: Letterlog, bootstrap: str, topic: str, **options: Any) -> OutboxRelay:
    settings = load_settings(data=store.settings.data, event_store="postgres",
                             postgres_dsn=store.settings.postgres_dsn,
                             kafka_bootstrap=bootstrap, kafka_topic=topic)
    return make_relay(settings, store.log, **options)


def history(store: Letterlog, rounds: int = 3, offset: int = 0) -> None:
    """Interleaved commands on several accounts: deliveries, flags, labels, moves."""
    for r in range(rounds):
        for i, account in enumerate(ACCOUNTS):
            d = store.deliver(account=account, raw=make_mail(
                f"r{r}-{i}", message_id=f"<{offset}.{r}.{i}@x>"))
            store.flag(d.message_id, ["\\Seen"])
            if (r + i) % 2:
                store.label(d.message_id, add=[f"l{r}"])
        if r == 1:
            store.create_mailbox(ACCOUNTS[0], f"Box{offset}")


def log_positions(store: Letterlog) -> list[int]:
    return [n.id for n in store.log.recorder.select_notifications(start=1, limit=1_000_000)]


def consume(bootstrap: str, topic: str) -> list[tuple[int, int, bytes, bytes]]:
    """Every record now in the topic: (partition, offset, key, value), by partition/offset."""
    return asyncio.run(_consume(bootstrap, topic))


async def _consume(bootstrap: str, topic: str) -> list[tuple[int, int, bytes, bytes]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        await consumer.topics()  # metadata
        partitions = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)
        out: list[tuple[int, int, bytes, bytes]] = []
        deadline = time.monotonic() + 60
        while True:
            pending = [tp for tp in tps if await consumer.position(tp) < end[tp]]
            if not pending:
                break
            assert time.monotonic() < deadline, "timed out reading the topic"
            got = await consumer.getmany(*pending, timeout_ms=1000)
            for tp, msgs in got.items():
                out.extend((tp.partition, m.offset, m.key, m.value) for m in msgs
                           if m.offset < end[tp])
        return sorted(out)
    finally:
        await consumer.stop()


def partition_count(bootstrap: str, topic: str) -> int:
    async def go() -> int:
        from aiokafka import AIOKafkaConsumer

        c = AIOKafkaConsumer(bootstrap_servers=bootstrap)
        await c.start()
        try:
            await c.topics()
            return len(c.partitions_for_topic(topic) or ())
        finally:
            await c.stop()

    return asyncio.run(go())


Records = list[tuple[int, int, bytes, bytes]]


def by_partition(records: Records) -> dict[int, list[tuple[bytes, int]]]:
    """partition -> [(key, position)] in offset order."""
    out: dict[int, list[tuple[bytes, int]]] = defaultdict(list)
    for partition, _offset, key, value in records:
        out[partition].append((key, decode_value(value).position))
    return out


def dedupe(records: Records) -> dict[int, list[int]]:
    """The consumer rule: per partition, drop a record whose position is not above the
    highest already applied."""
    out: dict[int, list[int]] = {}
    for partition, seq in by_partition(records).items():
        applied: list[int] = []
        for _key, pos in seq:
            if not applied or pos > applied[-1]:
                applied.append(pos)
        out[partition] = applied
    return out


# --------------------------------------------------------------------------- positions


def test_file_position_round_trips_atomically_and_refuses_garbage(tmp_path: Path) -> None:
    p = FilePosition(tmp_path / "relay.position")
    assert p.load() == 0
    p.save(41)
    p.save(42)
    assert p.load() == 42
    assert json.loads((tmp_path / "relay.position").read_text())["position"] == 42
    assert sorted(x.name for x in tmp_path.iterdir()) == ["relay.position"]  # no temp files
    (tmp_path / "relay.position").write_text("{\"position\": -3}")
    with pytest.raises(RelayError, match="relay.position is unreadable"):
        p.load()
    (tmp_path / "relay.position").write_text("garbage")
    with pytest.raises(RelayError, match="unreadable"):
        p.load()


def test_file_position_admits_one_relay_at_a_time(tmp_path: Path) -> None:
    a, b = FilePosition(tmp_path / "p"), FilePosition(tmp_path / "p")
    a.acquire()
    with pytest.raises(RelayBusy):
        b.acquire()
    a.release()
    b.acquire()
    b.release()


def test_relay_needs_a_bootstrap(tmp_path: Path) -> None:
    from domain.errors import SettingsError

    with pytest.raises(SettingsError, match="LETTERLOG_KAFKA_BOOTSTRAP"):
        make_relay(load_settings(data=tmp_path))


# --------------------------------------------------------------------------- the relay


@services
def test_publishes_every_event_once_keyed_by_account_in_order(
        store: Letterlog, bootstrap: str, topic: str) -> None:
    history(store, rounds=3)
    positions = log_positions(store)
    with relay_for(store, bootstrap, topic, batch=7) as relay:
        assert relay.run_once() == len(positions)
        assert relay.position.load() == positions[-1]
        assert relay.run_once() == 0
    records = consume(bootstrap, topic)
    assert partition_count(bootstrap, topic) == 6
    assert sorted(decode_value(v).position for *_, v in records) == positions  # each once

    # the value is the wire record of the logged event, the key its account
    logged = {n.id: n for n in store.log.recorder.select_notifications(start=1, limit=10_000)}
    accounts = set()
    for _p, _o, key, value in records:
        position, event = decode_record(value)
        assert decode_value(value) == record_from_notification(logged[position])
        assert key == account_of(event).bytes
        accounts.add(UUID(bytes=key))
    assert len(accounts) == len(ACCOUNTS)

    # one account: one partition, positions increasing in offset order
    partitions_of: dict[bytes, set[int]] = defaultdict(set)
    for partition, seq in by_partition(records).items():
        for key, _ in seq:
            partitions_of[key].add(partition)
        per_key: dict[bytes, list[int]] = defaultdict(list)
        for key, pos in seq:
            per_key[key].append(pos)
        for seen in per_key.values():
            assert seen == sorted(seen) and len(set(seen)) == len(seen)
    assert all(len(p) == 1 for p in partitions_of.values())


@services
def test_a_restarted_relay_resumes_and_publishes_nothing_twice(
        store: Letterlog, bootstrap: str, topic: str) -> None:
    history(store, rounds=2)
    first = log_positions(store)
    with relay_for(store, bootstrap, topic) as relay:
        assert relay.run_once(max_events=5) == 5
        assert relay.position.load() == first[4]
        assert relay.run_once() == len(first) - 5
    history(store, rounds=2, offset=1)
    both = log_positions(store)
    with relay_for(store, bootstrap, topic, batch=3) as relay:
        assert relay.run_once() == len(both) - len(first)
        assert relay.position.load() == both[-1]
    published = [decode_value(v).position for *_, v in consume(bootstrap, topic)]
    assert sorted(published) == both


@services
def test_a_crash_between_ack_and_record_republishes_then_goes_on(
        store: Letterlog, bootstrap: str, topic: str) -> None:
    history(store, rounds=3)
    positions = log_positions(store)
    with relay_for(store, bootstrap, topic, batch=10) as relay:
        relay.run_once(max_events=10)  # 1..10 published and recorded
        relay.crash_after_publish = True
        with pytest.raises(InjectedCrash, match="before recording"):
            relay.run_once()
        assert relay.position.load() == positions[9]  # the acked batch is not recorded
    with relay_for(store, bootstrap, topic, batch=10) as relay:
        assert relay.run_once() == len(positions) - 10
    records = consume(bootstrap, topic)
    published = sorted(decode_value(v).position for *_, v in records)
    assert published == sorted(positions + positions[10:20])  # batch 11..20 twice
    # with the consumer rule (drop what is not above the partition's high-water mark) every
    # event is applied once, in log order per partition
    applied = dedupe(records)
    assert sorted(p for seq in applied.values() for p in seq) == positions
    assert all(seq == sorted(seq) for seq in applied.values())


@services
def test_gaps_in_notification_ids_are_tolerated(
        store: Letterlog, bootstrap: str, topic: str, pg_dsn: str) -> None:
    import psycopg

    history(store, rounds=1)
    with relay_for(store, bootstrap, topic) as relay:
        relay.run_once()
        before = relay.position.load()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            # what a rolled-back insert does to a sequence, a thousand times over
            conn.execute("SELECT setval(pg_get_serial_sequence('letterlog_events', "
                         "'notification_id'), (SELECT max(notification_id) + 1000 "
                         "FROM letterlog_events))")
        history(store, rounds=1, offset=1)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:  # and a hole inside a batch
            conn.execute("SELECT setval(pg_get_serial_sequence('letterlog_events', "
                         "'notification_id'), (SELECT max(notification_id) + 5 "
                         "FROM letterlog_events))")
        history(store, rounds=1, offset=2)
        positions = log_positions(store)
        assert positions[-1] > before + 1000
        assert relay.run_once() == len([p for p in positions if p > before])
        assert relay.position.load() == positions[-1]
        assert relay.lag() == (0, 0.0)
    assert sorted(decode_value(v).position for *_, v in consume(bootstrap, topic)) == positions


@services
def test_a_corrupt_event_stops_the_relay_loudly_after_the_good_ones(
        store: Letterlog, bootstrap: str, topic: str, pg_dsn: str) -> None:
    import psycopg

    history(store, rounds=1)
    positions = log_positions(store)
    bad = positions[5]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        row = conn.execute(
            "UPDATE letterlog_events SET state = %s WHERE notification_id = %s "
            "RETURNING originator_id, originator_version", (b"\xc1 not msgpack", bad)).fetchone()
    assert row is not None
    aggregate, version = row
    with relay_for(store, bootstrap, topic) as relay:
        for _ in range(2):  # never skipped: the second pass stops at the same event
            with pytest.raises(CorruptEvent) as info:
                relay.run_once()
            message = str(info.value)
            assert f"position {bad}" in message
            assert str(aggregate) in message and f"version {version}" in message
            assert relay.position.load() == positions[4]
    published = sorted(decode_value(v).position for *_, v in consume(bootstrap, topic))
    assert published == positions[:5]


@services
def test_lag_counts_what_is_not_yet_published(
        store: Letterlog, bootstrap: str, topic: str) -> None:
    history(store, rounds=1)
    head = log_positions(store)[-1]
    with relay_for(store, bootstrap, topic) as relay:
        time.sleep(0.05)
        behind, seconds = relay.lag()
        assert behind == head and 0.05 <= seconds < 60
        relay.run_once()
        assert relay.lag() == (0, 0.0)


@services
def test_one_relay_per_position(store: Letterlog, bootstrap: str, topic: str) -> None:
    history(store, rounds=1)
    with relay_for(store, bootstrap, topic) as relay:
        relay.run_once()
        assert isinstance(relay.position, PostgresPosition)
        with relay_for(store, bootstrap, topic) as other, pytest.raises(RelayBusy):
            other.run_once()
    with relay_for(store, bootstrap, topic) as relay:  # released on close
        assert relay.run_once() == 0


@services
def test_run_follows_the_log_until_stopped(
        store: Letterlog, bootstrap: str, topic: str) -> None:
    stop = threading.Event()
    errors: list[BaseException] = []
    relay = relay_for(store, bootstrap, topic)

    def go() -> None:
        try:
            relay.run(stop, poll_interval=0.05)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    thread = threading.Thread(target=go)
    thread.start()
    try:
        history(store, rounds=2)
        head = log_positions(store)[-1]
        deadline = time.monotonic() + 60
        while relay.position.load() < head and not errors:
            assert time.monotonic() < deadline, "the running relay did not catch up"
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive() and not errors
    relay.close()
    assert sorted(decode_value(v).position for *_, v in consume(bootstrap, topic)) == \
        log_positions(store)


@services
def test_the_embedded_sqlite_store_relays_with_a_position_file(
        tmp_path: Path, bootstrap: str, topic: str) -> None:
    data = tmp_path / "data"
    with Letterlog.open(data) as s:
        history(s, rounds=1)
        positions = log_positions(s)
    settings = load_settings(data=data, kafka_bootstrap=bootstrap, kafka_topic=topic)
    with make_relay(settings, partitions=2) as relay:  # opens its own log
        assert relay.run_once() == len(positions)
    assert json.loads((data / f"relay-{topic}.position").read_text())["position"] == \
        positions[-1]
    assert partition_count(bootstrap, topic) == 2
    assert sorted(decode_value(v).position for *_, v in consume(bootstrap, topic)) == positions


class _CheckedPosition(FilePosition):
    """A position file that, each time the relay records a position, reads the topic and
    notes whether every event up to it is there already (acked before recorded)."""

    def __init__(self, path: Path, bootstrap: str, topic: str) -> None:
        super().__init__(path)
        self.bootstrap, self.topic = bootstrap, topic
        self.saved: list[tuple[int, bool]] = []
        self.expected: list[int] = []

    def save(self, position: int) -> None:
        there = {decode_value(v).position for *_, v in consume(self.bootstrap, self.topic)}
        self.saved.append((position, all(p in there for p in self.expected if p <= position)))
        super().save(position)


@services
def test_many_producer_batches_per_partition_keep_log_order_and_are_acked_before_recorded(
        tmp_path: Path, bootstrap: str, topic: str) -> None:
    """The relay builds a producer batch per partition; with batches far smaller than a
    relay batch, every partition gets several producer batches per relay batch. Each event
    is published once, a partition holds its events in log order, an account stays in one
    partition, and a position is recorded only once Kafka has every event up to it."""
    data = tmp_path / "data"
    with Letterlog.open(data) as s:
        history(s, rounds=3)
        positions = log_positions(s)
        read = s.log.recorder.select_notifications
        position = _CheckedPosition(tmp_path / "relay.position", bootstrap, topic)
        position.expected = positions
        with OutboxRelay(lambda start, limit: read(start=start, limit=limit), bootstrap, topic,
                         position, batch=25, partitions=3,
                         producer_options={"max_batch_size": 1024}) as relay:
            assert relay.run_once() == len(positions)
    assert len(positions) > 50 and len(position.saved) >= 3
    assert [p for p, _ in position.saved][-1] == positions[-1]
    assert all(acked for _, acked in position.saved), position.saved
    records = consume(bootstrap, topic)
    assert sorted(decode_value(v).position for *_, v in records) == positions  # each once
    partitions_of: dict[bytes, set[int]] = defaultdict(set)
    for partition, seq in by_partition(records).items():
        in_offset_order = [pos for _, pos in seq]
        assert in_offset_order == sorted(in_offset_order)
        for key, _ in seq:
            partitions_of[key].add(partition)
    assert len(by_partition(records)) > 1
    assert all(len(p) == 1 for p in partitions_of.values())


@services
def test_an_event_too_large_for_the_producer_stops_the_relay_unrecorded(
        tmp_path: Path, bootstrap: str, topic: str) -> None:
    data = tmp_path / "data"
    with Letterlog.open(data) as s:
        history(s, rounds=1)
        read = s.log.recorder.select_notifications
        sizes = [len(record_from_notification(n).encode()) for n in read(start=1, limit=1000)]
        limit = sorted(sizes)[len(sizes) // 2]  # half of the events are larger
        with OutboxRelay(lambda start, limit: read(start=start, limit=limit), bootstrap, topic,
                         FilePosition(tmp_path / "p"), batch=1000,
                         producer_options={"max_request_size": limit}) as relay:
            with pytest.raises(RelayError, match="too large for the producer"):
                relay.run_once()
            assert relay.position.load() == 0  # nothing recorded: all of it comes again


def test_an_unreachable_broker_raises_once_and_is_retried_by_run(tmp_path: Path) -> None:
    from aiokafka.errors import KafkaError

    from devtools.devservers._common import free_port

    def read(start: int, limit: int) -> list[Any]:
        raise AssertionError("nothing is read before the broker answers")

    bootstrap = f"127.0.0.1:{free_port()}"  # nobody listens there
    with OutboxRelay(read, bootstrap, "t", FilePosition(tmp_path / "p"),
                     request_timeout=2) as relay:
        with pytest.raises(KafkaError):
            relay.run_once()
        stop = threading.Event()
        thread = threading.Thread(target=relay.run, args=(stop,), kwargs={"poll_interval": 0.05})
        thread.start()
        time.sleep(1.0)
        stop.set()
        thread.join(30)
        assert not thread.is_alive()
    assert not (tmp_path / "p").exists()
