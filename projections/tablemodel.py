"""HBase's data model as values (the table store port's vocabulary, ``tablestore``): the
mutations (``Put``, ``DeleteColumn``, ``DeleteRow``) and their checks, the cell-version rule
(``replaces``, ``hidden``), table specs and names, key ranges, rows and cells, a fold's
``TableLoad``, and the table store's errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeAlias

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


Row: TypeAlias = dict[bytes, bytes]
Cells: TypeAlias = dict[bytes, tuple[bytes, int]]
CellRecord: TypeAlias = tuple[bytes, bytes, bytes, int]
"""``(row, column, value, version)``: one cell of a folded table."""
TombRecord: TypeAlias = tuple[bytes, bytes, int]
"""``(row, column, version)``: a ``DeleteColumn``, or with ``column == b""`` a ``DeleteRow``."""


@dataclass(frozen=True, slots=True)
class TableLoad:
    """A table's folded writes: its cells, at most one per ``(row, column)``, and its
    tombstones, at most one per ``(row, column)``, both in key order. ``cells`` may be an
    iterator (a fold's, listed as they are taken): it is read once."""

    table: str
    cells: Iterable[CellRecord]
    tombs: Sequence[TombRecord] = ()

    def mutations(self) -> Iterator[Mutation]:
        """The same writes as mutations (what a store without ``load`` applies)."""
        table = self.table
        for row, column, version in self.tombs:
            yield DeleteColumn(table, row, column, version) if column else DeleteRow(
                table, row, version)
        for row, column, value, version in self.cells:
            yield Put(table, row, column, value, version)
