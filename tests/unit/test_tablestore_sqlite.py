from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path

import pytest

from adapters.tables.sqlite import SqliteTableStore
from projections.tablestore import (
    DeleteRow,
    Put,
    StoreClosed,
    TableLoad,
    TableSpec,
    TableStore,
    UnknownFamily,
    table_digest,
)
from tests.contracts.tablestore_contract import TableStoreContract


class TestSqliteTableStore(TableStoreContract):
    @pytest.fixture(autouse=True)
    def _directory(self, tmp_path: Path) -> None:
        self.path = tmp_path / "tables.sqlite"

    def make_store(self) -> TableStore:
        return SqliteTableStore(self.path)


SPEC = TableSpec("messages__b2", ("meta", "data"))


def test_tables_and_tombstones_survive_reopening(tmp_path: Path) -> None:
    with SqliteTableStore(tmp_path / "t.sqlite") as store:
        store.create_table(SPEC)
        store.apply([Put(SPEC.name, b"r", b"meta:a", b"v", 2), DeleteRow(SPEC.name, b"s", 5)])
    with SqliteTableStore(tmp_path / "t.sqlite", synchronous="FULL") as store:
        store.apply([Put(SPEC.name, b"s", b"meta:a", b"late", 4)])
        assert store.list_tables() == ["messages__b2"]
        assert list(store.scan(SPEC.name)) == [(b"r", {b"meta:a": b"v"})]


def test_a_closed_store_refuses_work(tmp_path: Path) -> None:
    store = SqliteTableStore(tmp_path / "t.sqlite")
    store.close()
    store.close()
    with pytest.raises(StoreClosed):
        store.list_tables()


def test_threads_write_and_read_through_their_own_connections(tmp_path: Path) -> None:
    with SqliteTableStore(tmp_path / "t.sqlite") as store:
        store.create_table(SPEC)

        def write(n: int) -> None:
            for i in range(50):
                store.apply([Put(SPEC.name, b"%d-%03d" % (n, i), b"meta:a", b"v", i)])
                assert store.get(SPEC.name, b"%d-%03d" % (n, i)) == {b"meta:a": b"v"}

        threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert table_digest(store, SPEC.name).rows == 200
        assert store.checkpoint("TRUNCATE")[0] == 0


def _write_rows(path: str, n: int) -> None:
    with SqliteTableStore(path) as store:
        store.create_table(SPEC)
        for i in range(100):
            store.apply([Put(SPEC.name, b"%d-%03d" % (n, i), b"meta:a", b"v", 1)])


@pytest.mark.slow
def test_processes_share_one_file(tmp_path: Path) -> None:
    path = str(tmp_path / "t.sqlite")
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_rows, args=(path, n)) for n in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    with SqliteTableStore(path) as store:
        assert table_digest(store, SPEC.name).rows == 300


def test_synchronous_setting_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="synchronous"):
        SqliteTableStore(tmp_path / "t.sqlite", synchronous="SOMETIMES")


# -- load: a fold's result in bulk -----------------------------------------------------------

LOAD = TableLoad(SPEC.name, [
    (b"a", b"data:x", b"1", 3), (b"a", b"meta:f", b"2", 4),
    (b"b", b"meta:f", b"hidden by the row tomb", 5), (b"b", b"meta:g", b"kept", 9),
    (b"c", b"meta:f", b"hidden by the column tomb", 2), (b"c", b"meta:g", b"3", 2),
], [(b"b", b"", 6), (b"c", b"meta:f", 2), (b"d", b"", 1)])
LATE = [Put(SPEC.name, b"b", b"meta:h", b"late, hidden", 6),
        Put(SPEC.name, b"c", b"meta:f", b"late, hidden", 1),
        Put(SPEC.name, b"d", b"meta:f", b"late, visible", 2)]


def _both(tmp_path: Path) -> tuple[SqliteTableStore, SqliteTableStore]:
    loaded, applied = SqliteTableStore(tmp_path / "a.sqlite"), SqliteTableStore(tmp_path / "b")
    for store in (loaded, applied):
        store.create_table(SPEC)
        store.create_table(TableSpec("other", ("o",)))
    return loaded, applied


@pytest.mark.parametrize("first", [[], [Put(SPEC.name, b"a", b"meta:f", b"old", 1),
                                        Put(SPEC.name, b"b", b"meta:z", b"old", 7)]])
def test_a_load_writes_what_applying_its_mutations_writes(tmp_path: Path,
                                                          first: list[Put]) -> None:
    loaded, applied = _both(tmp_path)
    extra = [Put("other", b"t", b"o:pos", b"9", 9)]
    for store in (loaded, applied):
        if first:  # a table that holds something takes the general path
            store.apply(first)
    loaded.load([LOAD], extra)
    applied.apply([*LOAD.mutations(), *extra])
    for store in (loaded, applied):
        store.apply(LATE)  # the loaded tombstones hide late puts as applied ones do
    for table in (SPEC.name, "other"):
        assert list(loaded.scan_cells(table)) == list(applied.scan_cells(table))
    assert loaded.get(SPEC.name, b"b") == {b"meta:g": b"kept"} | (
        {b"meta:z": b"old"} if first else {})


def test_a_load_with_an_unknown_family_writes_nothing(tmp_path: Path) -> None:
    loaded, _ = _both(tmp_path)
    bad = TableLoad("other", [(b"r", b"o:a", b"1", 1), (b"r", b"nope:a", b"1", 1)])
    with pytest.raises(UnknownFamily):
        loaded.load([LOAD, bad])
    assert list(loaded.scan(SPEC.name)) == list(loaded.scan("other")) == []


def test_a_batch_longer_than_one_insert_statement_keeps_put_order_and_versions(
    tmp_path: Path,
) -> None:
    from adapters.tables.memory import InMemoryTableStore

    puts = [Put(SPEC.name, b"r%d" % (i % 7), b"meta:%d" % (i % 3), b"v%d" % i, i % 11)
            for i in range(450)]  # 200-row statements: duplicates within and across them
    sqlite, memory = SqliteTableStore(tmp_path / "t.sqlite"), InMemoryTableStore()
    for store in (sqlite, memory):
        store.create_table(SPEC)
        store.apply(puts)
    assert list(sqlite.scan_cells(SPEC.name)) == list(memory.scan_cells(SPEC.name))


def test_data_version_moves_only_with_another_connections_commit(tmp_path: Path) -> None:
    mine, other = SqliteTableStore(tmp_path / "t.sqlite"), SqliteTableStore(tmp_path / "t.sqlite")
    mine.create_table(SPEC)
    before = mine.data_version()
    mine.apply([Put(SPEC.name, b"r", b"meta:a", b"1", 1)])
    assert mine.data_version() == before
    other.apply([Put(SPEC.name, b"r", b"meta:a", b"2", 2)])
    assert mine.data_version() != before
    mine.close()
    other.close()


def test_one_apply_over_tables_with_and_without_tombstones(tmp_path: Path) -> None:
    """Tombstones are probed for every table of a batch in one statement; each table's
    answer must be its own."""
    store = SqliteTableStore(tmp_path / "t.sqlite")
    specs = [TableSpec(f"t{i}", ("meta",)) for i in range(3)]
    for spec in specs:
        store.create_table(spec)
    store.apply([DeleteRow("t1", b"r", 5)])
    store.apply([Put(spec.name, b"r", b"meta:a", b"old", 4) for spec in specs]
                + [Put(spec.name, b"r", b"meta:b", b"new", 6) for spec in specs])
    assert store.get("t0", b"r") == {b"meta:a": b"old", b"meta:b": b"new"}
    assert store.get("t1", b"r") == {b"meta:b": b"new"}
    assert store.get("t2", b"r") == {b"meta:a": b"old", b"meta:b": b"new"}
    store.close()


def test_compacting_rows_written_newest_first_frees_pages_and_keeps_every_cell(
        tmp_path: Path) -> None:
    with SqliteTableStore(tmp_path / "t.sqlite") as store:
        store.create_table(SPEC)
        for i in range(3000, 0, -1):  # each row goes in before all the rows already there
            row = b"box:" + i.to_bytes(8, "big")
            store.apply([Put(SPEC.name, row, b"data:fields", b"x" * 300, i),
                         Put(SPEC.name, row, b"meta:flags", b"[]", i)])
        digest, cells = table_digest(store, SPEC.name), list(store.scan_cells(SPEC.name))
        before = store.file_bytes()
        freed = store.compact()
        assert freed > 0.25 * before  # the half-empty pages are gone
        assert store.file_bytes() == before - freed
        assert not (tmp_path / "t.sqlite-wal").exists() or \
            (tmp_path / "t.sqlite-wal").stat().st_size == 0
        assert table_digest(store, SPEC.name) == digest
        assert list(store.scan_cells(SPEC.name)) == cells
        store.apply([Put(SPEC.name, b"box:new", b"meta:flags", b"[]", 9000)])  # still writable
    with SqliteTableStore(tmp_path / "t.sqlite") as store:
        assert store.get(SPEC.name, b"box:new") == {b"meta:flags": b"[]"}


def test_batches_of_rows_newest_first_fill_their_pages(tmp_path: Path) -> None:
    """A batch's rows go in in key order: batches keyed newest first (an import's, a
    follower's) leave about a quarter of the file empty (half of it, inserted as they
    came), and ``compact`` has less to take back."""
    with SqliteTableStore(tmp_path / "t.sqlite") as store:
        store.create_table(SPEC)
        for first in range(3000, 0, -250):  # each batch goes in before all the rows there
            store.apply([Put(SPEC.name, b"box:" + i.to_bytes(8, "big"), column, value, i)
                         for i in range(first, first - 250, -1)
                         for column, value in ((b"meta:flags", b"[]"),
                                               (b"data:fields", b"x" * 300))])
        slack = store.slack()  # 0.23 here; 0.49 with each batch as it came
        assert slack is not None and slack < 0.35
        store.checkpoint("TRUNCATE")  # the file alone, no WAL beside it
        before = store.file_bytes()
        assert store.compact() < 0.35 * before


def test_a_cell_put_twice_in_one_batch_keeps_its_order(tmp_path: Path) -> None:
    """Sorting a batch is stable: of one cell put twice with the same version, the later
    put is what stays, as it was before the sort and as every store does."""
    with SqliteTableStore(tmp_path / "t.sqlite") as store:
        store.create_table(SPEC)
        store.apply([Put(SPEC.name, b"r2", b"meta:a", b"first", 1),
                     Put(SPEC.name, b"r1", b"meta:a", b"other", 1),
                     Put(SPEC.name, b"r2", b"meta:a", b"second", 1),
                     Put(SPEC.name, b"r0", b"meta:b", b"new", 3),
                     Put(SPEC.name, b"r0", b"meta:b", b"old", 2)])
        assert store.get(SPEC.name, b"r2") == {b"meta:a": b"second"}
        assert store.get(SPEC.name, b"r1") == {b"meta:a": b"other"}
        assert store.get(SPEC.name, b"r0") == {b"meta:b": b"new"}


def test_slack_counts_free_pages_and_half_empty_ones(tmp_path: Path) -> None:
    with SqliteTableStore(tmp_path / "t.sqlite") as store:
        store.create_table(SPEC)
        assert 0.0 <= (store.slack() or 0.0) < 1.0
        for i in range(2000, 0, -1):  # one row a write, newest first: half-empty pages
            store.apply([Put(SPEC.name, b"box:" + i.to_bytes(8, "big"), b"data:fields",
                             b"x" * 300, i)])
        half = store.slack()
        assert half is not None and half > 0.35
        store.compact()
        packed = store.slack()
        assert packed is not None and packed < 0.15
        store.apply([DeleteRow(SPEC.name, b"box:" + i.to_bytes(8, "big"), 9000)
                     for i in range(1, 1800)])
        emptied = store.slack()
        assert emptied is not None and emptied > 0.5  # the deleted rows' pages are free


def test_scans_give_each_rows_columns_in_column_order_both_ways(tmp_path: Path) -> None:
    with SqliteTableStore(tmp_path / "t.sqlite") as store:
        store.create_table(SPEC)
        store.apply([Put(SPEC.name, row, column, row + column, 1)
                     for row in (b"r1", b"r2", b"r3")
                     for column in (b"meta:b", b"data:z", b"meta:a", b"data:a")])
        columns = [b"data:a", b"data:z", b"meta:a", b"meta:b"]
        for reverse in (False, True):
            rows = list(store.scan(SPEC.name, reverse=reverse, limit=2))
            assert [r for r, _ in rows] == ([b"r1", b"r2"] if not reverse else [b"r3", b"r2"])
            assert all(list(cells) == columns for _, cells in rows)
            assert all(cells == {c: r + c for c in columns} for r, cells in rows)
            versioned = list(store.scan_cells(SPEC.name, reverse=reverse))
            assert all(list(cells) == columns and cells[b"meta:a"] == (r + b"meta:a", 1)
                       for r, cells in versioned)
