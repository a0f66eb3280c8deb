"""Reading the SQLite table store: the columns a read asks for (``column_clause``), and
scans in pages of whole rows (``scan``, ``ScanQuery``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from adapters.tables.sqlite.schema import Schema
from projections.tablestore import KeyRange, UnknownFamily, family_of, is_family_filter

_MAX_PAGE = 16384  # cells a scan reads at most at once
_FIRST_PAGE = 1024  # and first, when it is not told how many rows
Select = Callable[[Schema, str, list[Any]], list[Any]]  # runs a query on a table's cells


def column_clause(schema: Schema, columns: Sequence[bytes] | None) -> tuple[str, list[bytes]]:
    """SQL restricting ``col`` to ``columns`` (families as ``b"fam:"``), with its params."""
    if columns is None:
        return "", []
    exact: list[bytes] = []
    ranges: list[bytes] = []
    for column in columns:
        family = family_of(column)
        if family not in schema.families:
            raise UnknownFamily(f"column {column!r}: table {schema.name!r} has no such family")
        if is_family_filter(column):
            ranges += [family + b":", family + b";"]  # ';' follows ':' in ASCII
        else:
            exact.append(column)
    terms = ["(col >= ? AND col < ?)"] * (len(ranges) // 2)
    if exact:
        terms.append(f"col IN ({', '.join('?' * len(exact))})")
    return " AND (" + " OR ".join(terms) + ")", ranges + exact


_Cell = tuple[Any, ...]  # (row, col, value, version), or without the version for ``scan``


def _grouped(cells: list[_Cell], versions: bool, reverse: bool
             ) -> list[tuple[bytes, dict[bytes, Any]]]:
    """A page of cells in row order as ``(row, {column: value})`` (``versions``: ``{column:
    (value, version)}``), columns in column order. One plain loop over the cells: half the
    time of ``groupby`` with a list and a dict comprehension per row (a 50-row listing reads
    350 cells)."""
    out: list[tuple[bytes, dict[bytes, Any]]] = []
    current = None
    row: dict[bytes, Any] = {}
    if versions:
        for key, column, value, version in cells:
            if key != current:
                row = {}
                out.append((key, row))
                current = key
            row[column] = (value, version)
    else:
        for key, column, value in cells:
            if key != current:
                row = {}
                out.append((key, row))
                current = key
            row[column] = value
    if reverse:  # the columns came last first, as the rows did
        out = [(key, dict(reversed(found.items()))) for key, found in out]
    return out


_GUESSED_WIDTH = 8  # cells per row, when a scan's columns do not bound it


@dataclass(frozen=True, slots=True)
class ScanQuery:
    """What stays the same over the pages of one scan."""

    schema: Schema
    clause: str
    params: list[bytes]
    reverse: bool
    width: int  # most cells a row can have among the scanned columns (or a guess)
    versions: bool  # select each cell's version too (``scan_cells``; ``scan`` needs none)


def row_width(columns: Sequence[bytes] | None) -> int:
    """Named columns bound a row's cells; whole families (or all columns) do not."""
    if columns is None or any(is_family_filter(c) for c in columns):
        return _GUESSED_WIDTH
    return max(1, len(set(columns)))


def scan(select: Select, query: ScanQuery, bounds: KeyRange, limit: int | None
         ) -> Iterator[tuple[bytes, dict[bytes, Any]]]:
    """Rows as ``{column: value}`` (``versions``: ``{column: (value, version)}``), the
    columns in column order, read in pages of whole rows by ``select(schema, sql, args)``
    (the package docstring: no statement stays open while the caller holds a row)."""
    remaining = limit
    if bounds.is_empty() or (remaining is not None and remaining <= 0):
        return
    low, high, high_inclusive = bounds.low, bounds.high, bounds.high_inclusive
    reverse, width = query.reverse, query.width
    order = "row DESC, col DESC" if reverse else "row, col"
    selected = "row, col, value, version" if query.versions else "row, col, value"
    # a page of ``remaining * width + 1`` cells holds ``remaining`` whole rows at least
    page = _FIRST_PAGE if remaining is None else min(_MAX_PAGE, remaining * width + 1)
    while True:
        where: list[str] = []
        args: list[Any] = []
        if low is not None:
            where.append("row >= ?")
            args.append(low)
        if high is not None:
            where.append("row <= ?" if high_inclusive else "row < ?")
            args.append(high)
        sql = (
            f"SELECT {selected} FROM {query.schema.cells} "
            f"WHERE {' AND '.join(where) or '1'}{query.clause} ORDER BY {order} LIMIT ?"
        )
        cells = select(query.schema, sql, [*args, *query.params, page])
        complete = len(cells) < page
        if not complete:  # the last row may go on in the next page: read it again there
            last = cells[-1][0]
            cut = len(cells) - 1
            while cut > 0 and cells[cut - 1][0] == last:
                cut -= 1
            if cut == 0:  # one row wider than a page
                page = min(page * 4, 2**31 - 1)
                continue
            del cells[cut:]
        rows = 0
        for key, found in _grouped(cells, query.versions, reverse):
            yield key, found
            rows += 1
            if remaining is not None:
                remaining -= 1
                if remaining == 0:
                    return
        if complete:
            return
        if reverse:
            high, high_inclusive = last, True
        else:
            low = last
        per_row = len(cells) / rows
        want = _MAX_PAGE if remaining is None else int(per_row * remaining * 1.25) + 2
        page = max(64, min(_MAX_PAGE, want, page * 4))
