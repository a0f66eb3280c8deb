"""What a reader reads when it does not read the live tables: a named view (tables built up
to a log position by ``ProjectionHost.build_view``, kept beside the live ones under
``view_physical``'s names and listed in the ``VIEWS`` table), or an in-memory fold of the
log up to a position (``ProjectionHost.as_of``), which has no catalog."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from projections import names as n
from projections.tablestore import TableSpec, TableStore

VIEWS = TableSpec(n.VIEWS, (n.F_VIEW,), split_by_salt=False)
V_POSITION = n.V_POSITION
V_PROJECTIONS = n.V_PROJECTIONS
VIEW_NAME = re.compile(r"^[A-Za-z0-9]{1,40}$")


def view_physical(view: str) -> Callable[[str], str]:
    """The physical table of ``logical`` in the read-only view ``view``."""
    return lambda logical: f"{logical}__v_{view}"


class ReadView:
    """Tables to read as they were at ``position``: a named view, or an in-memory fold."""

    def __init__(self, tables: TableStore, physical: Callable[[str], str], position: int,
                 catalog: Any) -> None:
        self.tables = tables
        self.physical = physical
        self.catalog = catalog
        self._position = position

    def position(self) -> int:
        return self._position


class NoCatalog:
    """The catalog of a fold: nothing to refresh, its tables never switch."""

    def refresh(self) -> bool:
        return False
