"""The lifecycle on the scale-out parts: a PostgreSQL log (data keys in a table beside it),
purge-queue cells and pointers in real HBase, the relay's records in real Kafka."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from adapters.bootstrap.scaleout import relay as make_relay
from adapters.embedded import Letterlog
from adapters.tables.hbase import HBaseTableStore
from projections.keys import PURGE_SHARDS
from tests.erasure_support import (
    deliver_marked,
    every_file,
    files_holding,
    files_holding_any_form,
    marked_mail,
)
from tests.services.support import project_into

pytestmark = pytest.mark.services




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
    relay = make_relay(store.settings, log=store.log, partitions=1, batch=100)
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


def key_candidates(root: Path, key_id: UUID) -> list[bytes]:
    """What an attacker holding a copy of ``root`` takes for the key stored under ``key_id``:
    every run of bytes after each place the id appears (a row of the key table in a heap
    page, a WAL record, a replica or a backup)."""
    found = []
    for _, data in every_file(root):
        at = data.find(key_id.bytes)
        while at >= 0:
            found.append(data[at + 16:at + 16 + 96])
            at = data.find(key_id.bytes, at + 1)
    return found


def opened_by(candidates: list[bytes], key_id: UUID, key: bytes, keks: list[bytes]) -> int:
    """How many candidates give the key: plain, or unwrapped by one of ``keks``."""
    from cryptography.exceptions import InvalidTag

    from adapters.eventlog.keyvault import unwrap
    from adapters.eventlog.sealing import NONCE

    hits = 0
    for run in candidates:
        if key in run:
            hits += 1
            continue
        for offset in range(0, 8):
            wrapped = run[offset:offset + NONCE + 32 + 16]
            for kek in keks:
                try:
                    if unwrap(kek, key_id, wrapped) == key:
                        hits += 1
                except (InvalidTag, ValueError):
                    pass
    return hits


def test_an_erased_messages_key_opens_from_no_byte_postgres_or_kafka_keeps(
        scale_out, postgres_server, kafka_server):
    """The forensic test: PostgreSQL's data directory (heap, WAL) and Kafka's segments after
    an erasure. Every KEK the vault holds is tried on every copy of the key's row the
    files keep: none gives the erased key; a message not erased still opens the same way."""
    import psycopg

    store = scale_out
    ids, markers = deliver_marked(store)
    other = store.deliver(account="keep@example.org", raw=marked_mail("k", attachment=False)[0])
    relay = make_relay(store.settings, log=store.log, partitions=1, batch=100)
    try:
        assert relay.run_once() > 0
    finally:
        relay.close()
    keys = store.log.keys
    secret = {}
    for message_id in (ids[0], other.message_id):
        key_id = store.log.repository.get(message_id).personal.key_id
        secret[message_id] = (key_id, keys.get(key_id))

    def attack(message_id: UUID) -> int:
        with psycopg.connect(postgres_server.admin_dsn, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
        key_id, key = secret[message_id]
        candidates = key_candidates(Path(postgres_server.workdir), key_id)
        candidates += key_candidates(Path(kafka_server.workdir) / "data", key_id)
        candidates += key_candidates(Path(store.settings.data), key_id)
        return opened_by(candidates, key_id, key, vault_keks(Path(store.settings.data)))

    assert attack(ids[0]) > 0  # the attack works: the live key opens from PostgreSQL's files
    result = store.erase_message(ids[0])
    assert result["keys_destroyed"] == 1
    assert attack(ids[0]) == 0
    assert attack(other.message_id) > 0  # the same batch's other keys: re-wrapped, still open
    assert store.show(other.message_id)["envelope"]
    assert files_holding_any_form(Path(postgres_server.workdir), markers) == {}
    assert files_holding_any_form(Path(kafka_server.workdir) / "data", markers) == {}


def vault_keks(data: Path) -> list[bytes]:
    import sqlite3

    con = sqlite3.connect(data / "vault.sqlite")
    try:
        return [bytes(r[0]) for r in con.execute("SELECT kek FROM keks")]
    finally:
        con.close()
