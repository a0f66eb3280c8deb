"""``SqliteTableStore.merge_runs`` (the Spark rebuild's load into SQLite): runs holding puts,
column deletes and row deletes across each other merge to what ``apply`` of all of them in
one store gives (the later version and the higher tombstone win). No Spark here."""

from __future__ import annotations

import random
from pathlib import Path

from adapters.tables.sqlite import SqliteTableStore
from projections.tablestore import DeleteColumn, DeleteRow, Put, TableSpec, table_digest

SPEC = TableSpec("t", ("f",), split_by_salt=False)


def _mutations(seed: int) -> list[list[object]]:
    pick = random.Random(seed)
    runs: list[list[object]] = [[] for _ in range(4)]
    for version in range(1, 600):
        run = runs[pick.randrange(4)]
        row = b"r%d" % pick.randrange(12)
        column = b"f:%d" % pick.randrange(5)
        kind = pick.random()
        if kind < 0.7:
            run.append(Put("t", row, column, b"v%d" % version, version))
        elif kind < 0.9:
            run.append(DeleteColumn("t", row, column, version))
        else:
            run.append(DeleteRow("t", row, version))
    return runs


def test_runs_merge_to_what_one_store_applying_everything_holds(tmp_path: Path) -> None:
    for seed in range(5):
        whole, paths = _runs(tmp_path, seed)
        merged = SqliteTableStore(tmp_path / f"merged-{seed}.sqlite")
        merged.create_table(SPEC)
        merged.merge_runs(paths, {"t": "t"})
        assert table_digest(merged, "t") == table_digest(whole, "t"), seed
        assert table_digest(merged, "t").cells > 0


def _runs(tmp_path: Path, seed: int) -> tuple[SqliteTableStore, list[Path]]:
    whole = SqliteTableStore(tmp_path / f"whole-{seed}.sqlite")
    whole.create_table(SPEC)
    paths = []
    for i, mutations in enumerate(_mutations(seed)):
        whole.apply(mutations)  # type: ignore[arg-type]
        path = tmp_path / f"run-{seed}-{i}.sqlite"
        run = SqliteTableStore(path)
        run.create_table(SPEC)
        run.apply(mutations)  # type: ignore[arg-type]
        run.close()
        paths.append(path)
    return whole, paths


def _cells(store: SqliteTableStore) -> list[object]:
    return list(store.scan_cells("t"))  # in key order, every cell at its version


def test_runs_merged_one_call_each_in_any_order_then_once_last(tmp_path: Path) -> None:
    """What the driver does during the job (a run per call, ``last=False``, in the order
    the tasks end) and after it (the rest, or none, with ``last``): the same cells, in the
    same order, none dropped or twice, as one store applying everything."""
    for seed in range(5):
        whole, paths = _runs(tmp_path, seed)
        order = random.Random(seed).sample(paths, len(paths))
        for kept in (len(paths), 2, 0):  # all merged during the job, some, none
            merged = SqliteTableStore(tmp_path / f"merged-{seed}-{kept}.sqlite")
            merged.create_table(SPEC)
            for path in order[:kept]:
                merged.merge_runs([path], {"t": "t"}, last=False)
            merged.merge_runs(order[kept:], {"t": "t"})
            assert _cells(merged) == _cells(whole), (seed, kept)
            assert table_digest(merged, "t") == table_digest(whole, "t"), (seed, kept)


def test_the_first_run_into_an_empty_table_is_copied_whole(tmp_path: Path) -> None:
    """The plain copy into an empty table (``merge_table``): every cell and tombstone of the
    run, at its version, and a second run merged over it still lets the later version and
    the higher tombstone win."""
    whole, paths = _runs(tmp_path, 7)
    first = SqliteTableStore(paths[0])
    merged = SqliteTableStore(tmp_path / "merged.sqlite")
    merged.create_table(SPEC)
    merged.merge_runs(paths[:1], {"t": "t"})
    assert _cells(merged) == _cells(first)
    assert table_digest(merged, "t") == table_digest(first, "t")
    merged.merge_runs(paths[1:], {"t": "t"})
    assert table_digest(merged, "t") == table_digest(whole, "t")


def test_merging_leaves_the_files_durability_and_its_other_tables_alone(
        tmp_path: Path) -> None:
    """The fresh tables share the file with the live ones: the merge changes neither the
    journal (WAL) nor ``synchronous``, and commits what it merged (another connection sees
    it), while a live table's rows stay as they were."""
    _, paths = _runs(tmp_path, 3)
    path = tmp_path / "tables.sqlite"
    store = SqliteTableStore(path, synchronous="FULL")
    store.create_table(SPEC)
    live = TableSpec("live", ("f",), split_by_salt=False)
    store.create_table(live)
    store.apply([Put("live", b"r", b"f:a", b"kept", 1)])
    store.merge_runs(paths[:2], {"t": "t"}, last=False)
    store.merge_runs(paths[2:], {"t": "t"})
    conn = store._conn()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert not conn.in_transaction
    other = SqliteTableStore(path)
    assert table_digest(other, "t") == table_digest(store, "t")
    assert other.get("live", b"r") == {b"f:a": b"kept"}
