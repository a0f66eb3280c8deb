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

Nothing here imports a client library; adapters live in ``adapters/``.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Protocol, TypeAlias

from domain.errors import LetterlogError

MAX_VERSION = 2**63 - 2
"""Highest version a cell may carry (HBase reserves ``Long.MAX_VALUE`` for "latest")."""

MAX_ROW_KEY = 32767
"""HBase's limit on row key length."""

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}$")


# -- errors -----------------------------------------------------------------------------------


class TableStoreError(LetterlogError):
    """Base of the table store's errors."""


class TableNotFound(TableStoreError):
    """A table that does not exist was named."""


class TableSpecConflict(TableStoreError):
    """``create_table`` named an existing table with other column families."""


class UnknownFamily(TableStoreError):
    """A mutation or column filter names a column family the table does not have."""


class InvalidMutation(TableStoreError):
    """A malformed mutation, table name, family or column (names the bad field)."""


class StoreClosed(TableStoreError):
    """The store was used after ``close()``."""


class TableStoreUnavailable(TableStoreError):
    """The table store's server did not answer: unreachable, or no reply within the time
    allowed (the machine failed, not the request: the CLI exits 1)."""


# -- values -----------------------------------------------------------------------------------


def _check_row(row: object) -> None:
    if type(row) is not bytes or not row or len(row) > MAX_ROW_KEY:
        raise InvalidMutation(f"row: must be 1..{MAX_ROW_KEY} bytes, got {row!r:.80}")


def _check_column(column: object) -> None:
    if type(column) is not bytes or b":" not in column or column.startswith(b":"):
        raise InvalidMutation(f"column: must be bytes b'family:qualifier', got {column!r:.80}")


def _check_value(value: object) -> None:
    if type(value) is not bytes:
        raise InvalidMutation(f"value: must be bytes, got {type(value).__name__}")


def _check_version(version: object) -> None:
    if type(version) is not int or not 0 <= version <= MAX_VERSION:
        raise InvalidMutation(f"version: must be an int in 0..{MAX_VERSION}, got {version!r}")


def _well_formed(row: object, column: object, version: object) -> bool:
    """One fast test for the common case; the ``_check_*`` functions then name the field."""
    return (
        type(row) is bytes
        and 0 < len(row) <= MAX_ROW_KEY
        and type(column) is bytes
        and b":" in column
        and column[:1] != b":"
        and type(version) is int
        and 0 <= version <= MAX_VERSION
    )


@dataclass(frozen=True, slots=True)
class Put:
    """Write ``value`` into one cell at ``version``."""

    table: str
    row: bytes
    column: bytes
    value: bytes
    version: int

    def __post_init__(self) -> None:
        if not (type(self.value) is bytes and _well_formed(self.row, self.column, self.version)):
            _check_row(self.row)
            _check_column(self.column)
            _check_value(self.value)
            _check_version(self.version)


@dataclass(frozen=True, slots=True)
class DeleteColumn:
    """Hide every version <= ``version`` of one cell (HBase ``Delete.addColumns``)."""

    table: str
    row: bytes
    column: bytes
    version: int

    def __post_init__(self) -> None:
        if not _well_formed(self.row, self.column, self.version):
            _check_row(self.row)
            _check_column(self.column)
            _check_version(self.version)


@dataclass(frozen=True, slots=True)
class DeleteRow:
    """Hide every cell of the row with version <= ``version`` (HBase ``Delete(row, ts)``)."""

    table: str
    row: bytes
    version: int

    def __post_init__(self) -> None:
        if not _well_formed(self.row, b"row:", self.version):
            _check_row(self.row)
            _check_version(self.version)


Mutation: TypeAlias = Put | DeleteColumn | DeleteRow


# -- the cell-version rule (the module docstring's first three points), in one place ------------
# (the rebuild fold, ``projections.runner``, keeps its own inlined copy in its hot loop; the
# table store contract and ``verify`` hold it to the same results)


def replaces(version: int, kept: int | None) -> bool:
    """Does a put of ``version`` replace the cell kept at version ``kept`` (None: none)?
    A higher version wins; of equal versions the later write."""
    return kept is None or version >= kept


def hidden(version: int, tomb: int) -> bool:
    """Is a cell of ``version`` hidden by a delete of version ``tomb`` (-1: no delete)?
    A delete hides every version up to its own, puts arriving after it included."""
    return version <= tomb


@dataclass(frozen=True, slots=True)
class TableSpec:
    """A table and its column families; HBase pre-splits it by the salt byte (0..127)."""

    name: str
    families: tuple[str, ...]
    split_by_salt: bool = True

    def __post_init__(self) -> None:
        validate_table_name(self.name)
        if not self.families:
            raise InvalidMutation(f"families: table {self.name!r} needs at least one family")
        for family in self.families:
            if not isinstance(family, str) or not _NAME.match(family):
                raise InvalidMutation(f"families: {family!r} is not a valid family name")
        if len(set(self.families)) != len(self.families):
            raise InvalidMutation(f"families: {self.families!r} repeats a family")


def validate_table_name(name: object) -> str:
    """Table names: ASCII letters, digits, ``_ . -`` (not first), at most 200 characters."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidMutation(f"table: {name!r} is not a valid table name")
    return name


def family_of(column: bytes) -> bytes:
    """``b"meta:flags"`` -> ``b"meta"``; a column filter ``b"meta:"`` or ``b"meta"`` too."""
    return column.partition(b":")[0]


def is_family_filter(column: bytes) -> bool:
    """In a ``columns`` filter, ``b"family:"`` (or ``b"family"``) selects the whole family."""
    return column.endswith(b":") or b":" not in column


def prefix_stop(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (None: no bound)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


@dataclass(frozen=True, slots=True)
class KeyRange:
    """A scan's bounds after intersecting ``prefix`` with ``start``/``stop``.

    Always ascending: ``low`` inclusive, ``high`` exclusive; ``None`` is unbounded. For a
    reversed scan ``high_inclusive`` is True (HBase reversed scans include their start row).
    """

    low: bytes | None
    high: bytes | None
    high_inclusive: bool

    def is_empty(self) -> bool:
        if self.low is None or self.high is None:
            return False
        return self.low > self.high or (self.low == self.high and not self.high_inclusive)


def key_range(
    *, prefix: bytes | None, start: bytes | None, stop: bytes | None, reverse: bool
) -> KeyRange:
    """Turn HBase scan arguments into ascending bounds (see ``TableStore.scan``).

    Empty ``start``/``stop``/``prefix`` mean "unbounded", as HBase's empty row does."""
    start, stop = start or None, stop or None
    if reverse:
        # start is the high bound (inclusive), stop the low bound (exclusive).
        low = None if stop is None else stop + b"\x00"
        high, inclusive = start, True
    else:
        low, high, inclusive = start, stop, False
    if prefix:
        if low is None or prefix > low:
            low = prefix
        pstop = prefix_stop(prefix)
        if pstop is not None and (high is None or pstop < high or (pstop == high and inclusive)):
            high, inclusive = pstop, False
    return KeyRange(low or None, high, inclusive)


# -- the port ---------------------------------------------------------------------------------

Row: TypeAlias = dict[bytes, bytes]
Cells: TypeAlias = dict[bytes, tuple[bytes, int]]


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


CellRecord: TypeAlias = tuple[bytes, bytes, bytes, int]
"""``(row, column, value, version)``: one cell of a folded table."""
TombRecord: TypeAlias = tuple[bytes, bytes, int]
"""``(row, column, version)``: a ``DeleteColumn``, or with ``column == b""`` a ``DeleteRow``."""


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


@dataclass(frozen=True, slots=True)
class TableLoad:
    """A table's folded writes: its cells, at most one per ``(row, column)``, and its
    tombstones, at most one per ``(row, column)``, both in key order."""

    table: str
    cells: Sequence[CellRecord]
    tombs: Sequence[TombRecord] = ()

    def mutations(self) -> Iterator[Mutation]:
        """The same writes as mutations (what a store without ``load`` applies)."""
        table = self.table
        for row, column, version in self.tombs:
            yield DeleteColumn(table, row, column, version) if column else DeleteRow(
                table, row, version)
        for row, column, value, version in self.cells:
            yield Put(table, row, column, value, version)


class BulkLoading(Protocol):
    """A table store that takes a fold's result in bulk (``SqliteTableStore``)."""

    def load(self, loads: Sequence[TableLoad], mutations: Iterable[Mutation] = ()) -> None:
        """The same as ``apply`` of every ``load.mutations()`` and then ``mutations``, as one
        atomic batch; fastest into empty tables (a rebuild's fresh ones)."""


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
