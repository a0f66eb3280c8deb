"""The lifecycle on the scale-out parts: a PostgreSQL log (data keys in a table beside it),
purge-queue cells and pointers in real HBase, the relay's records in real Kafka."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.embedded import Letterlog
from adapters.readside.host import ProjectionHost
from adapters.streaming.relay import OutboxRelay
from adapters.tables.hbase import HBaseTableStore
from projections.keys import PURGE_SHARDS
from tests.integration.test_erasure import deliver_marked, files_holding

pytestmark = pytest.mark.services


def project_into(store: Letterlog, tables: HBaseTableStore) -> None:
    """The same projectors as the stream workers, run in the store's process into HBase:
    HBase is current before each command returns, so a purge job reads what it would read
    there."""
    assert store.projections is not None
    store.projections.close()
    store.projections = ProjectionHost(tables, store.events, None, store.max_position)
    store.catch_up()


@pytest.fixture
def scale_out(tmp_path: Path, pg_dsn: str, hbase_server: Any,
              kafka_server: Any) -> Iterator[Letterlog]:
    store = Letterlog.open(tmp_path / "data", event_store="postgres", postgres_dsn=pg_dsn,
                           kafka_bootstrap=kafka_server.bootstrap,
                           kafka_topic=f"lifecycle-{secrets.token_hex(4)}")
    project_into(store, HBaseTableStore(hbase_server.thrift_host, hbase_server.thrift_port,
                                        table_prefix=f"life{secrets.token_hex(4)}"))
    try:
        yield store
    finally:
        store.close()


def test_purge_reads_queues_and_keeps_pointers_in_hbase_over_a_postgres_log(scale_out):
    store = scale_out
    ids, markers = deliver_marked(store)
    for message_id in ids:
        store.delete(message_id)
    assert store.purge(datetime.now(UTC) + timedelta(days=29)).as_dict()["purged"] == 0
    report = store.purge(datetime.now(UTC) + timedelta(days=31)).as_dict()
    assert report["purged"] == 2 and report["payloads_freed"] == 1
    jobs = store.purge_jobs()
    assert all(jobs.pointer("deleted", s) is not None for s in range(PURGE_SHARDS))
    assert store.purge_due(datetime.now(UTC) + timedelta(days=400)) == []
    assert all(r.identical for r in store.verify())
    assert files_holding(Path(store.settings.data), markers) == {}


def test_the_log_and_the_kafka_records_hold_no_personal_data(scale_out, postgres_server,
                                                             kafka_server):
    store = scale_out
    ids, markers = deliver_marked(store)
    relay = OutboxRelay.from_settings(store.settings, log=store.log, partitions=1, batch=100)
    try:
        assert relay.run_once() > 0
    finally:
        relay.close()
    import psycopg

    with psycopg.connect(postgres_server.admin_dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # what was written is in the data files, not only in WAL
    assert files_holding(Path(postgres_server.workdir), markers) == {}
    assert files_holding(Path(kafka_server.workdir) / "data", markers) == {}
    store.erase_message(ids[0])
    assert store.show(ids[0])["envelope"] == {}
