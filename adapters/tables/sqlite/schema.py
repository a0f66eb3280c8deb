"""The SQLite table store's catalog and the names and SQL of one logical table (``Schema``:
``"cells:T"`` and ``"tombs:T"``, see the package docstring)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from projections.tablestore import TableSpec, TableSpecConflict

CATALOG = "letterlog_tables"


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


@dataclass(frozen=True)
class Schema:
    """A logical table: its families and the SQL that works on it."""

    name: str
    families: frozenset[bytes]
    cells: str  # quoted SQLite table names
    tombs: str
    known: set[bytes] = field(default_factory=set, compare=False, hash=False, repr=False)
    """Columns already found in a family of this table (kept as long as the schema is: a
    command's batch checks only the columns no batch before it wrote)."""

    @classmethod
    def of(cls, name: str, families: Iterable[str]) -> Schema:
        return cls(
            name,
            frozenset(f.encode() for f in families),
            quote(f"cells:{name}"),
            quote(f"tombs:{name}"),
        )

    @cached_property
    def insert(self) -> str:
        return f"INSERT INTO {self.cells}(row, col, value, version)"

    on_conflict = (  # an upsert that keeps the newest version
        " ON CONFLICT(row, col) DO UPDATE SET value = excluded.value, version = excluded.version "
        "WHERE excluded.version > version "
        "OR (excluded.version = version AND excluded.value IS NOT value)"
    )

    @cached_property
    def raise_tomb(self) -> str:
        return (
            f"INSERT INTO {self.tombs}(row, col, version) VALUES (?, ?, ?) "
            "ON CONFLICT(row, col) DO UPDATE SET version = excluded.version "
            "WHERE excluded.version > version"
        )


def create_table(conn: sqlite3.Connection, spec: TableSpec) -> None:
    """Creates the table ``spec`` names (its two SQLite tables and its catalog row), in the
    transaction ``conn`` is in; nothing if it exists with the same families,
    ``TableSpecConflict`` if with others."""
    found = conn.execute(
        f"SELECT families FROM {CATALOG} WHERE name = ?", (spec.name,)
    ).fetchone()
    if found is not None:
        families = json.loads(found[0])
        if set(families) != set(spec.families):
            raise TableSpecConflict(
                f"table {spec.name!r} exists with families {tuple(families)!r}, "
                f"not {spec.families!r}"
            )
        return
    schema = Schema.of(spec.name, spec.families)
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {schema.cells} (row BLOB NOT NULL, "
        "col BLOB NOT NULL, value BLOB NOT NULL, version INTEGER NOT NULL, "
        "PRIMARY KEY (row, col)) WITHOUT ROWID"
    )
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {schema.tombs} (row BLOB NOT NULL, "
        "col BLOB NOT NULL, version INTEGER NOT NULL, "
        "PRIMARY KEY (row, col)) WITHOUT ROWID"
    )
    conn.execute(
        f"INSERT INTO {CATALOG} (name, families, split_by_salt) VALUES (?, ?, ?)",
        (spec.name, json.dumps(list(spec.families)), int(spec.split_by_salt)),
    )


def drop_table(conn: sqlite3.Connection, name: str) -> None:
    """Drops the table ``name`` (a valid name) and its catalog row, if it exists."""
    schema = Schema.of(name, ())
    conn.execute(f"DROP TABLE IF EXISTS {schema.cells}")
    conn.execute(f"DROP TABLE IF EXISTS {schema.tombs}")
    conn.execute(f"DELETE FROM {CATALOG} WHERE name = ?", (name,))
