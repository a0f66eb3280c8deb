"""The table store port: HBase's data model, with HBase's version and delete semantics.

A table holds rows (byte keys, kept in unsigned byte order); a row holds cells named by a
column ``b"family:qualifier"``; every write carries an explicit ``version`` (HBase's cell
timestamp; letterlog uses the global log position of the event that decided the value).

Semantics every adapter implements (``tests/contracts/tablestore_contract.py`` proves them):

* A reader sees, per column, the put with the highest version that no delete hides, whatever
  order the mutations arrived in.
* Two puts of the same cell and version: the later write wins (re-applying it is a no-op).
* ``DeleteColumn(v)`` hides every version <= v of one cell and ``DeleteRow(v)`` every cell
  of the row with version <= v -- *including puts that arrive after the delete* with a
  version <= v. A put with a higher version is visible again.
* A row none of whose cells is visible does not exist (``get`` gives ``{}``, scans skip it).
* One ``apply`` call is one atomic batch per row (the SQLite adapter: atomic as a whole).

Real HBase keeps the "late put stays hidden" rule only until a major compaction drops the
delete markers (``hbase.hstore.time.to.purge.deletes``, ``KEEP_DELETED_CELLS``); an HBase
adapter has to account for that window. Embedded adapters keep tombstones forever.

Together these make the idempotence rule (ADR 0006) hold: re-applying any batch, any number
of times, leaves the digest of every table unchanged.

The values (mutations, specs, ranges, errors) are in ``tablemodel``, re-exported here; what
some stores do beside the port (bulk loads, compaction, ...) is in ``capabilities``.

Nothing here imports a client library; adapters live in ``adapters/``.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Protocol

from projections.capabilities import BulkLoading
from projections.tablemodel import (
    MAX_ROW_KEY,
    MAX_VERSION,
    CellRecord,
    Cells,
    DeleteColumn,
    DeleteRow,
    InvalidMutation,
    KeyRange,
    Mutation,
    Put,
    Row,
    StoreClosed,
    TableLoad,
    TableNotFound,
    TableSpec,
    TableSpecConflict,
    TableStoreError,
    TableStoreUnavailable,
    TombRecord,
    UnknownFamily,
    family_of,
    hidden,
    is_family_filter,
    key_range,
    prefix_stop,
    replaces,
    validate_table_name,
)

__all__ = ["BulkLoading", "CellRecord", "Cells", "DeleteColumn", "DeleteRow", "InvalidMutation",
           "KeyRange", "MAX_ROW_KEY", "MAX_VERSION", "Mutation", "Put", "Row", "StoreClosed",
           "TableDigest", "TableLoad", "TableNotFound", "TableSpec", "TableSpecConflict",
           "TableStore", "TableStoreError", "TableStoreUnavailable", "TombRecord",
           "UnknownFamily", "ValuesFromCells", "diff_tables", "family_of", "hidden",
           "is_family_filter", "key_range", "prefix_stop", "replaces", "table_digest",
           "validate_table_name"]


# -- the port ---------------------------------------------------------------------------------



class TableStore(Protocol):
    """HBase-shaped tables. Adapters: ``adapters.tables.sqlite``, ``adapters.tables.memory``."""

    def create_table(self, spec: TableSpec) -> None:
        """Create the table; a no-op if it exists with the same families
        (``TableSpecConflict`` if it exists with other families)."""

    def drop_table(self, name: str) -> None:
        """Drop the table and all its data; a no-op if it does not exist."""

    def table_exists(self, name: str) -> bool: ...

    def list_tables(self) -> list[str]:
        """Names of all tables, sorted."""

    def apply(self, mutations: Iterable[Mutation]) -> None:
        """Write a batch (may span tables). All mutations of one row are applied atomically,
        and re-applying a batch changes nothing. Raises ``TableNotFound`` / ``UnknownFamily``
        before writing anything if a mutation names a missing table or family."""

    def get(self, table: str, row: bytes, columns: Sequence[bytes] | None = None) -> Row:
        """The newest visible value of each column of ``row`` ({} if none).

        ``columns`` may name whole families (``b"meta:"``) or single columns."""

    def get_cells(self, table: str, row: bytes, columns: Sequence[bytes] | None = None) -> Cells:
        """Like ``get`` with each value's version: ``{column: (value, version)}``."""

    def scan(
        self,
        table: str,
        *,
        prefix: bytes | None = None,
        start: bytes | None = None,
        stop: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
        columns: Sequence[bytes] | None = None,
    ) -> Iterator[tuple[bytes, Row]]:
        """Rows in row-key byte order, each with its visible columns in column order.

        Forward: ``start <= row < stop``. Reversed (descending), as in HBase reversed scans:
        ``start`` is the *high* bound, inclusive, and ``stop`` the *low* bound, exclusive,
        so ``scan(t, start=b"m", stop=b"c", reverse=True)`` yields ``m`` ... down to just
        above ``c``. ``prefix`` intersects with both; an empty ``start``, ``stop`` or
        ``prefix`` is no bound at all. ``limit`` counts rows. A row with no
        visible cell among ``columns`` is skipped. Each row is read atomically; the scan as
        a whole is not a snapshot."""

    def scan_cells(
        self,
        table: str,
        *,
        prefix: bytes | None = None,
        start: bytes | None = None,
        stop: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
        columns: Sequence[bytes] | None = None,
    ) -> Iterator[tuple[bytes, Cells]]:
        """Like ``scan`` with each value's version (HBase ``include_timestamp``)."""

    def close(self) -> None: ...




class ValuesFromCells:
    """``get`` and ``scan`` for a store that implements ``get_cells`` and ``scan_cells``:
    the same rows with the versions dropped."""

    def get(self, table: str, row: bytes, columns: Sequence[bytes] | None = None) -> Row:
        return {c: v for c, (v, _) in self.get_cells(table, row, columns).items()}

    def scan(
        self,
        table: str,
        *,
        prefix: bytes | None = None,
        start: bytes | None = None,
        stop: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
        columns: Sequence[bytes] | None = None,
    ) -> Iterator[tuple[bytes, Row]]:
        found = self.scan_cells(table, prefix=prefix, start=start, stop=stop, reverse=reverse,
                                limit=limit, columns=columns)
        return ((key, {c: v for c, (v, _) in cells.items()}) for key, cells in found)

    def get_cells(self, table: str, row: bytes, columns: Sequence[bytes] | None = None) -> Cells:
        raise NotImplementedError

    def scan_cells(
        self,
        table: str,
        *,
        prefix: bytes | None = None,
        start: bytes | None = None,
        stop: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
        columns: Sequence[bytes] | None = None,
    ) -> Iterator[tuple[bytes, Cells]]:
        raise NotImplementedError


# -- helpers over the port --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TableDigest:
    """What a table holds, in one comparable value: counts and a SHA-256 of every visible
    (row, column, value, version) in scan order."""

    rows: int
    cells: int
    sha256: str


_LEN = struct.Struct(">I")
_VERSION = struct.Struct(">q")


def table_digest(store: TableStore, table: str) -> TableDigest:
    """Digest of a table's visible contents; equal digests mean cell-for-cell equal tables."""
    h = hashlib.sha256()
    rows = cells = 0
    for row, row_cells in store.scan_cells(table):
        rows += 1
        for column in sorted(row_cells):
            value, version = row_cells[column]
            cells += 1
            for part in (row, column, value):
                h.update(_LEN.pack(len(part)))
                h.update(part)
            h.update(_VERSION.pack(version))
    return TableDigest(rows=rows, cells=cells, sha256=h.hexdigest())


def _show(data: bytes, width: int = 60) -> str:
    text = repr(data)
    return text if len(text) <= width else text[: width - 3] + "..."


def _row_diffs(label_a: str, label_b: str, row: bytes, a: Cells, b: Cells) -> Iterator[str]:
    for column in sorted(a.keys() | b.keys()):
        where = f"row {_show(row)} column {_show(column)}"
        if column not in b:
            yield f"{where}: only in {label_a} ({_show(a[column][0])} @ {a[column][1]})"
        elif column not in a:
            yield f"{where}: only in {label_b} ({_show(b[column][0])} @ {b[column][1]})"
        elif a[column][0] != b[column][0]:
            yield (
                f"{where}: value {_show(a[column][0])} in {label_a}, "
                f"{_show(b[column][0])} in {label_b}"
            )
        elif a[column][1] != b[column][1]:
            yield f"{where}: version {a[column][1]} in {label_a}, {b[column][1]} in {label_b}"


def _diffs(store_a: TableStore, table_a: str, store_b: TableStore, table_b: str) -> Iterator[str]:
    label_a, label_b = f"a:{table_a}", f"b:{table_b}"
    rows_a, rows_b = store_a.scan_cells(table_a), store_b.scan_cells(table_b)
    next_a, next_b = next(rows_a, None), next(rows_b, None)
    while next_a is not None or next_b is not None:
        if next_b is None or (next_a is not None and next_a[0] < next_b[0]):
            assert next_a is not None
            yield f"row {_show(next_a[0])}: only in {label_a} ({len(next_a[1])} cells)"
            next_a = next(rows_a, None)
        elif next_a is None or next_b[0] < next_a[0]:
            yield f"row {_show(next_b[0])}: only in {label_b} ({len(next_b[1])} cells)"
            next_b = next(rows_b, None)
        else:
            yield from _row_diffs(label_a, label_b, next_a[0], next_a[1], next_b[1])
            next_a, next_b = next(rows_a, None), next(rows_b, None)


def diff_tables(
    store_a: TableStore, table_a: str, store_b: TableStore, table_b: str, max_diffs: int = 20
) -> list[str]:
    """Human-readable differences between two tables (rows, columns, values, versions),
    in row order, at most ``max_diffs`` of them; [] when the tables are equal."""
    return list(islice(_diffs(store_a, table_a, store_b, table_b), max_diffs))
