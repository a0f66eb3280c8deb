"""The HBase payload store's own rules (ADR 0072), on the in-memory table store (HBase's
delete semantics): the row layout, chunks read by range, compression, and the interleavings
of a put with a conditional delete. ``payload_races`` runs on a real HBase too
(tests/services/test_payloads_hbase.py)."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest

from adapters.payloads.hbase import DOOMED, MANIFEST, TABLE, HBasePayloadStore, chunk_column
from adapters.tables.memory import InMemoryTableStore
from projections.tablestore import Cells, Mutation, Put, TableStoreUnavailable
from tests.contracts.payload_contract import FakeClock
from tests.payload_races import RACES, Hooked

CHUNK = 16


def store_on(tables: Any, clock: Callable[[], float] | None = None) -> HBasePayloadStore:
    return HBasePayloadStore(tables, CHUNK, clock=clock or FakeClock())


class Recording(InMemoryTableStore):
    """Remembers the columns of every row read."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[Sequence[bytes] | None] = []

    def get_cells(self, table: str, row: bytes, columns: Sequence[bytes] | None = None) -> Cells:
        self.reads.append(columns)
        return super().get_cells(table, row, columns)


def test_a_payload_is_one_row_keyed_by_its_address_with_a_cell_per_chunk() -> None:
    tables = InMemoryTableStore()
    data = bytes(range(40))
    store = store_on(tables)
    ref = store.put(data)
    rows = dict(tables.scan(TABLE))
    cells = rows[bytes.fromhex(ref.address)]
    assert sorted(c for c in cells if c.startswith(b"c:")) == [chunk_column(i) for i in range(3)]
    assert {b"m:manifest", b"m:touched", b"m:digest"} <= set(cells)
    assert cells[b"m:digest"] == hashlib.sha256(data).digest()
    assert ref.chunk_count == 3
    # the content's link (ADR 0099): the only other row, gone with the payload
    assert rows[b"#" + hashlib.sha256(data).digest()] == {b"m:address": bytes.fromhex(ref.address)}
    assert len(rows) == 2
    assert store.delete(ref.address)
    assert list(tables.scan(TABLE)) == []


def test_a_range_read_fetches_only_the_chunks_it_covers() -> None:
    tables = Recording()
    store = store_on(tables)
    ref = store.put(bytes(range(200)))
    tables.reads.clear()
    assert store.read_range(ref.address, 40, 70) == bytes(range(40, 70))
    chunk_reads = [columns for columns in tables.reads if columns != [b"m:"]]
    assert chunk_reads == [[chunk_column(2), chunk_column(3), chunk_column(4)]]


def test_open_reads_chunk_batches_lazily() -> None:
    tables = Recording()
    store = store_on(tables)
    ref = store.put(b"x" * CHUNK * 40)  # 40 chunks: three calls of at most 16
    tables.reads.clear()
    chunks = store.open(ref.address)
    assert tables.reads == [[b"m:"]]  # the manifest, at once
    next(chunks)
    assert len(tables.reads) == 2 and len(tables.reads[1] or ()) == 16


def test_a_chunk_zstd_shrinks_is_stored_compressed_and_says_so() -> None:
    tables = InMemoryTableStore()
    store = HBasePayloadStore(tables, 4096, clock=FakeClock())
    text, noise = b"mail text " * 410, random.Random(7).randbytes(4096)  # noise: no gain
    refs = {}
    for data in (text, noise):
        ref = refs[data] = store.put(data)
        stored = tables.get(TABLE, bytes.fromhex(ref.address), [chunk_column(0)])[chunk_column(0)]
        assert stored[:1] == (b"z" if data is text else b"r")
        assert b"".join(store.open(ref.address)) == data
    assert len(tables.get(TABLE, bytes.fromhex(refs[text].address))[chunk_column(0)]) < 200


@pytest.mark.parametrize("race", RACES, ids=[race.__name__ for race in RACES])
def test_a_put_racing_a_conditional_delete_is_never_lost(race: Callable[..., None]) -> None:
    race(lambda tables, clock: store_on(tables, clock), Hooked(InMemoryTableStore()))


def test_a_mark_a_killed_deleter_left_neither_blocks_puts_nor_deletes() -> None:
    tables, clock = InMemoryTableStore(), FakeClock()
    store = store_on(tables, clock)
    ref = store.put(b"payload" * 5)
    key = bytes.fromhex(ref.address)
    tables.apply([Put(TABLE, key, DOOMED, b"killed", int(clock.now * 1000) + 5)])
    clock.now += 1
    again = store.put(b"payload" * 5)  # not the marked copy: stored under a new address
    assert b"".join(store.open(again.address)) == b"payload" * 5
    clock.now += 1
    assert store.delete_unless_touched(ref.address, clock.now) == 35
    assert not store.exists(ref.address)
    assert store.delete_unless_touched(again.address, clock.now) == 35


class Down(InMemoryTableStore):
    def apply(self, mutations: Iterable[Mutation]) -> None:
        raise TableStoreUnavailable("HBase Thrift server at 127.0.0.1:1 is unreachable")


def test_an_outage_of_the_table_store_is_its_typed_error() -> None:
    store = store_on(Down())
    with pytest.raises(TableStoreUnavailable, match="unreachable"):
        store.put(b"a payload over the inline limit")


class DiesBeforeTheManifest(InMemoryTableStore):
    """The writer's process dies between its chunk calls and its manifest."""

    def apply(self, mutations: Iterable[Mutation]) -> None:
        batch = list(mutations)
        if any(isinstance(m, Put) and m.column == MANIFEST for m in batch):
            raise SystemExit("killed")
        super().apply(batch)


def test_the_chunks_of_a_write_that_died_are_collected_after_the_grace_period() -> None:
    tables, clock = DiesBeforeTheManifest(), FakeClock()
    store = store_on(tables, clock)
    data = bytes(range(256)) * 2  # 32 chunks: two calls of chunks before the manifest
    with pytest.raises(SystemExit):
        store.put(data)
    [(sha, size, began)] = list(store.list())  # named, from when it began
    assert (size, began) == (0, clock.now)
    assert not store.exists(sha)  # never visible
    assert store.delete_unless_touched(sha, clock.now - 1) is None  # within the grace
    clock.now += 60
    assert store.delete_unless_touched(sha, clock.now) == 0
    assert list(tables.scan(TABLE)) == []  # no chunk left
