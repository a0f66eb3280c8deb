"""The embedded key store: wrapped data keys in ``keys.sqlite``, their KEKs in ``vault.sqlite``
beside it."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any
from uuid import UUID

from adapters.eventlog.keyvault import Vault, _private_sqlite, made_current
from adapters.eventlog.wrappedkeys import WrappedKeyStore
from adapters.files import datadir

ROWS_AT_ONCE = 500
"""Key ids per query of ``rows`` (below SQLite's oldest limit of 999 parameters)."""


class _SqliteKeyTable:
    """``keys.sqlite``: WAL, ``secure_delete``, the WAL truncated after each rotation."""

    def __init__(self, path: str, synchronous: str) -> None:
        self._conn = _private_sqlite(path, synchronous)
        self._lock = threading.Lock()
        with self._lock:
            index = "CREATE INDEX IF NOT EXISTS data_keys_kek ON data_keys (kek_id)"
            made_current(self._conn, "data_keys", "kek_id", create=[
                "CREATE TABLE data_keys (key_id BLOB PRIMARY KEY, key BLOB, kek_id BLOB) "
                "WITHOUT ROWID", index,
            ], upgrade=[  # a key file made before its data keys were wrapped in batches
                "ALTER TABLE data_keys ADD COLUMN kek_id BLOB", index,
            ])

    def insert(self, rows: list[tuple[UUID, bytes, UUID]]) -> None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany("INSERT OR REPLACE INTO data_keys VALUES (?, ?, ?)",
                                   [(k.bytes, w, e.bytes) for k, w, e in rows])
            self._conn.execute("COMMIT")

    def row(self, key_id: UUID) -> tuple[bytes | None, UUID | None] | None:
        with self._lock:
            row = self._conn.execute("SELECT key, kek_id FROM data_keys WHERE key_id = ?",
                                     (key_id.bytes,)).fetchone()
        if row is None:
            return None
        return row[0], None if row[1] is None else UUID(bytes=bytes(row[1]))

    def rows(self, key_ids: list[bytes]) -> dict[bytes, tuple[bytes | None, UUID | None]]:
        """``row`` of each of ``key_ids`` (16 bytes each) found, ``ROWS_AT_ONCE`` ids per
        query."""
        found: dict[bytes, tuple[bytes | None, UUID | None]] = {}
        keks: dict[bytes, UUID] = {}  # a refill's keys share their KEK
        with self._lock:
            for at in range(0, len(key_ids), ROWS_AT_ONCE):
                chunk = key_ids[at:at + ROWS_AT_ONCE]
                for key_id, key, kek_id in self._conn.execute(
                        "SELECT key_id, key, kek_id FROM data_keys WHERE key_id IN "
                        f"({','.join('?' * len(chunk))})", chunk):
                    if kek_id is not None:
                        kek = keks.get(kek_id)
                        if kek is None:
                            kek = keks[kek_id] = UUID(bytes=bytes(kek_id))
                    found[bytes(key_id)] = (key, None if kek_id is None else kek)
        return found

    def rotate(self, key_ids: list[UUID], plan: Any) -> int:
        ids = [k.bytes for k in key_ids]
        marks = ",".join("?" * len(ids))
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                batches = [r[0] for r in self._conn.execute(
                    f"SELECT DISTINCT kek_id FROM data_keys WHERE key_id IN ({marks}) "
                    "AND key IS NOT NULL AND kek_id IS NOT NULL", ids)]
                rows = [(UUID(bytes=bytes(k)), w, None if e is None else UUID(bytes=bytes(e)))
                        for k, w, e in self._conn.execute(
                            f"SELECT key_id, key, kek_id FROM data_keys WHERE kek_id IN "
                            f"({','.join('?' * len(batches))}) OR (key_id IN ({marks}) AND "
                            "kek_id IS NULL AND key IS NOT NULL)", batches + ids)]
                rewrapped = plan(rows)
                before = self._conn.total_changes
                self._conn.execute(f"UPDATE data_keys SET key = NULL, kek_id = NULL "
                                   f"WHERE key_id IN ({marks}) AND key IS NOT NULL", ids)
                destroyed = self._conn.total_changes - before
                self._conn.executemany("UPDATE data_keys SET key = ?, kek_id = ? "
                                       "WHERE key_id = ?",
                                       [(w, e.bytes, k.bytes) for k, w, e in rewrapped])
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            # one try without waiting for readers: the erasure's completion step waits (a
            # bounded time), checks the result and reports (adapters/lifecycle/completion.py)
            self._conn.execute("PRAGMA busy_timeout=0")
            try:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                self._conn.execute("PRAGMA busy_timeout=30000")
        return destroyed

    def delete(self, key_ids: list[UUID]) -> None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany("DELETE FROM data_keys WHERE key_id = ?",
                                   [(k.bytes,) for k in key_ids])
            self._conn.execute("COMMIT")

    def destroyed_ids(self) -> list[UUID]:
        with self._lock:
            rows = self._conn.execute("SELECT key_id FROM data_keys WHERE key IS NULL")
            return [UUID(bytes=bytes(r[0])) for r in rows]

    def referenced(self) -> set[UUID]:
        with self._lock:
            return {UUID(bytes=bytes(r[0])) for r in self._conn.execute(
                "SELECT DISTINCT kek_id FROM data_keys WHERE kek_id IS NOT NULL")}

    def legacy(self) -> list[tuple[UUID, bytes]]:
        with self._lock:
            return [(UUID(bytes=bytes(k)), bytes(v)) for k, v in self._conn.execute(
                "SELECT key_id, key FROM data_keys WHERE kek_id IS NULL AND key IS NOT NULL")]

    def count(self) -> dict[str, int]:
        with self._lock:
            live, destroyed = self._conn.execute(
                "SELECT count(key), count(*) - count(key) FROM data_keys").fetchone()
        return {"keys": live, "destroyed": destroyed}

    def checkpoint(self) -> None:
        with self._lock:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def SqliteKeyStore(path: str | Path, *, synchronous: str = "FULL",  # noqa: N802
                   vault: str | Path | None = None) -> WrappedKeyStore:
    """``keys.sqlite`` (wrapped data keys) and ``vault.sqlite`` (their KEKs) beside it."""
    path = str(path)
    vault_path = vault or os.path.join(os.path.dirname(os.path.abspath(path)), datadir.VAULT)
    return WrappedKeyStore(_SqliteKeyTable(path, synchronous),
                           Vault(vault_path, synchronous=synchronous))
