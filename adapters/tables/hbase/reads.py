"""HBase reads: ``get_cells`` and paged ``scan_cells`` through Thrift1.

Reads
    ``getRowWithColumns`` and ``scannerOpenWithScan`` + ``scannerGetList``; HBase itself
    hides deleted cells and leaves out rows with nothing visible. Scans read in pages of
    whole rows, each page its own short-lived scanner resumed after the last row seen, so no
    connection or server-side scanner is held while the caller works on a row (writing while
    scanning is fine, and an abandoned iterator leaks nothing). Reversed scans use HBase's
    reversed scanner; bounds HBase cannot express exactly (an inclusive low bound, an
    exclusive high bound) are tightened on the client.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from adapters.tables.hbase.calls import HBaseParts, TableInfo, thrift1
from projections.tablestore import (
    Cells,
    KeyRange,
    UnknownFamily,
    family_of,
    is_family_filter,
    key_range,
)

_FIRST_PAGE = 128
_MAX_PAGE = 1024


class HBaseReads(HBaseParts):
    """Row reads and paged scans (Thrift1)."""

    def _columns(self, table: TableInfo, columns: Sequence[bytes] | None) -> list[bytes] | None:
        """The port's column filter in Thrift1 terms: a family is ``b"family"`` (no colon);
        a column of a family also asked for as a whole is left out (HBase would narrow the
        family to that column)."""
        if columns is None:
            return None
        whole: set[bytes] = set()
        single: set[bytes] = set()
        for column in columns:
            family = family_of(column)
            if family not in table.families:
                raise UnknownFamily(f"column {column!r}: table {table.name!r} has no such family")
            if is_family_filter(column):
                whole.add(family)
            else:
                single.add(column)
        return sorted(whole) + sorted(c for c in single if family_of(c) not in whole)

    def get_cells(self, table: str, row: bytes, columns: Sequence[bytes] | None = None) -> Cells:
        t = self._table(table)
        wanted = self._columns(t, columns)
        if wanted == []:
            return {}
        found = self._call(
            "getRowWithColumns",
            lambda c: c.getRowWithColumns(t.physical, row, wanted, {}),
            table,
        )
        if not found:
            return {}
        return {col: (cell.value, cell.timestamp) for col, cell in sorted(found[0].columns.items())}

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
        t = self._table(table)  # fail at the call, not at the first next()
        wanted = self._columns(t, columns)
        bounds = key_range(prefix=prefix, start=start, stop=stop, reverse=reverse)
        if wanted == [] or bounds.is_empty() or (limit is not None and limit <= 0):
            return iter(())
        return self._scan(t, bounds, reverse, limit, wanted)

    def _scan(
        self,
        table: TableInfo,
        bounds: KeyRange,
        reverse: bool,
        limit: int | None,
        columns: list[bytes] | None,
    ) -> Iterator[tuple[bytes, Cells]]:
        low, high = bounds.low, bounds.high
        remaining = limit
        if reverse:
            # HBase: start = high bound (inclusive), stop = low bound (exclusive).
            start_row: bytes | None = high
            skip: bytes | None = None if bounds.high_inclusive else high
            stop_row = _below(low) if low is not None else None
        else:
            start_row, skip, stop_row = low, None, high
        page = _FIRST_PAGE if remaining is None else min(_MAX_PAGE, remaining + 1)
        while True:
            rows = self._page(table, start_row, stop_row, reverse, columns, page)
            last: bytes | None = None
            for result in rows:
                key = result.row
                last = key
                if key == skip:
                    continue
                if reverse and low is not None and key < low:
                    return
                yield (
                    key,
                    {c: (cell.value, cell.timestamp) for c, cell in sorted(result.columns.items())},
                )
                if remaining is not None:
                    remaining -= 1
                    if remaining == 0:
                        return
            if len(rows) < page or last is None:
                return
            if reverse:
                start_row, skip = last, last
            else:
                start_row = last + b"\x00"
            page = min(_MAX_PAGE, page * 4)
            if remaining is not None:
                page = min(page, remaining + 1)

    def _page(
        self,
        table: TableInfo,
        start: bytes | None,
        stop: bytes | None,
        reverse: bool,
        columns: list[bytes] | None,
        rows: int,
    ) -> list[Any]:
        scan = thrift1.TScan(
            startRow=start,
            stopRow=stop,
            columns=columns,
            caching=rows,
            reversed=reverse or None,
        )

        def read(client: Any) -> list[Any]:
            scanner = client.scannerOpenWithScan(table.physical, scan, {})
            try:
                return list(client.scannerGetList(scanner, rows))
            finally:
                client.scannerClose(scanner)

        return self._call("scan", read, table.name)


def _below(low: bytes) -> bytes | None:
    """An exclusive stop row for a reversed scan that must include ``low``: ``low`` minus one
    exactly when it ends with a zero byte, else a key just below it (the client drops the
    few rows between that key and ``low``). None: no bound."""
    if low.endswith(b"\x00"):
        return low[:-1] or None
    return low[:-1] + bytes([low[-1] - 1]) + b"\xff" * 8
