"""The payload store contract on a real HBase (standalone, Thrift1; and with Thrift2 writes),
the races of a put with a conditional delete, and an HBase that does not answer (ADR 0072).
Each test has a table of its own under this session's prefix."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("happybase")

from adapters.payloads.hbase import HBasePayloadStore  # noqa: E402
from adapters.tables.hbase import HBaseTableStore  # noqa: E402
from devtools.devservers._common import free_port  # noqa: E402
from domain.ports import PayloadStore  # noqa: E402
from projections.tablestore import TableStoreUnavailable  # noqa: E402
from tests.contracts.payload_contract import (  # noqa: E402
    CHUNK,
    FakeClock,
    PayloadStoreContract,
    ReleasableContract,
)
from tests.payload_races import RACES, Hooked  # noqa: E402
from tests.services.support import drop_tables  # noqa: E402

pytestmark = pytest.mark.services

PREFIX = f"llpay{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def tables(hbase_server: Any) -> Iterator[HBaseTableStore]:
    store = HBaseTableStore(hbase_server.thrift_host, hbase_server.thrift_port,
                            table_prefix=PREFIX)
    try:
        yield store
    finally:
        store.close()
        drop_tables(hbase_server, PREFIX)


@pytest.fixture(scope="module")
def tables2(hbase_server: Any) -> Iterator[HBaseTableStore]:
    if not hbase_server.thrift2_port:
        pytest.skip("no Thrift2 gateway")
    store = HBaseTableStore(hbase_server.thrift_host, hbase_server.thrift_port,
                            table_prefix=PREFIX, thrift2_port=hbase_server.thrift2_port)
    try:
        yield store
    finally:
        store.close()


def own_table() -> str:
    return f"payloads_{uuid.uuid4().hex[:10]}"


class TestHBasePayloadStore(PayloadStoreContract, ReleasableContract):
    """Thrift1 writes (``mutateRowsTs``), reads through Thrift1."""

    @pytest.fixture(autouse=True)
    def _tables(self, tables: HBaseTableStore) -> Iterator[None]:
        self.tables, self.made = tables, []
        yield
        for name in self.made:
            tables.drop_table(name)

    def make_store(
        self, tmp_path: Path, chunk_size: int, clock: Callable[[], float]
    ) -> PayloadStore:
        self.made.append(own_table())
        return HBasePayloadStore(self.tables, chunk_size, clock=clock, threads=4,
                                 table=self.made[-1])


class TestHBasePayloadStoreThrift2(TestHBasePayloadStore):
    """Writes through Thrift2 (``putMultiple``/``deleteMultiple``)."""

    @pytest.fixture(autouse=True)
    def _tables(self, tables2: HBaseTableStore) -> Iterator[None]:  # type: ignore[override]
        self.tables, self.made = tables2, []
        yield
        for name in self.made:
            tables2.drop_table(name)


@pytest.mark.parametrize("race", RACES, ids=[race.__name__ for race in RACES])
def test_a_put_racing_a_conditional_delete_is_never_lost(
        tables: HBaseTableStore, race: Callable[..., None]) -> None:
    name = own_table()
    hooked = Hooked(tables)
    try:
        race(lambda t, clock: HBasePayloadStore(t, CHUNK, clock=clock, table=name), hooked)
    finally:
        tables.drop_table(name)


def test_a_large_payload_reads_back_byte_exact_and_by_range(tables: HBaseTableStore) -> None:
    """Real chunk size (128 KiB), 3 MiB of mail-like text and noise: more chunks than one
    write call carries."""
    import random

    name = own_table()
    store = HBasePayloadStore(tables, table=name)
    try:
        data = (b"Content-Type: text/plain\r\n\r\n" + b"lorem ipsum dolor " * 90_000
                + random.Random(3).randbytes(1 << 20))
        ref = store.put(data)
        assert ref.chunk_count == -(-len(data) // (128 * 1024))
        assert b"".join(store.open(ref.address)) == data
        assert store.read_range(ref.address, 1_500_000, 1_700_000) == data[1_500_000:1_700_000]
    finally:
        tables.drop_table(name)


def test_a_deleted_payload_leaves_no_row_that_names_its_content(tables: HBaseTableStore) -> None:
    """ADR 0099: a payload's row is keyed by a random address; the content's link row (``#`` +
    its SHA-256) lets a put of the same content find it and goes with the payload, by
    either delete. What stays is HBase's tombstones, which ``erase complete`` compacts."""
    import hashlib

    name = own_table()
    store = HBasePayloadStore(tables, table=name)
    try:
        data = b"a 20 KiB template around a code: 4712 " * 600
        digest = hashlib.sha256(data).digest()
        ref, again = store.put(data), store.put(data)
        assert again == ref and bytes.fromhex(ref.address) != digest
        assert {key for key, _ in tables.scan(name)} == {bytes.fromhex(ref.address),
                                                         b"#" + digest}
        assert store.delete_unless_touched(ref.address, horizon=4e9) == len(data)
        assert list(tables.scan(name)) == []
        other = store.put(data)  # the same content later: a new address
        assert other.address != ref.address
        assert store.delete(other.address)
        assert list(tables.scan(name)) == []
    finally:
        tables.drop_table(name)


def test_an_hbase_that_does_not_answer_is_a_temporary_typed_error(
        tables: HBaseTableStore, hbase_server: Any) -> None:
    """The payload store rides the table store's calls: refused connections are retried
    within the deadline, then ``TableStoreUnavailable`` names the gateway (the CLI exits 1,
    lda 75, LMTP 4.x.x)."""
    port = free_port()
    with pytest.raises(TableStoreUnavailable, match=f"127.0.0.1:{port}"):
        HBasePayloadStore(HBaseTableStore("127.0.0.1", port, table_prefix=PREFIX,
                                          timeout_ms=500, retry_deadline_s=1.0),
                          clock=FakeClock())
