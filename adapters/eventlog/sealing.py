"""Per-message data keys and AES-256-GCM sealing of events' personal data (crypto-shredding).

A sealed value is ``key id (16) + nonce (12) + ciphertext`` (the key id is also the
authenticated data, so a blob cannot be moved under another key). Keys live in a mutable key
store beside the log: ``keys.sqlite`` in the data directory (embedded), the table
``letterlog_data_keys`` in the log's own database (PostgreSQL). Destroying a message's key
makes every copy of its sealed data in the log, in Kafka and in backups of the log unreadable.

Keys are taken from a pool that is filled ``POOL`` keys per committed transaction, so a key
is durable before any event that uses it can commit, at one key-store commit per ``POOL``
messages rather than one per delivery. Unused pool keys are never referenced (no data).

Every key store opened in a process registers itself: decoding (the log reader, the stream
workers, rebuilds) finds a sealed value's key in whichever store has it. A destroyed key's
id stays in its store: the value opens as shredded. A key that no open store ever held is an
error (the wrong key store, or none, is open: the event must not read as purged).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol
from uuid import UUID

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

POOL = 256
NONCE = 12


class KeyStoreMissing(LookupError):
    """A sealed event was read in a process that opened no key store, or none that ever held
    its key (the wrong key store: the event would otherwise read as purged)."""


DESTROYED = b""  # what a key store answers for a key it held and destroyed


def seal(key: bytes, key_id: UUID, plaintext: bytes) -> bytes:
    nonce = os.urandom(NONCE)
    return key_id.bytes + nonce + AESGCM(key).encrypt(nonce, plaintext, key_id.bytes)


def open_sealed(blob: bytes) -> tuple[UUID, bytes | None, bytes | None]:
    """``(key id, key, plaintext)``; key and plaintext are None if the key was destroyed."""
    key_id = UUID(bytes=bytes(blob[:16]))
    key = key_for(key_id)
    if key is None:
        return key_id, None, None
    nonce, ciphertext = blob[16:16 + NONCE], blob[16 + NONCE:]
    return key_id, key, AESGCM(key).decrypt(bytes(nonce), bytes(ciphertext), key_id.bytes)


class KeyStore(Protocol):
    def new_key(self) -> tuple[UUID, bytes]: ...

    def get(self, key_id: UUID) -> bytes | None:
        """The key; ``DESTROYED`` if it was destroyed here; None if this store never had it."""
        ...

    def destroy(self, key_ids: Iterable[UUID]) -> int: ...

    def destroyed_ids(self) -> list[UUID]:
        """Every key destroyed here (ids only: no secret), e.g. to re-apply erasures."""
        ...

    def close(self) -> None: ...


_OPEN: weakref.WeakSet[Any] = weakref.WeakSet()


def register(store: KeyStore) -> None:
    _OPEN.add(store)


def key_for(key_id: UUID) -> bytes | None:
    """The key, or None if it was destroyed; KeyStoreMissing if no open store knows it."""
    stores = list(_OPEN)
    if not stores:
        raise KeyStoreMissing("a sealed event needs its key store: open the store with one")
    for store in stores:
        key = store.get(key_id)
        if key is not None:
            return key or None
    raise KeyStoreMissing(f"data key {key_id} is in no open key store: open the key store "
                          "beside the log this event came from")


def new_keys(n: int) -> list[tuple[UUID, bytes]]:
    """``n`` random (key id, 256-bit key) pairs, from one read of the OS's random source."""
    random = os.urandom(48 * n)
    return [(UUID(bytes=random[i:i + 16], version=4), random[i + 16:i + 48])
            for i in range(0, 48 * n, 48)]


class _Pool:
    """Keys committed ahead of use, handed out one by one (thread-safe)."""

    def __init__(self) -> None:
        self._keys: list[tuple[UUID, bytes]] = []
        self._lock = threading.Lock()

    def take(self, commit: Any) -> tuple[UUID, bytes]:
        with self._lock:
            if not self._keys:
                fresh = new_keys(POOL)
                commit(fresh)
                self._keys = fresh
            return self._keys.pop()


class SqliteKeyStore:
    """``keys.sqlite``: WAL, ``secure_delete`` (a destroyed key's bytes are zeroed), the WAL
    truncated after destroying keys (no copy lingers in ``keys.sqlite-wal``)."""

    def __init__(self, path: str | Path, *, synchronous: str = "FULL") -> None:
        self.path = str(path)
        if self.path != ":memory:" and not self.path.startswith("file:"):
            from adapters.filemodes import private_file

            private_file(self.path)  # 0600 before SQLite makes it (and its -wal, -shm)
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                     timeout=30)
        self._lock = threading.Lock()
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(f"PRAGMA synchronous={synchronous}")
            self._conn.execute("PRAGMA secure_delete=ON")
            self._conn.execute("CREATE TABLE IF NOT EXISTS data_keys "
                               "(key_id BLOB PRIMARY KEY, key BLOB) WITHOUT ROWID")
        self._pool = _Pool()
        register(self)

    def _commit(self, keys: list[tuple[UUID, bytes]]) -> None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany("INSERT INTO data_keys VALUES (?, ?)",
                                   [(k.bytes, v) for k, v in keys])
            self._conn.execute("COMMIT")

    def new_key(self) -> tuple[UUID, bytes]:
        return self._pool.take(self._commit)

    def get(self, key_id: UUID) -> bytes | None:
        with self._lock:
            row = self._conn.execute("SELECT key FROM data_keys WHERE key_id = ?",
                                     (key_id.bytes,)).fetchone()
        return None if row is None else bytes(row[0] or DESTROYED)

    def destroy(self, key_ids: Iterable[UUID]) -> int:
        """The keys are overwritten (their ids stay, so an event under a destroyed key reads
        as purged while one under an unknown key is an error)."""
        ids = [(k.bytes,) for k in key_ids]
        if not ids:
            return 0
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            before = self._conn.total_changes
            self._conn.executemany(
                "UPDATE data_keys SET key = NULL WHERE key_id = ? AND key IS NOT NULL", ids)
            destroyed = self._conn.total_changes - before
            self._conn.execute("COMMIT")
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return destroyed

    def destroyed_ids(self) -> list[UUID]:
        with self._lock:
            rows = self._conn.execute("SELECT key_id FROM data_keys WHERE key IS NULL")
            return [UUID(bytes=bytes(r[0])) for r in rows]

    def close(self) -> None:
        _OPEN.discard(self)
        with self._lock:
            self._conn.close()


# One advisory-lock key for letterlog's schema creation on PostgreSQL (the log's tables and
# the key table; any stable 64-bit number works).
SCHEMA_LOCK_KEY = zlib.crc32(b"letterlog schema")


class PostgresKeyStore:
    """The table ``letterlog_data_keys`` in the log's PostgreSQL database."""

    def __init__(self, conninfo: str) -> None:
        import psycopg

        self._conn = psycopg.connect(conninfo, autocommit=True)
        self._lock = threading.Lock()
        # CREATE TABLE IF NOT EXISTS is not safe against itself: two processes creating the
        # table at once fail on pg_type's unique index. Serialised with the log's schema.
        with self._lock, self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
            self._conn.execute("CREATE TABLE IF NOT EXISTS letterlog_data_keys "
                               "(key_id uuid PRIMARY KEY, key bytea)")
        self._pool = _Pool()
        register(self)

    def _commit(self, keys: list[tuple[UUID, bytes]]) -> None:
        with self._lock, self._conn.transaction(), self._conn.cursor() as cur:
            cur.executemany("INSERT INTO letterlog_data_keys VALUES (%s, %s)", keys)

    def new_key(self) -> tuple[UUID, bytes]:
        return self._pool.take(self._commit)

    def get(self, key_id: UUID) -> bytes | None:
        with self._lock:
            row = self._conn.execute("SELECT key FROM letterlog_data_keys WHERE key_id = %s",
                                     (key_id,)).fetchone()
        return None if row is None else bytes(row[0] or DESTROYED)

    def destroy(self, key_ids: Iterable[UUID]) -> int:
        ids = list(key_ids)
        if not ids:
            return 0
        with self._lock:
            cur = self._conn.execute("UPDATE letterlog_data_keys SET key = NULL "
                                     "WHERE key_id = ANY(%s) AND key IS NOT NULL", (ids,))
            # Old row versions keep the key until vacuumed; VACUUM FULL rewrites the table.
            self._conn.execute("VACUUM FULL letterlog_data_keys")
            return cur.rowcount

    def destroyed_ids(self) -> list[UUID]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT key_id FROM letterlog_data_keys WHERE key IS NULL").fetchall()
        return [r[0] for r in rows]

    def close(self) -> None:
        _OPEN.discard(self)
        with self._lock:
            self._conn.close()


class MemoryKeyStore:
    """For unit tests on the in-memory event store."""

    def __init__(self) -> None:
        self._keys: dict[UUID, bytes] = {}
        register(self)

    def new_key(self) -> tuple[UUID, bytes]:
        [(key_id, key)] = new_keys(1)
        self._keys[key_id] = key
        return key_id, key

    def get(self, key_id: UUID) -> bytes | None:
        return self._keys.get(key_id)

    def destroy(self, key_ids: Iterable[UUID]) -> int:
        destroyed = 0
        for k in key_ids:
            if self._keys.get(k):
                self._keys[k] = DESTROYED
                destroyed += 1
        return destroyed

    def destroyed_ids(self) -> list[UUID]:
        return [k for k, v in self._keys.items() if v == DESTROYED]

    def close(self) -> None:
        _OPEN.discard(self)
