"""The vault of key-encryption keys (``vault.sqlite``, ADR 0041) and wrapping a data key under
one: ``wrap`` / ``unwrap``, the vault's private SQLite file, ``Vault``."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from adapters.eventlog.sealing import NONCE
from adapters.files.filemodes import private_file, read_only_sqlite, write_ahead


def wrap(kek: bytes, key_id: UUID, key: bytes) -> bytes:
    """A data key sealed by a key-encryption key: ``nonce (12) + ciphertext``, the key id as
    authenticated data (a wrapped key cannot be moved to another id)."""
    nonce = os.urandom(NONCE)
    return nonce + AESGCM(kek).encrypt(nonce, key, key_id.bytes)


def unwrap(kek: bytes, key_id: UUID, wrapped: bytes) -> bytes:
    return unwrapper(kek)(key_id.bytes, wrapped)


def unwrapper(kek: bytes) -> Callable[[bytes, bytes], bytes]:
    """``unwrap`` under one KEK for many keys (its cipher made once): ``(key id's 16 bytes,
    wrapped) -> key``."""
    cipher = AESGCM(kek)

    def unwrap_one(key_id: bytes, wrapped: bytes) -> bytes:
        return cipher.decrypt(bytes(wrapped[:NONCE]), bytes(wrapped[NONCE:]), key_id)

    return unwrap_one


def _private_sqlite(path: str, synchronous: str) -> sqlite3.Connection:
    """A key file: 0600 before SQLite makes it (and its -wal, -shm), WAL, ``secure_delete``
    (a deleted key's bytes are zeroed)."""
    read_only = read_only_sqlite(path)  # a snapshot, a backup mount: read, never written
    if read_only is not None:
        return sqlite3.connect(read_only, uri=True, isolation_level=None,
                               check_same_thread=False, timeout=30)
    if path != ":memory:" and not path.startswith("file:"):
        private_file(path)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    write_ahead(conn)
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("PRAGMA secure_delete=ON")
    return conn


def made_current(conn: sqlite3.Connection, table: str, column: str, *,
                 create: Sequence[str], upgrade: Sequence[str]) -> None:
    """A key file's table made (``create``), or one made by an older version given its
    newest ``column`` (``upgrade``), in one write transaction that looks again: processes
    opening one file at once (the pipelined import, a pool of workers) must not both add the
    column. A file already current is only read (it may be a read-only snapshot)."""

    def current() -> bool:
        return column in {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}

    if current():
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not current():
            made = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                (table,)).fetchone()
            for statement in upgrade if made else create:
                conn.execute(statement)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class KeyVaultBusy(RuntimeError):
    """The vault's write-ahead log could not be truncated in time: a destroyed
    key-encryption key may still be in ``vault.sqlite-wal`` until the next checkpoint."""


class Vault:
    """``vault.sqlite``: the key-encryption keys (KEKs), one per batch of data keys, in a small
    file of its own, never in the log's database. SQLite overwrites a deleted KEK in place
    (``secure_delete``) and the write-ahead log is truncated after each removal, so once a
    KEK is removed no file holds it: every wrapped copy of its data keys (in the key table,
    in PostgreSQL's WAL, archives and backups) is noise from then on."""

    def __init__(self, path: str | Path, *, synchronous: str = "FULL") -> None:
        self.path = str(path)
        self._conn = _private_sqlite(self.path, synchronous)
        self._lock = threading.Lock()
        self._cache: dict[UUID, bytes] = {}
        with self._lock:
            made_current(self._conn, "keks", "retiring", create=[
                "CREATE TABLE keks (kek_id BLOB PRIMARY KEY, kek BLOB NOT NULL, "
                "created REAL NOT NULL, retiring INTEGER) WITHOUT ROWID",
            ], upgrade=[  # a vault made before ADR 0063
                "ALTER TABLE keks ADD COLUMN retiring INTEGER",
            ])

    def add(self, keks: Iterable[tuple[UUID, bytes]]) -> None:
        rows = [(k.bytes, v, time.time()) for k, v in keks]
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany("INSERT INTO keks (kek_id, kek, created) VALUES (?, ?, ?)",
                                   rows)
            self._conn.execute("COMMIT")

    def get(self, kek_id: UUID) -> bytes | None:
        kek = self._cache.get(kek_id)
        if kek is None:
            with self._lock:
                row = self._conn.execute("SELECT kek FROM keks WHERE kek_id = ?",
                                         (kek_id.bytes,)).fetchone()
            if row is None:
                return None
            kek = self._cache[kek_id] = bytes(row[0])
        return kek

    def mark_retiring(self, kek_ids: Iterable[UUID]) -> None:
        """These KEKs are being rotated away: once no data key refers to them they are
        removed by ``WrappedKeyStore.sweep`` (ADR 0063), even if the rotation's own removal
        never ran (a process killed between the key table's commit and the vault's)."""
        rows = [(k.bytes,) for k in kek_ids]
        if rows:
            with self._lock:
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.executemany("UPDATE keks SET retiring = 1 WHERE kek_id = ?", rows)
                self._conn.execute("COMMIT")

    def retiring(self) -> set[UUID]:
        with self._lock:
            return {UUID(bytes=bytes(r[0])) for r in self._conn.execute(
                "SELECT kek_id FROM keks WHERE retiring = 1")}

    def remove(self, kek_ids: Iterable[UUID], *, wait: float = 10.0) -> None:
        """The KEKs deleted (their bytes zeroed) and the WAL truncated; ``KeyVaultBusy`` if a
        reader kept it from being truncated for ``wait`` seconds (the next removal or
        ``checkpoint`` finishes it)."""
        ids = list(kek_ids)
        for k in ids:
            self._cache.pop(k, None)
        if ids:
            with self._lock:
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.executemany("DELETE FROM keks WHERE kek_id = ?",
                                       [(k.bytes,) for k in ids])
                self._conn.execute("COMMIT")
        self.checkpoint(wait)

    def checkpoint(self, wait: float = 10.0) -> None:
        """Truncates the WAL, tried again every 50 ms while readers keep it busy (tenacity),
        for ``wait`` seconds; then ``KeyVaultBusy``."""
        # local: start-up: 2 more module(s) for commands that never use it
        from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

        deadline = time.monotonic() + wait

        def busy() -> bool:
            with self._lock:  # SQLite's busy handler waits for readers, up to the deadline
                ms = int(min(max(deadline - time.monotonic(), 0.0), 1.0) * 1000)
                self._conn.execute(f"PRAGMA busy_timeout={ms}")
                try:
                    return bool(self._conn.execute(
                        "PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0])
                finally:
                    self._conn.execute("PRAGMA busy_timeout=30000")

        def gave_up(state: Any) -> None:
            raise KeyVaultBusy(f"{self.path}: another process kept its write-ahead log "
                               f"from being truncated for {wait:g} s")

        Retrying(retry=retry_if_result(bool), stop=stop_after_delay(wait), wait=wait_fixed(0.05),
                 sleep=time.sleep, retry_error_callback=gave_up)(busy)

    def ids(self) -> dict[UUID, float]:
        with self._lock:
            return {UUID(bytes=bytes(k)): c for k, c in
                    self._conn.execute("SELECT kek_id, created FROM keks")}

    def close(self) -> None:
        self._cache.clear()
        with self._lock:
            self._conn.close()


# A KEK no key refers to and older than this is an interrupted rotation's leftover (a new
