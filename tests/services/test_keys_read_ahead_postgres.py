"""Data keys read a batch at a time on PostgreSQL (ADR 0117), on the real server: one query
answers for many keys exactly as a read per key does (destroyed, unknown, live), and a
connection the server cut is opened again for it, as for a read of one key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import msgpack
import psycopg
import pytest

from adapters.eventlog import sealing
from adapters.eventlog.keypostgres import PostgresKeyStore
from adapters.eventlog.transcoder import MsgpackTranscoder, ext_hook_for, sealed_key_ids
from domain.personal import Personal

pytestmark = pytest.mark.services


@pytest.fixture
def keys(pg_dsn: str, tmp_path: Path) -> Iterator[Any]:
    """The scale-out key store: wrapped keys in a fresh database, KEKs in a vault file."""
    store = PostgresKeyStore(pg_dsn, vault=tmp_path / "vault.sqlite")
    try:
        yield store
    finally:
        store.close()


class Reads:
    """Counts the key table's queries (wrapping its one reading method)."""

    def __init__(self, table: Any) -> None:
        self.count, self._read = 0, table._read
        table._read = self

    def __call__(self, query: str, argument: Any) -> Any:
        self.count += 1
        return self._read(query, argument)


def test_many_keys_in_one_query_answer_as_one_at_a_time(keys: Any) -> None:
    taken = [keys.new_key() for _ in range(40)]
    ids = [k for k, _ in taken]
    assert keys.destroy(ids[:3]) == 3
    unknown = uuid4()
    reads = Reads(keys.table)
    many = keys.get_many([k.bytes for k in [*ids, unknown]])
    assert reads.count == 1
    assert many == {k.bytes: keys.get(k) for k in ids}
    assert unknown.bytes not in many and set(many.values()) >= {sealing.DESTROYED}
    assert [many[k.bytes] for k in ids[3:]] == [key for _, key in taken[3:]]


def test_a_batch_of_sealed_events_costs_one_query_and_opens_as_before(keys: Any) -> None:
    sealed = [MsgpackTranscoder(keys).encode({"personal": Personal({"subject": f"s{i}"})})
              for i in range(25)]
    expected = [MsgpackTranscoder().decode(s)["personal"] for s in sealed]
    reads = Reads(keys.table)
    hook = ext_hook_for(sealing.keys_read_ahead(sealed_key_ids(sealed)))
    opened = [msgpack.unpackb(s, ext_hook=hook, raw=False)["personal"] for s in sealed]
    assert reads.count == 1 and opened == expected
    assert [dict(p) for p in opened] == [{"subject": f"s{i}"} for i in range(25)]


def test_a_connection_the_server_cut_is_opened_again_for_the_batch(keys: Any,
                                                                   pg_dsn: str) -> None:
    ids = [keys.new_key()[0] for _ in range(5)]
    pid = keys.table._conn.info.backend_pid
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
    assert set(keys.get_many([k.bytes for k in ids])) == {k.bytes for k in ids}
    assert keys.table._conn.info.backend_pid != pid
