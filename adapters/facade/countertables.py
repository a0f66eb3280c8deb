"""The embedded ``tables.sqlite`` opened read only for the quota ledger's snapshots
(``quota.TablesSnapshot``) by a process that keeps no read models (``letterlog lda``): a
host of the current tables whose position is the one tracking says they reflect."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters.readside.catalog import Catalog
from adapters.startup.current import CurrentTables, tracked_position
from adapters.tables.sqlite import SqliteTableStore


def open_counters(path: Path) -> Any:
    """The read models in ``path``, read only, as ``quota.counters_snapshot`` reads them."""
    # a writer holding tables.sqlite (a rebuild, a long report) must not delay mail:
    # refused at once, the usage is then folded from the log
    tables = SqliteTableStore(path, busy_timeout=0.05)
    catalog = Catalog(tables)
    catalog.refresh()
    host = CurrentTables(tables, catalog, 0)
    host.live = True  # type: ignore[attr-defined]
    host.position = lambda: tracked_position(tables, catalog.physical)  # type: ignore[method-assign]
    return host
