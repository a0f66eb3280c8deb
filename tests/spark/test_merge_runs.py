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
        runs = _mutations(seed)
        whole = SqliteTableStore(tmp_path / f"whole-{seed}.sqlite")
        whole.create_table(SPEC)
        paths = []
        for i, mutations in enumerate(runs):
            whole.apply(mutations)  # type: ignore[arg-type]
            path = tmp_path / f"run-{seed}-{i}.sqlite"
            run = SqliteTableStore(path)
            run.create_table(SPEC)
            run.apply(mutations)  # type: ignore[arg-type]
            run.close()
            paths.append(path)
        merged = SqliteTableStore(tmp_path / f"merged-{seed}.sqlite")
        merged.create_table(SPEC)
        merged.merge_runs(paths, {"t": "t"})
        assert table_digest(merged, "t") == table_digest(whole, "t"), seed
        assert table_digest(merged, "t").cells > 0
