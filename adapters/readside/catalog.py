"""The catalog of a table store: which physical table readers use for each logical one.

A small table in the table store itself; a rebuild writes fresh physical tables and switches
the catalog in one ``apply`` (atomic in SQLite; per row in HBase, where it is one row), so
readers never see a half-built table.
"""

from __future__ import annotations

from collections.abc import Iterable

from projections import names as n
from projections.tablestore import Put, TableSpec, TableStore

CATALOG = TableSpec(n.CATALOG, (n.F_CATALOG,), split_by_salt=False)
CAT_PHYSICAL = n.CAT_PHYSICAL
CAT_GENERATION_ROW = n.CAT_GENERATION_ROW
CAT_GENERATION = n.CAT_GENERATION


class Catalog:
    """Logical table name → physical table name, stored in the table store itself."""

    def __init__(self, store: TableStore) -> None:
        self.store = store
        store.create_table(CATALOG)
        self._map: dict[str, str] = {}
        self.generation = -1

    def refresh(self) -> bool:
        """Reloads the mapping if another process switched it; True when it changed."""
        row = self.store.get(CATALOG.name, CAT_GENERATION_ROW, [CAT_GENERATION])
        generation = int(row.get(CAT_GENERATION, b"0"))
        if generation == self.generation:
            return False
        self._map = {
            r.decode(): cells[CAT_PHYSICAL].decode()
            for r, cells in self.store.scan(CATALOG.name, columns=[CAT_PHYSICAL])
            if r != CAT_GENERATION_ROW
        }
        self.generation = generation
        return True

    def physical(self, logical: str) -> str:
        return self._map.get(logical, logical)

    def switch(self, mapping: dict[str, str], extra: Iterable[Put] = ()) -> int:
        """Points readers at new physical tables, all in one apply."""
        self.refresh()
        generation = self.generation + 1
        batch = [Put(CATALOG.name, k.encode(), CAT_PHYSICAL, v.encode(), generation)
                 for k, v in mapping.items()]
        batch.append(Put(CATALOG.name, CAT_GENERATION_ROW, CAT_GENERATION,
                         b"%d" % generation, generation))
        batch.extend(extra)
        self.store.apply(batch)
        self.refresh()
        return generation
