"""The real servers really work: PostgreSQL (psycopg + eventsourcing), HBase through Thrift1
(happybase), Kafka (aiokafka). Fixtures live in tests/services/conftest.py.
"""

from __future__ import annotations

import asyncio
import secrets
import uuid

import pytest

from devtools.devservers import HBaseServer, KafkaServer, PostgresServer

pytestmark = pytest.mark.services


# --------------------------------------------------------------------------- PostgreSQL


def test_postgres_create_insert_select(postgres_server: PostgresServer) -> None:
    psycopg = pytest.importorskip("psycopg")
    table = f"t_{secrets.token_hex(4)}"
    with psycopg.connect(postgres_server.dsn) as conn:
        conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, body bytea NOT NULL)")
        with conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {table} (id, body) VALUES (%s, %s)",
                [(i, f"message {i}".encode()) for i in range(1, 6)],
            )
        conn.commit()
    with psycopg.connect(
        host=postgres_server.host,
        port=postgres_server.port,
        user=postgres_server.user,
        password=postgres_server.password,
        dbname=postgres_server.dbname,
    ) as conn:
        rows = conn.execute(f"SELECT id, body FROM {table} WHERE id > 2 ORDER BY id").fetchall()
        assert [(i, bytes(b)) for i, b in rows] == [(i, f"message {i}".encode()) for i in (3, 4, 5)]
        assert conn.execute("SELECT current_user").fetchone() == (postgres_server.user,)
        conn.execute(f"DROP TABLE {table}")
        conn.commit()


def test_postgres_binds_loopback_with_password(postgres_server: PostgresServer) -> None:
    psycopg = pytest.importorskip("psycopg")
    assert postgres_server.host == "127.0.0.1"
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(
            host=postgres_server.host,
            port=postgres_server.port,
            user=postgres_server.user,
            password="wrong-password",
            dbname=postgres_server.dbname,
            connect_timeout=5,
        )


def test_postgres_eventsourcing_env(postgres_server: PostgresServer) -> None:
    """The eventsourcing library's own postgres module works with eventsourcing_env()."""
    pytest.importorskip("psycopg_pool")
    from eventsourcing.application import Application
    from eventsourcing.domain import Aggregate, event

    class Counter(Aggregate):
        def __init__(self) -> None:
            self.count = 0

        @event("Incremented")
        def increment(self) -> None:
            self.count += 1

    env = postgres_server.eventsourcing_env(include_module=True)
    assert set(env) >= {
        "POSTGRES_DBNAME",
        "POSTGRES_HOST",
        "POSTGRES_PORT",
        "POSTGRES_USER",
        "POSTGRES_PASSWORD",
    }
    app: Application[uuid.UUID] = Application(env=env)
    try:
        counter = Counter()
        counter.increment()
        counter.increment()
        app.save(counter)
        assert app.repository.get(counter.id).count == 2
        assert (app.recorder.max_notification_id() or 0) >= 3
    finally:
        app.close()


# --------------------------------------------------------------------------- HBase


def test_hbase_families_put_get_scan_delete(hbase_server: HBaseServer) -> None:
    pytest.importorskip("happybase")
    name = f"t_{secrets.token_hex(4)}".encode()
    conn = hbase_server.connection()
    try:
        conn.create_table(name, {"meta": {"max_versions": 3}, "data": {"max_versions": 1}})
        assert name in conn.tables()
        assert set(conn.table(name).families()) == {b"meta", b"data"}
        table = conn.table(name)

        # explicit timestamps (the projection idempotence rule writes version = log position)
        table.put(b"mbx1:0001", {b"meta:flags": b"\\Seen", b"data:size": b"12"}, timestamp=10)
        table.put(b"mbx1:0001", {b"meta:flags": b"\\Seen \\Flagged"}, timestamp=30)
        table.put(b"mbx1:0002", {b"meta:flags": b"", b"data:size": b"99"}, timestamp=11)
        table.put(b"mbx2:0001", {b"data:size": b"7"}, timestamp=12)

        row = table.row(b"mbx1:0001", include_timestamp=True)
        assert row == {b"meta:flags": (b"\\Seen \\Flagged", 30), b"data:size": (b"12", 10)}
        cells = table.cells(b"mbx1:0001", b"meta:flags", versions=3, include_timestamp=True)
        assert cells == [(b"\\Seen \\Flagged", 30), (b"\\Seen", 10)]

        # re-applying the same write (same version, same value) changes nothing
        table.put(b"mbx1:0001", {b"meta:flags": b"\\Seen \\Flagged"}, timestamp=30)
        assert table.cells(b"mbx1:0001", b"meta:flags", versions=3) == [
            b"\\Seen \\Flagged",
            b"\\Seen",
        ]

        scanned = [key for key, _ in table.scan(row_prefix=b"mbx1:")]
        assert scanned == [b"mbx1:0001", b"mbx1:0002"]
        assert [key for key, _ in table.scan(row_start=b"mbx2:", columns=[b"data"])] == [
            b"mbx2:0001"
        ]

        # a delete at version p hides only versions <= p
        with table.batch(timestamp=20) as batch:
            batch.delete(b"mbx1:0001", columns=[b"meta:flags"])
        assert table.cells(b"mbx1:0001", b"meta:flags", versions=3, include_timestamp=True) == [
            (b"\\Seen \\Flagged", 30)
        ]
        # a whole-row delete
        table.delete(b"mbx1:0002")
        assert table.row(b"mbx1:0002") == {}
        assert [key for key, _ in table.scan()] == [b"mbx1:0001", b"mbx2:0001"]
    finally:
        if name in conn.tables():
            conn.delete_table(name, disable=True)
        assert name not in conn.tables()
        conn.close()


def test_hbase_batch_and_counter(hbase_server: HBaseServer) -> None:
    pytest.importorskip("happybase")
    name = f"t_{secrets.token_hex(4)}".encode()
    conn = hbase_server.connection()
    try:
        conn.create_table(name, {"c": {}})
        table = conn.table(name)
        with table.batch(batch_size=100) as batch:
            for i in range(500):
                batch.put(f"r{i:04d}".encode(), {b"c:v": str(i).encode()})
        assert sum(1 for _ in table.scan(batch_size=200)) == 500
        assert table.row(b"r0499") == {b"c:v": b"499"}
    finally:
        conn.delete_table(name, disable=True)
        conn.close()


# --------------------------------------------------------------------------- Kafka


def test_kafka_produce_consume_with_keys(kafka_server: KafkaServer) -> None:
    pytest.importorskip("aiokafka")
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = f"letterlog-test-{uuid.uuid4().hex[:8]}"
    keys = [f"account-{i}".encode() for i in range(4)]
    sent = [(keys[i % 4], f"event-{i}".encode()) for i in range(40)]

    async def run() -> list[tuple[bytes, bytes, int, int]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_server.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
        finally:
            await admin.close()
        producer = AIOKafkaProducer(
            bootstrap_servers=kafka_server.bootstrap, acks="all", enable_idempotence=True
        )
        await producer.start()
        try:
            for key, value in sent:
                await producer.send(topic, value, key=key)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=kafka_server.bootstrap,
            group_id=f"{topic}-projector",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        got: list[tuple[bytes, bytes, int, int]] = []
        try:
            while len(got) < len(sent):
                batches = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), timeout=60)
                for records in batches.values():
                    got.extend((r.key, r.value, r.partition, r.offset) for r in records)
            await consumer.commit()
            committed = {tp.partition: await consumer.committed(tp) for tp in consumer.assignment()}
        finally:
            await consumer.stop()
        assert sum(v or 0 for v in committed.values()) == len(sent)
        return got

    got = asyncio.run(asyncio.wait_for(run(), timeout=120))
    assert sorted((k, v) for k, v, _, _ in got) == sorted(sent)
    # one key -> one partition, and per-key order is the send order
    for key in keys:
        mine = [(p, o, v) for k, v, p, o in got if k == key]
        assert len({p for p, _, _ in mine}) == 1
        in_offset_order = [v for _, _, v in sorted(mine)]
        assert in_offset_order == [v for k, v in sent if k == key]


def test_kafka_bootstrap_is_loopback(kafka_server: KafkaServer) -> None:
    host, _, port = kafka_server.bootstrap.partition(":")
    assert host == "127.0.0.1" and int(port) > 0
