"""The table store contract against a real HBase (standalone + Thrift1 + Thrift2), in both
write modes (Thrift1 ``mutateRowsTs`` per version; Thrift2 ``putMultiple``/``deleteMultiple``
with per-cell timestamps), plus what only the HBase adapter has: table naming, family
settings, retries, unreachable servers, and an opt-in put-rate measurement
(``LETTERLOG_HBASE_BENCH=1``)."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import closing
from typing import Any, Protocol

import pytest

pytest.importorskip("happybase")

from adapters.tables.hbase import SALT_SPLIT_KEYS, HBaseTableStore, hbase_shell_create  # noqa: E402
from projections.tablestore import (  # noqa: E402
    DeleteColumn,
    DeleteRow,
    Mutation,
    Put,
    StoreClosed,
    TableNotFound,
    TableSpec,
    TableStore,
    TableStoreError,
)
from tests.contracts.tablestore_contract import TableStoreContract, unique_name  # noqa: E402

pytestmark = pytest.mark.services

# One prefix per test session: reruns against a kept server never meet old tables.
PREFIX = f"lltest-{uuid.uuid4().hex[:8]}"


class HBaseServer(Protocol):
    """What these tests use of ``devtools.devservers.HBaseServer``."""

    thrift_host: str
    thrift_port: int
    thrift2_port: int | None

    def connection(self, **kwargs: object) -> Any: ...


class _RunningHBase:
    """Gateways started elsewhere: ``LETTERLOG_HBASE_THRIFT=host:port`` (Thrift1) and
    optionally ``LETTERLOG_HBASE_THRIFT2=port`` (Thrift2 on the same host)."""

    def __init__(self, address: str, thrift2: str | None) -> None:
        host, _, port = address.rpartition(":")
        self.thrift_host, self.thrift_port = host or "127.0.0.1", int(port)
        self.thrift2_port = int(thrift2.rpartition(":")[2]) if thrift2 else None

    def connection(self, **kwargs: object) -> Any:
        import happybase

        kwargs.setdefault("timeout", 60_000)
        return happybase.Connection(self.thrift_host, self.thrift_port, **kwargs)


@pytest.fixture(scope="module")
def hbase(request: pytest.FixtureRequest) -> Iterator[HBaseServer]:
    """The session's HBase (``hbase_server``), or a running one named in the environment."""
    address = os.environ.get("LETTERLOG_HBASE_THRIFT")
    server = (
        _RunningHBase(address, os.environ.get("LETTERLOG_HBASE_THRIFT2"))
        if address
        else request.getfixturevalue("hbase_server")
    )
    yield server
    # whatever a failed test left behind under this session's prefix
    store = HBaseTableStore(server.thrift_host, server.thrift_port, table_prefix=PREFIX)
    try:
        for name in store.list_tables():
            store.drop_table(name)
    finally:
        store.close()


def open_store(server: HBaseServer, **kwargs: object) -> HBaseTableStore:
    kwargs.setdefault("table_prefix", PREFIX)
    return HBaseTableStore(server.thrift_host, server.thrift_port, **kwargs)  # type: ignore[arg-type]


def thrift2_port(server: HBaseServer) -> int:
    if not server.thrift2_port:
        pytest.skip("no Thrift2 gateway (set LETTERLOG_HBASE_THRIFT2 with LETTERLOG_HBASE_THRIFT)")
    return server.thrift2_port


class TestHBaseTableStore(TableStoreContract):
    """Thrift1 writes: one ``mutateRowsTs`` per (table, version)."""

    @pytest.fixture(autouse=True)
    def _server(self, hbase: HBaseServer) -> None:
        self.server = hbase

    def make_store(self) -> TableStore:
        return open_store(self.server)


class TestHBaseTableStoreThrift2(TableStoreContract):
    """Thrift2 writes: ``putMultiple``/``deleteMultiple``, a timestamp per cell."""

    @pytest.fixture(autouse=True)
    def _server(self, hbase: HBaseServer) -> None:
        self.server = hbase
        self.thrift2_port = thrift2_port(hbase)

    def make_store(self) -> TableStore:
        return open_store(self.server, thrift2_port=self.thrift2_port)


@pytest.fixture(params=["thrift1", "thrift2"])
def mode(request: pytest.FixtureRequest, hbase: HBaseServer) -> dict[str, object]:
    """Store kwargs for each write mode."""
    if request.param == "thrift1":
        return {}
    return {"thrift2_port": thrift2_port(hbase)}


@pytest.fixture
def store(hbase: HBaseServer, mode: dict[str, object]) -> Iterator[HBaseTableStore]:
    with open_store(hbase, **mode) as store:
        yield store


@pytest.fixture
def table(store: HBaseTableStore) -> Iterator[str]:
    name = unique_name()
    store.create_table(TableSpec(name, ("meta", "data")))
    yield name
    store.drop_table(name)


# -- naming and table settings ----------------------------------------------------------------


def test_logical_tables_live_under_the_prefix(
    hbase: HBaseServer, store: HBaseTableStore, table: str
) -> None:
    assert store.physical_name(table) == f"{PREFIX}_{table}"
    with closing(hbase.connection()) as conn:
        assert f"{PREFIX}_{table}".encode() in conn.tables()
    with open_store(hbase, table_prefix=f"{PREFIX}.other") as other:
        assert table not in other.list_tables()
        assert not other.table_exists(table)


def test_families_keep_one_version_with_row_blooms_and_block_cache(
    hbase: HBaseServer, store: HBaseTableStore, table: str
) -> None:
    with closing(hbase.connection()) as conn:
        families = conn.table(store.physical_name(table)).families()
    assert set(families) == {b"meta", b"data"}
    for settings in families.values():
        assert settings["max_versions"] == 1
        assert settings["bloom_filter_type"] == b"ROW"
        assert settings["block_cache_enabled"] is True


def test_an_older_put_arriving_late_is_never_read(store: HBaseTableStore, table: str) -> None:
    """VERSIONS => 1 keeps the highest timestamp, not the last arrival."""
    store.apply([Put(table, b"r", b"meta:a", b"new", 9)])
    store.apply([Put(table, b"r", b"meta:a", b"old", 3)])
    store.apply([DeleteColumn(table, b"r", b"meta:b", 2), Put(table, b"r", b"meta:b", b"x", 3)])
    assert store.get_cells(table, b"r") == {b"meta:a": (b"new", 9), b"meta:b": (b"x", 3)}


def test_a_batch_of_many_versions_is_written_whole(store: HBaseTableStore, table: str) -> None:
    """Thrift1 takes one timestamp per call: many versions mean many (concurrent) calls;
    Thrift2 sends them in a few ``putMultiple``/``deleteMultiple`` calls."""
    batch: list[Mutation] = [
        Put(table, b"row%04d" % (i % 300), b"meta:c%d" % (i % 7), b"v%d" % i, i)
        for i in range(3000)
    ]
    batch += [DeleteRow(table, b"row%04d" % i, 10_000) for i in range(0, 300, 10)]
    store.apply(batch)
    newest: dict[tuple[bytes, bytes], tuple[bytes, int]] = {}
    for m in batch:
        if isinstance(m, Put):
            newest[m.row, m.column] = (m.value, m.version)
    expected: dict[bytes, dict[bytes, tuple[bytes, int]]] = {}
    for (row, column), cell in sorted(newest.items()):
        if int(row[3:]) % 10:
            expected.setdefault(row, {})[column] = cell
    assert dict(store.scan_cells(table)) == expected


def test_thrift2_sends_many_versions_in_few_calls(
    hbase: HBaseServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A timestamp per cell: 3000 versions, puts and deletes of both kinds, in 3 calls."""
    with open_store(hbase, thrift2_port=thrift2_port(hbase), thrift2_batch_cells=2000) as store:
        name = unique_name()
        store.create_table(TableSpec(name, ("meta", "data")))
        try:
            calls: list[tuple[str, int]] = []
            send = store._send2

            def counting(call: Any) -> None:
                calls.append((call.op, len(call.items)))
                send(call)

            monkeypatch.setattr(store, "_send2", counting)
            store.apply([Put(name, b"r%04d" % i, b"meta:a", b"v", i + 1) for i in range(3000)])
            assert sorted(calls) == [("putMultiple", 1000), ("putMultiple", 2000)]
            calls.clear()
            store.apply(
                [DeleteColumn(name, b"r%04d" % i, b"meta:a", i + 1) for i in range(0, 3000, 2)]
                + [DeleteRow(name, b"r%04d" % i, 5000) for i in range(1, 100, 2)]
            )
            assert calls == [("deleteMultiple", 1550)]
            left = [row for row, _ in store.scan(name)]
            assert left == [b"r%04d" % i for i in range(101, 3000, 2)]
        finally:
            store.drop_table(name)


def test_thrift2_same_row_puts_and_deletes_of_many_versions(
    hbase: HBaseServer, store: HBaseTableStore, table: str
) -> None:
    """Per-cell timestamps inside one ``TPut``; column and row deletes of one row in one
    ``deleteMultiple`` (two ``TDelete``s); later lower puts stay hidden, newer ones show."""
    store.apply(
        [
            Put(table, b"r", b"meta:a", b"a5", 5),
            Put(table, b"r", b"meta:b", b"b9", 9),
            Put(table, b"r", b"data:c", b"c2", 2),
            DeleteColumn(table, b"r", b"meta:b", 12),
            DeleteRow(table, b"r", 4),
            Put(table, b"r", b"meta:b", b"b13", 13),
        ]
    )
    assert store.get_cells(table, b"r") == {b"meta:a": (b"a5", 5), b"meta:b": (b"b13", 13)}
    store.apply([Put(table, b"r", b"data:c", b"c3", 3), Put(table, b"r", b"meta:b", b"b12", 12)])
    assert store.get_cells(table, b"r") == {b"meta:a": (b"a5", 5), b"meta:b": (b"b13", 13)}
    with closing(hbase.connection()) as conn:  # what HBase itself holds, read through Thrift1
        row = conn.table(store.physical_name(table)).row(b"r", include_timestamp=True)
    assert row == {b"meta:a": (b"a5", 5), b"meta:b": (b"b13", 13)}


def test_a_folds_load_writes_what_applying_its_mutations_writes(
    hbase: HBaseServer, store: HBaseTableStore, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``load`` (what a folding runner hands a ``BulkLoading`` store): the folded cells and
    tombstones of a table, and extra mutations, hold afterwards exactly what ``apply`` of
    the same mutations holds; through Thrift2 whole rows per call, cells per call bounded."""
    from projections.tablestore import TableLoad

    other = unique_name()
    store.create_table(TableSpec(other, ("meta", "data")))
    try:
        old: list[Mutation] = [Put(name, b"r%03d" % i, b"meta:a", b"old", 1)
                               for name in (table, other) for i in range(0, 60, 3)]
        store.apply(old)
        cells = sorted((b"r%03d" % (i // 4), b"meta:c%d" % (i % 4), b"v%d" % i, 10 + i)
                       for i in range(200))
        tombs = sorted([(b"r%03d" % i, b"", 5) for i in range(0, 60, 6)]
                       + [(b"r%03d" % i, b"meta:a", 7) for i in range(3, 60, 6)])
        loads = [TableLoad(table, cells, tombs)]
        extra: list[Mutation] = [Put(table, b"x", b"data:z", b"extra", 3),
                                 DeleteColumn(table, b"r001", b"meta:c1", 10_000)]
        calls: list[tuple[str, int]] = []
        if store.thrift2_port:
            send = store._send2

            def counting(call: Any) -> None:
                calls.append((call.op, len(call.items)))
                send(call)

            monkeypatch.setattr(store, "_send2", counting)
            monkeypatch.setattr(store, "_thrift2_batch_cells", 40)
        store.load(loads, extra)
        puts = [n for op, n in calls if op == "putMultiple"]
        store.apply([*(m for load in loads for m in load.mutations()), *extra]
                    + [Put(other, b"x", b"data:z", b"extra", 3)]
                    + [DeleteColumn(other, b"r001", b"meta:c1", 10_000)]
                    + [Put(other, *cell) for cell in cells]
                    + [DeleteRow(other, row, v) if not c else DeleteColumn(other, row, c, v)
                       for row, c, v in tombs])
        assert dict(store.scan_cells(table)) == dict(store.scan_cells(other))
        assert dict(store.scan_cells(table))[b"r000"] == {
            b"meta:c%d" % i: (b"v%d" % i, 10 + i) for i in range(4)}
        assert b"meta:a" not in dict(store.scan_cells(table)).get(b"r003", {})
        if store.thrift2_port:  # whole rows of 4 cells, at most 40 cells a call
            assert sum(puts) == 50 + 1 and all(n * 4 <= 40 for n in puts[:-1])
    finally:
        store.drop_table(other)


def test_salt_split_statement_for_operators() -> None:
    spec = TableSpec("messages", ("meta", "data"))
    text = hbase_shell_create(spec)
    assert text.startswith("create 'letterlog_messages', {NAME => 'meta', VERSIONS => 1")
    assert text.count('"\\x') == len(SALT_SPLIT_KEYS) == 127
    assert '"\\x01"' in text and '"\\x7F"' in text
    assert "SPLITS" not in hbase_shell_create(TableSpec("t", ("f",), split_by_salt=False))


def test_a_table_made_outside_the_store_is_accepted_if_its_families_match(
    hbase: HBaseServer, store: HBaseTableStore
) -> None:
    """What an operator does to get pre-split regions (Thrift1 cannot split)."""
    name = unique_name()
    with closing(hbase.connection()) as conn:
        conn.create_table(store.physical_name(name), {"meta": {"max_versions": 1}})
    try:
        store.create_table(TableSpec(name, ("meta",)))
        store.apply([Put(name, b"r", b"meta:a", b"v", 1)])
        assert store.get(name, b"r") == {b"meta:a": b"v"}
        assert store.regions(name) == 1
    finally:
        store.drop_table(name)


@pytest.mark.parametrize("stagger", [0.0, 0.05])
def test_stores_creating_one_table_at_once_all_succeed(hbase: HBaseServer,
                                                       stagger: float) -> None:
    """Workers starting together all find a table missing and all create it: HBase's master
    answers the later creates with a TableExistsException (an IOError through Thrift1, not
    Thrift1's AlreadyExists), and each of them takes the table the first one made. One that
    looks a little later may find the table there but not enabled yet: enabling it is then
    answered with a TableNotDisabledException, and it takes the table too."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    stores = [open_store(hbase) for _ in range(4)]
    try:
        for _ in range(3):
            name = unique_name()
            barrier = threading.Barrier(len(stores))

            def create(store: HBaseTableStore, name: str = name,
                       barrier: threading.Barrier = barrier) -> None:
                barrier.wait()
                time.sleep(stagger * stores.index(store))  # looks while another creates
                store.create_table(TableSpec(name, ("meta",)))

            with ThreadPoolExecutor(len(stores)) as pool:
                for future in [pool.submit(create, s) for s in stores]:
                    future.result()
            for i, store in enumerate(stores):
                store.apply([Put(name, b"r%d" % i, b"meta:a", b"v", 1)])
            assert len(list(stores[0].scan(name))) == len(stores)
            stores[0].drop_table(name)
    finally:
        for store in stores:
            store.close()


def test_a_table_dropped_by_another_store_is_reported_missing(
    hbase: HBaseServer, store: HBaseTableStore, table: str
) -> None:
    store.apply([Put(table, b"r", b"meta:a", b"v", 1)])  # families now cached
    with open_store(hbase) as other:
        other.drop_table(table)
    with pytest.raises(TableNotFound):
        store.apply([Put(table, b"r", b"meta:a", b"v", 2)])
    with pytest.raises(TableNotFound):
        store.get(table, b"r")
    with pytest.raises(TableNotFound):
        list(store.scan(table))


def test_create_table_enables_a_table_left_disabled_by_an_interrupted_drop(
    hbase: HBaseServer, store: HBaseTableStore, table: str
) -> None:
    store.apply([Put(table, b"r", b"meta:a", b"v", 1)])
    with closing(hbase.connection()) as conn:
        conn.disable_table(store.physical_name(table))
    store.create_table(TableSpec(table, ("meta", "data")))
    assert store.get(table, b"r") == {b"meta:a": b"v"}


# -- connections, retries, errors -------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_server_is_named_in_the_error() -> None:
    port = _free_port()
    started = time.monotonic()
    with pytest.raises(TableStoreError, match=f"127.0.0.1:{port}.*unreachable"):
        HBaseTableStore("127.0.0.1", port, retries=2, timeout_ms=2000)
    assert time.monotonic() - started < 10


def test_an_unreachable_thrift2_server_is_named_in_the_error(hbase: HBaseServer) -> None:
    thrift2_port(hbase)
    port = _free_port()
    with pytest.raises(TableStoreError, match=f"Thrift2 server at 127.0.0.1:{port}.*unreachable"):
        open_store(hbase, thrift2_port=port, retries=1, timeout_ms=2000)


def test_a_broken_connection_is_replaced_and_the_call_retried(
    store: HBaseTableStore, table: str
) -> None:
    store.apply([Put(table, b"r", b"meta:a", b"v", 1)])
    pool = store._pool
    assert pool is not None
    connections = list(pool._queue.queue)
    assert connections
    for conn in connections:  # as if a server restart or an idle cut killed the sockets
        if conn.transport.is_open():
            conn.transport.sock.close()
    if store._clients2 is not None:
        idle = store._clients2._idle
        clients2 = []
        while not idle.empty():
            clients2.append(idle.get_nowait())
        assert clients2
        for client in clients2:
            client._oprot.trans.sock.close()
            idle.put(client)
    assert store.get(table, b"r") == {b"meta:a": b"v"}
    store.apply([Put(table, b"s", b"meta:a", b"w", 1)])
    assert [row for row, _ in store.scan(table)] == [b"r", b"s"]


def test_a_closed_store_refuses_work(hbase: HBaseServer) -> None:
    store = open_store(hbase)
    store.close()
    store.close()
    with pytest.raises(StoreClosed):
        store.list_tables()


def test_prefixes_are_checked(hbase: HBaseServer) -> None:
    for bad in ("has_underscore", "", "-dash-first", "x" * 41):
        with pytest.raises(ValueError, match="table_prefix"):
            open_store(hbase, table_prefix=bad)
