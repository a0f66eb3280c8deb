"""The optional capabilities of a table store, as typed Protocols: what some stores do
beside the port (``tablestore.TableStore``) and a caller uses when the store it holds has it
(``isinstance(store, Compacting)``; mypy checks the implementations' signatures where they
are used as one). Today the embedded SQLite store has the first five; HBase's has
``MajorCompacting``; the in-memory store none.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from projections.tablemodel import Mutation, TableLoad

__all__ = ["BulkLoading", "Checkpointing", "Compacting", "DataVersioned", "FileSized",
           "MajorCompacting", "TableSized"]


@runtime_checkable
class BulkLoading(Protocol):
    """A table store that takes a fold's result in bulk (``SqliteTableStore``)."""

    def load(self, loads: Sequence[TableLoad], mutations: Iterable[Mutation] = ()) -> None:
        """The same as ``apply`` of every ``load.mutations()`` and then ``mutations``, as one
        atomic batch; fastest into empty tables (a rebuild's fresh ones)."""


@runtime_checkable
class DataVersioned(Protocol):
    """A store that says cheaply whether another connection has committed since it last
    asked (SQLite's ``PRAGMA data_version``, per file): equal values, nothing changed."""

    def data_version(self) -> tuple[int, int]: ...


@runtime_checkable
class Checkpointing(Protocol):
    """A store with a write-ahead log it can fold back into its file (SQLite's
    ``wal_checkpoint``; ``TRUNCATE`` empties the WAL): ``(busy, log frames, checkpointed)``."""

    def checkpoint(self, mode: str = "PASSIVE") -> tuple[int, int, int]: ...


@runtime_checkable
class FileSized(Protocol):
    """A store in one file whose size it knows (bytes, WAL included)."""

    def file_bytes(self) -> int: ...


@runtime_checkable
class TableSized(Protocol):
    """A store that measures what some of its tables take (bytes; None: not known)."""

    def table_bytes(self, names: Iterable[str]) -> int | None: ...


@runtime_checkable
class Compacting(FileSized, Protocol):
    """A store that rewrites its file with full pages (SQLite's ``VACUUM``, ADR 0030):
    ``compact`` returns the bytes freed, ``slack`` the share of the file that holds nothing
    (None: not known)."""

    def compact(self) -> int: ...

    def slack(self) -> float | None: ...


@runtime_checkable
class MajorCompacting(Protocol):
    """A store whose deletes reach its files only through a flush and a major compaction
    (HBase): what an erasure asks of it for the tables it deleted from."""

    def flush(self, names: Iterable[str]) -> bool: ...

    def major_compact(self, names: Iterable[str]) -> None: ...
