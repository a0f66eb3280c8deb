"""The table store contract: HBase's data model, proved on every adapter.

Subclass ``TableStoreContract`` once per adapter and implement ``make_store`` (the only
hook). Every test works in tables with unique names and drops them afterwards, so the suite
can run against a shared HBase server.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from projections.tablestore import (
    Cells,
    DeleteColumn,
    DeleteRow,
    InvalidMutation,
    Mutation,
    Put,
    TableDigest,
    TableNotFound,
    TableSpec,
    TableSpecConflict,
    TableStore,
    UnknownFamily,
    diff_tables,
    table_digest,
)

FAMILIES = ("f", "g")
NewTable = Callable[..., str]


def unique_name(suffix: str = "") -> str:
    return f"contract_{uuid.uuid4().hex[:12]}{suffix}"


def fill(table: str, rows: Sequence[bytes], version: int = 1) -> list[Mutation]:
    """One cell ``f:a = row`` per row."""
    return [Put(table, row, b"f:a", row, version) for row in rows]


class TableStoreContract:
    def make_store(self) -> TableStore:
        raise NotImplementedError

    @pytest.fixture
    def store(self) -> Iterator[TableStore]:
        store = self.make_store()
        yield store
        store.close()

    @pytest.fixture
    def new_table(self, store: TableStore) -> Iterator[NewTable]:
        created: list[str] = []

        def new_table(families: tuple[str, ...] = FAMILIES, suffix: str = "") -> str:
            name = unique_name(suffix)
            store.create_table(TableSpec(name, families))
            created.append(name)
            return name

        yield new_table
        for name in created:
            store.drop_table(name)

    @pytest.fixture
    def table(self, new_table: NewTable) -> str:
        return new_table()

    def keys(self, store: TableStore, table: str, **scan: object) -> list[bytes]:
        return [row for row, _ in store.scan(table, **scan)]  # type: ignore[arg-type]

    # -- tables ------------------------------------------------------------------------------

    def test_created_table_exists_and_is_listed(self, store: TableStore, table: str) -> None:
        assert store.table_exists(table)
        assert table in store.list_tables()
        assert store.list_tables() == sorted(store.list_tables())

    def test_missing_table_does_not_exist(self, store: TableStore) -> None:
        name = unique_name()
        assert not store.table_exists(name)
        assert name not in store.list_tables()

    def test_create_table_again_is_a_no_op_keeping_data(
        self, store: TableStore, table: str
    ) -> None:
        store.apply(fill(table, [b"r"]))
        store.create_table(TableSpec(table, FAMILIES))
        assert store.get(table, b"r") == {b"f:a": b"r"}

    def test_create_table_with_other_families_is_refused(
        self, store: TableStore, table: str
    ) -> None:
        with pytest.raises(TableSpecConflict):
            store.create_table(TableSpec(table, ("f", "other")))

    def test_dropped_table_is_gone_with_its_data(self, store: TableStore, table: str) -> None:
        store.apply(fill(table, [b"r"]))
        store.drop_table(table)
        assert not store.table_exists(table)
        store.create_table(TableSpec(table, FAMILIES))
        assert store.get(table, b"r") == {}

    def test_dropping_a_missing_table_is_a_no_op(self, store: TableStore) -> None:
        store.drop_table(unique_name())

    def test_blue_green_names_are_tables_of_their_own(
        self, store: TableStore, new_table: NewTable
    ) -> None:
        blue, green = new_table(suffix="__b1"), new_table(suffix="__b2")
        store.apply([Put(blue, b"r", b"f:a", b"blue", 1), Put(green, b"r", b"f:a", b"green", 1)])
        assert store.get(blue, b"r") == {b"f:a": b"blue"}
        assert store.get(green, b"r") == {b"f:a": b"green"}

    def test_writing_to_a_missing_table_is_refused(self, store: TableStore) -> None:
        with pytest.raises(TableNotFound):
            store.apply(fill(unique_name(), [b"r"]))

    def test_reading_a_missing_table_is_refused(self, store: TableStore) -> None:
        name = unique_name()
        with pytest.raises(TableNotFound):
            store.get(name, b"r")
        with pytest.raises(TableNotFound):
            list(store.scan(name))

    def test_unknown_family_is_refused_and_nothing_is_written(
        self, store: TableStore, table: str
    ) -> None:
        with pytest.raises(UnknownFamily):
            store.apply([Put(table, b"r", b"f:a", b"v", 1), Put(table, b"r", b"x:a", b"v", 1)])
        assert store.get(table, b"r") == {}
        with pytest.raises(UnknownFamily):
            store.get(table, b"r", [b"x:a"])

    def test_malformed_mutations_are_refused(self) -> None:
        with pytest.raises(InvalidMutation, match="row"):
            Put("t", b"", b"f:a", b"v", 1)
        with pytest.raises(InvalidMutation, match="column"):
            Put("t", b"r", b"no-family", b"v", 1)
        with pytest.raises(InvalidMutation, match="value"):
            Put("t", b"r", b"f:a", "text", 1)  # type: ignore[arg-type]
        with pytest.raises(InvalidMutation, match="version"):
            DeleteRow("t", b"r", -1)

    # -- puts and versions -------------------------------------------------------------------

    def test_missing_row_reads_as_empty(self, store: TableStore, table: str) -> None:
        assert store.get(table, b"nothing") == {}
        assert store.get_cells(table, b"nothing") == {}

    def test_put_is_read_back_with_its_version(self, store: TableStore, table: str) -> None:
        store.apply([Put(table, b"r", b"f:a", b"v", 7), Put(table, b"r", b"g:", b"w", 8)])
        assert store.get(table, b"r") == {b"f:a": b"v", b"g:": b"w"}
        assert store.get_cells(table, b"r") == {b"f:a": (b"v", 7), b"g:": (b"w", 8)}

    def test_empty_batch_is_a_no_op(self, store: TableStore, table: str) -> None:
        store.apply([])
        assert table_digest(store, table).rows == 0

    def test_binary_keys_and_values_round_trip(self, store: TableStore, table: str) -> None:
        row, column, value = b"\x00\xff\x80\n", b"f:\x00\xff", bytes(range(256))
        store.apply([Put(table, row, column, value, 1)])
        assert store.get(table, row) == {column: value}

    def test_newest_version_wins_whatever_the_arrival_order(
        self, store: TableStore, table: str
    ) -> None:
        store.apply([Put(table, b"r", b"f:a", b"v5", 5), Put(table, b"r", b"f:b", b"v3", 3)])
        store.apply([Put(table, b"r", b"f:a", b"v3", 3), Put(table, b"r", b"f:b", b"v5", 5)])
        assert store.get_cells(table, b"r") == {b"f:a": (b"v5", 5), b"f:b": (b"v5", 5)}

    def test_same_version_put_again_last_write_wins(self, store: TableStore, table: str) -> None:
        store.apply([Put(table, b"r", b"f:a", b"first", 4)])
        store.apply([Put(table, b"r", b"f:a", b"second", 4)])
        assert store.get_cells(table, b"r") == {b"f:a": (b"second", 4)}

    def test_same_version_in_one_batch_last_write_wins(self, store: TableStore, table: str) -> None:
        store.apply([Put(table, b"r", b"f:a", b"first", 4), Put(table, b"r", b"f:a", b"last", 4)])
        assert store.get(table, b"r") == {b"f:a": b"last"}

    def test_identical_put_again_changes_nothing(self, store: TableStore, table: str) -> None:
        store.apply(fill(table, [b"r", b"s"]))
        before = table_digest(store, table)
        store.apply(fill(table, [b"r", b"s"]))
        assert table_digest(store, table) == before

    def test_get_selects_columns_and_families(self, store: TableStore, table: str) -> None:
        store.apply(
            [
                Put(table, b"r", b"f:a", b"1", 1),
                Put(table, b"r", b"f:b", b"2", 1),
                Put(table, b"r", b"g:c", b"3", 1),
            ]
        )
        assert store.get(table, b"r", [b"f:b"]) == {b"f:b": b"2"}
        assert store.get(table, b"r", [b"f:"]) == {b"f:a": b"1", b"f:b": b"2"}
        assert store.get(table, b"r", [b"g:", b"f:a"]) == {b"f:a": b"1", b"g:c": b"3"}
        assert store.get(table, b"r", [b"f:zz"]) == {}

    # -- deletes -----------------------------------------------------------------------------

    def test_delete_column_hides_versions_up_to_its_own(
        self, store: TableStore, table: str
    ) -> None:
        store.apply([Put(table, b"r", b"f:a", b"v", 3), Put(table, b"r", b"f:b", b"w", 3)])
        store.apply([DeleteColumn(table, b"r", b"f:a", 3)])
        assert store.get(table, b"r") == {b"f:b": b"w"}

    def test_delete_column_keeps_a_newer_put(self, store: TableStore, table: str) -> None:
        store.apply([Put(table, b"r", b"f:a", b"old", 2), Put(table, b"r", b"f:a", b"new", 7)])
        store.apply([DeleteColumn(table, b"r", b"f:a", 5)])
        assert store.get_cells(table, b"r") == {b"f:a": (b"new", 7)}

    def test_delete_column_hides_a_later_put_with_an_older_or_equal_version(
        self, store: TableStore, table: str
    ) -> None:
        store.apply([DeleteColumn(table, b"r", b"f:a", 5)])
        store.apply([Put(table, b"r", b"f:a", b"late", 5), Put(table, b"r", b"f:a", b"older", 2)])
        assert store.get(table, b"r") == {}

    def test_put_newer_than_a_delete_column_is_visible(self, store: TableStore, table: str) -> None:
        store.apply([Put(table, b"r", b"f:a", b"v", 1), DeleteColumn(table, b"r", b"f:a", 5)])
        store.apply([Put(table, b"r", b"f:a", b"back", 6)])
        assert store.get_cells(table, b"r") == {b"f:a": (b"back", 6)}

    def test_delete_row_hides_every_cell_up_to_its_version(
        self, store: TableStore, table: str
    ) -> None:
        store.apply([Put(table, b"r", b"f:a", b"1", 1), Put(table, b"r", b"g:b", b"2", 2)])
        store.apply([DeleteRow(table, b"r", 2)])
        assert store.get(table, b"r") == {}
        assert self.keys(store, table) == []

    def test_delete_row_keeps_newer_cells(self, store: TableStore, table: str) -> None:
        store.apply([Put(table, b"r", b"f:a", b"1", 1), Put(table, b"r", b"f:b", b"9", 9)])
        store.apply([DeleteRow(table, b"r", 5)])
        assert store.get_cells(table, b"r") == {b"f:b": (b"9", 9)}

    def test_delete_row_hides_late_puts_with_older_versions(
        self, store: TableStore, table: str
    ) -> None:
        store.apply([DeleteRow(table, b"r", 5)])
        store.apply([Put(table, b"r", b"f:a", b"late", 5), Put(table, b"r", b"g:b", b"late", 1)])
        assert store.get(table, b"r") == {}
        assert self.keys(store, table) == []

    def test_delete_row_then_newer_put_of_another_column_shows_only_that_column(
        self, store: TableStore, table: str
    ) -> None:
        store.apply([Put(table, b"r", b"f:a", b"1", 1), Put(table, b"r", b"f:b", b"2", 2)])
        store.apply([DeleteRow(table, b"r", 2)])
        store.apply([Put(table, b"r", b"g:c", b"3", 3)])
        assert store.get_cells(table, b"r") == {b"g:c": (b"3", 3)}

    def test_deletes_only_touch_their_own_row_and_table(
        self, store: TableStore, new_table: NewTable
    ) -> None:
        one, two = new_table(), new_table()
        store.apply(fill(one, [b"r", b"s"]) + fill(two, [b"r"]))
        store.apply([DeleteRow(one, b"r", 9), DeleteColumn(one, b"s", b"f:b", 9)])
        assert self.keys(store, one) == [b"s"]
        assert store.get(two, b"r") == {b"f:a": b"r"}

    def test_delete_and_put_in_one_batch_obey_versions_not_order(
        self, store: TableStore, table: str
    ) -> None:
        store.apply([Put(table, b"r", b"f:a", b"new", 6), DeleteRow(table, b"r", 5)])
        store.apply([DeleteRow(table, b"s", 5), Put(table, b"s", b"f:a", b"old", 4)])
        assert store.get(table, b"r") == {b"f:a": b"new"}
        assert store.get(table, b"s") == {}

    def test_a_batch_may_span_tables(self, store: TableStore, new_table: NewTable) -> None:
        one, two = new_table(), new_table(families=("x",))
        store.apply([Put(one, b"r", b"f:a", b"1", 1), Put(two, b"r", b"x:y", b"2", 1)])
        assert store.get(one, b"r") == {b"f:a": b"1"}
        assert store.get(two, b"r") == {b"x:y": b"2"}

    def test_reapplying_a_batch_gives_identical_digests(
        self, store: TableStore, table: str
    ) -> None:
        batch: list[Mutation] = [
            Put(table, b"r", b"f:a", b"1", 1),
            Put(table, b"r", b"f:b", b"2", 2),
            DeleteColumn(table, b"r", b"f:a", 1),
            DeleteRow(table, b"s", 3),
            Put(table, b"s", b"g:c", b"4", 4),
            Put(table, b"t", b"g:c", b"5", 5),
        ]
        store.apply(batch)
        first = table_digest(store, table)
        for _ in range(3):
            store.apply(batch)
            assert table_digest(store, table) == first
        assert first.rows == 3 and first.cells == 3

    # -- scans -------------------------------------------------------------------------------

    ROWS = b"\x00 a ab abc ac b b\x00 b\xff \x7f \x80 \xff".split()

    @pytest.fixture
    def rows(self, store: TableStore, table: str) -> str:
        store.apply(fill(table, self.ROWS))
        return table

    def test_scan_returns_rows_in_unsigned_byte_order(self, store: TableStore, rows: str) -> None:
        assert self.keys(store, rows) == sorted(self.ROWS)
        assert list(store.scan(rows, prefix=b"ab")) == [
            (b"ab", {b"f:a": b"ab"}),
            (b"abc", {b"f:a": b"abc"}),
        ]

    def test_scan_by_prefix(self, store: TableStore, rows: str) -> None:
        assert self.keys(store, rows, prefix=b"a") == [b"a", b"ab", b"abc", b"ac"]
        assert self.keys(store, rows, prefix=b"b") == [b"b", b"b\x00", b"b\xff"]
        assert self.keys(store, rows, prefix=b"\xff") == [b"\xff"]
        assert self.keys(store, rows, prefix=b"zz") == []

    def test_scan_start_is_inclusive_and_stop_exclusive(self, store: TableStore, rows: str) -> None:
        assert self.keys(store, rows, start=b"ab", stop=b"b\x00") == [b"ab", b"abc", b"ac", b"b"]
        assert self.keys(store, rows, start=b"b\xff") == [b"b\xff", b"\x7f", b"\x80", b"\xff"]
        assert self.keys(store, rows, stop=b"a") == [b"\x00"]
        assert self.keys(store, rows, start=b"b", stop=b"b") == []
        assert self.keys(store, rows, start=b"c", stop=b"b") == []

    def test_prefix_and_bounds_intersect(self, store: TableStore, rows: str) -> None:
        assert self.keys(store, rows, prefix=b"a", start=b"ab", stop=b"ac") == [b"ab", b"abc"]
        assert self.keys(store, rows, prefix=b"a", start=b"0") == [b"a", b"ab", b"abc", b"ac"]

    def test_empty_bounds_are_no_bounds(self, store: TableStore, rows: str) -> None:
        assert self.keys(store, rows, prefix=b"", start=b"", stop=b"") == sorted(self.ROWS)
        assert self.keys(store, rows, start=b"", stop=b"", reverse=True, limit=1) == [b"\xff"]

    def test_reverse_scan_is_descending(self, store: TableStore, rows: str) -> None:
        assert self.keys(store, rows, reverse=True) == sorted(self.ROWS, reverse=True)
        assert self.keys(store, rows, prefix=b"a", reverse=True) == [b"ac", b"abc", b"ab", b"a"]

    def test_reverse_scan_start_is_the_high_bound_inclusive_stop_the_low_exclusive(
        self, store: TableStore, rows: str
    ) -> None:
        got = self.keys(store, rows, start=b"b", stop=b"ab", reverse=True)
        assert got == [b"b", b"ac", b"abc"]
        assert self.keys(store, rows, start=b"a", reverse=True) == [b"a", b"\x00"]
        assert self.keys(store, rows, stop=b"\x7f", reverse=True) == [b"\xff", b"\x80"]
        assert self.keys(store, rows, prefix=b"b", start=b"b\x00", reverse=True) == [
            b"b\x00",
            b"b",
        ]

    def test_scan_limit_counts_rows(self, store: TableStore, rows: str) -> None:
        assert self.keys(store, rows, limit=2) == [b"\x00", b"a"]
        assert self.keys(store, rows, prefix=b"a", reverse=True, limit=2) == [b"ac", b"abc"]
        assert self.keys(store, rows, limit=100) == sorted(self.ROWS)

    def test_scan_selects_columns_and_skips_rows_without_them(
        self, store: TableStore, table: str
    ) -> None:
        store.apply(
            [
                Put(table, b"1", b"f:a", b"1a", 1),
                Put(table, b"1", b"g:b", b"1b", 1),
                Put(table, b"2", b"f:a", b"2a", 1),
                Put(table, b"3", b"g:b", b"3b", 1),
                Put(table, b"3", b"g:c", b"3c", 1),
            ]
        )
        assert list(store.scan(table, columns=[b"g:b"])) == [
            (b"1", {b"g:b": b"1b"}),
            (b"3", {b"g:b": b"3b"}),
        ]
        assert list(store.scan(table, columns=[b"g:"], limit=1, reverse=True)) == [
            (b"3", {b"g:b": b"3b", b"g:c": b"3c"})
        ]

    def test_scan_cells_give_versions(self, store: TableStore, table: str) -> None:
        store.apply([Put(table, b"r", b"f:a", b"v", 4), Put(table, b"r", b"g:b", b"w", 9)])
        assert list(store.scan_cells(table)) == [(b"r", {b"f:a": (b"v", 4), b"g:b": (b"w", 9)})]

    def test_scan_of_an_empty_table_is_empty(self, store: TableStore, table: str) -> None:
        assert list(store.scan(table)) == []
        assert list(store.scan(table, reverse=True, limit=5)) == []

    def test_long_scans_of_wide_rows_lose_nothing(self, store: TableStore, table: str) -> None:
        width = {i: 1 + (i * 37) % 23 + (400 if i % 97 == 0 else 0) for i in range(1200)}
        store.apply(
            Put(table, b"row%05d" % i, b"f:c%04d" % c, b"%d" % c, 1)
            for i, n in width.items()
            for c in range(n)
        )
        forward = [(row, len(cells)) for row, cells in store.scan(table)]
        assert forward == [(b"row%05d" % i, n) for i, n in sorted(width.items())]
        backward = [(row, len(cells)) for row, cells in store.scan(table, reverse=True, limit=300)]
        assert backward == forward[::-1][:300]
        assert table_digest(store, table).cells == sum(width.values())

    def test_writing_while_scanning_is_allowed(self, store: TableStore, table: str) -> None:
        store.apply(fill(table, [b"k%04d" % i for i in range(600)]))
        seen = []
        for row, _ in store.scan(table, prefix=b"k"):
            seen.append(row)
            if len(seen) % 100 == 0:
                store.apply([Put(table, b"z" + row, b"f:a", b"new", 2)])
        assert seen == [b"k%04d" % i for i in range(600)]

    # -- digests and diffs -------------------------------------------------------------------

    def test_empty_table_digest(self, store: TableStore, table: str) -> None:
        assert table_digest(store, table) == TableDigest(
            rows=0,
            cells=0,
            sha256="e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        )

    def test_digest_counts_visible_rows_and_cells(self, store: TableStore, table: str) -> None:
        store.apply(fill(table, [b"a", b"b", b"c"]) + [Put(table, b"a", b"g:x", b"", 1)])
        store.apply([DeleteRow(table, b"c", 1)])
        digest = table_digest(store, table)
        assert (digest.rows, digest.cells) == (2, 3)

    def test_digest_sees_versions(self, store: TableStore, new_table: NewTable) -> None:
        one, two = new_table(), new_table()
        store.apply([Put(one, b"r", b"f:a", b"v", 1), Put(two, b"r", b"f:a", b"v", 2)])
        assert table_digest(store, one) != table_digest(store, two)

    def test_same_cells_written_in_any_order_give_equal_tables(
        self, store: TableStore, new_table: NewTable
    ) -> None:
        one, two = new_table(), new_table()
        for table in (one, two):
            batch: list[Mutation] = [
                Put(table, b"r", b"f:a", b"1", 1),
                Put(table, b"r", b"f:a", b"2", 2),
                DeleteColumn(table, b"r", b"f:b", 3),
                Put(table, b"s", b"g:c", b"3", 3),
            ]
            for m in batch if table == one else reversed(batch):
                store.apply([m])
        assert table_digest(store, one) == table_digest(store, two)
        assert diff_tables(store, one, store, two) == []

    def test_diff_names_rows_columns_values_and_versions(
        self, store: TableStore, new_table: NewTable
    ) -> None:
        one, two = new_table(), new_table()
        store.apply(
            [
                Put(one, b"only-a", b"f:a", b"x", 1),
                Put(two, b"only-b", b"f:a", b"x", 1),
                Put(one, b"r", b"f:a", b"same", 1),
                Put(two, b"r", b"f:a", b"same", 2),
                Put(one, b"r", b"f:b", b"mine", 1),
                Put(two, b"r", b"f:b", b"yours", 1),
                Put(one, b"r", b"g:c", b"x", 1),
            ]
        )
        diffs = diff_tables(store, one, store, two)
        assert len(diffs) == 5
        assert "only-a" in diffs[0] and "only in a" in diffs[0]
        assert "only-b" in diffs[1] and "only in b" in diffs[1]
        assert "f:a" in diffs[2] and "version 1" in diffs[2] and "2" in diffs[2]
        assert "mine" in diffs[3] and "yours" in diffs[3]
        assert "g:c" in diffs[4] and "only in a" in diffs[4]

    def test_diff_stops_at_max_diffs(self, store: TableStore, new_table: NewTable) -> None:
        one, two = new_table(), new_table()
        store.apply(fill(one, [b"%03d" % i for i in range(50)]))
        assert len(diff_tables(store, one, store, two)) == 20
        assert len(diff_tables(store, one, store, two, max_diffs=3)) == 3

    # -- the property: final state depends on versions, never on order or repetition ---------

    # Each adapter's subclass runs this one method: differing executors are the point here;
    # the fixtures give one table per test, and each example writes under fresh row keys.
    @settings(
        deadline=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.differing_executors,
        ],
    )
    @given(data=st.data())
    def test_any_order_and_any_repetition_give_the_same_table(
        self, store: TableStore, table: str, data: st.DataObject
    ) -> None:
        script = data.draw(mutation_scripts())
        repeats = data.draw(st.lists(st.sampled_from(script))) if script else []
        replay = data.draw(st.permutations(script + repeats))
        cuts = sorted(data.draw(st.lists(st.integers(0, len(replay)), max_size=4)))
        run = uuid.uuid4().hex.encode()
        once, shuffled = run + b"/once/", run + b"/shuffled/"

        store.apply(at(table, once, script))
        for lo, hi in zip([0, *cuts], [*cuts, len(replay)], strict=True):
            store.apply(at(table, shuffled, replay[lo:hi]))

        expected = visible_cells(script)
        assert read_under(store, table, once) == expected
        assert read_under(store, table, shuffled) == expected


# -- the property's model -------------------------------------------------------------------

ScriptStep = tuple[str, bytes, bytes, bytes, int]  # kind, row, column, value, version


@st.composite
def mutation_scripts(draw: st.DrawFn) -> list[ScriptStep]:
    """Mutations over a few rows, columns and versions; puts of one (row, column, version)
    always carry the same value (otherwise arrival order would rightly matter)."""
    steps = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["put", "put", "put", "delete_column", "delete_row"]),
                st.sampled_from([b"r1", b"r2", b"r3"]),
                st.sampled_from([b"f:a", b"f:b", b"g:c"]),
                st.sampled_from([b"x", b"y", b""]),
                st.integers(0, 6),
            ),
            max_size=30,
        )
    )
    first_value: dict[tuple[bytes, bytes, int], bytes] = {}
    script = []
    for kind, row, column, value, version in steps:
        if kind == "put":
            value = first_value.setdefault((row, column, version), value)
        script.append((kind, row, column, value, version))
    return script


def at(table: str, prefix: bytes, script: Sequence[ScriptStep]) -> list[Mutation]:
    out: list[Mutation] = []
    for kind, row, column, value, version in script:
        if kind == "put":
            out.append(Put(table, prefix + row, column, value, version))
        elif kind == "delete_column":
            out.append(DeleteColumn(table, prefix + row, column, version))
        else:
            out.append(DeleteRow(table, prefix + row, version))
    return out


def visible_cells(script: Sequence[ScriptStep]) -> dict[bytes, Cells]:
    """HBase's rule, naively: the newest put of a cell, unless a delete covers its version."""
    newest: dict[tuple[bytes, bytes], tuple[bytes, int]] = {}
    column_tomb: dict[tuple[bytes, bytes], int] = {}
    row_tomb: dict[bytes, int] = {}
    for kind, row, column, value, version in script:
        if kind == "put":
            if (row, column) not in newest or version >= newest[row, column][1]:
                newest[row, column] = (value, version)
        elif kind == "delete_column":
            column_tomb[row, column] = max(version, column_tomb.get((row, column), -1))
        else:
            row_tomb[row] = max(version, row_tomb.get(row, -1))
    rows: dict[bytes, Cells] = {}
    for (row, column), (value, version) in sorted(newest.items()):
        if version > max(column_tomb.get((row, column), -1), row_tomb.get(row, -1)):
            rows.setdefault(row, {})[column] = (value, version)
    return rows


def read_under(store: TableStore, table: str, prefix: bytes) -> dict[bytes, Cells]:
    return {row[len(prefix) :]: cells for row, cells in store.scan_cells(table, prefix=prefix)}
