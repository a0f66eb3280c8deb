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

import contextlib
import os
import sqlite3
import threading
import time
import weakref
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol
from uuid import UUID

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from adapters.files import datadir
from adapters.operations.faults import fault_point

POOL = 256
POOL_FIRST = 8
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
    failed: Exception | None = None
    for store in stores:
        try:
            key = store.get(key_id)
        except KeyStoreMissing:
            raise
        except Exception as error:  # another store (another log's, its server gone): not ours
            failed = failed or error
            continue
        if key is not None:
            return key or None
    if failed is not None:
        raise failed
    raise KeyStoreMissing(f"data key {key_id} is in no open key store: open the key store "
                          "beside the log this event came from")


def new_keys(n: int) -> list[tuple[UUID, bytes]]:
    """``n`` random (key id, 256-bit key) pairs, from one read of the OS's random source."""
    random = os.urandom(48 * n)
    return [(UUID(bytes=random[i:i + 16], version=4), random[i + 16:i + 48])
            for i in range(0, 48 * n, 48)]


class _Pool:
    """Keys committed ahead of use, handed out one by one (thread-safe). A process's first
    refill is small and each next one twice the last, up to ``POOL``: a short-lived command
    commits a few keys, a long-lived delivery agent one commit per ``POOL`` messages.

    Refilled ahead (ADR 0085): once a quarter of the last refill is left, the next one is
    committed by a thread of its own while deliveries take what is left, so a delivery
    never waits for the key table's and the vault's commits (fsyncs) unless it empties
    the pool first. A key is only handed out once its commit returned, as before. A forked
    child starts with an empty pool (never the parent's keys) and no refill."""

    def __init__(self) -> None:
        self._keys: list[tuple[UUID, bytes]] = []
        self._next = POOL_FIRST
        self._low = 0
        self._lock = threading.Lock()
        self._refill: threading.Thread | None = None
        _POOLS.add(self)

    def take(self, commit: Any) -> tuple[UUID, bytes]:
        while True:
            with self._lock:
                if self._keys:
                    key = self._keys.pop()
                    if len(self._keys) <= self._low and self._refill is None:
                        self._ahead(commit)
                    return key
                running = self._refill
                if running is None:  # nothing on its way (a process's first key): here
                    fresh = new_keys(self._grow())
                    commit(fresh)
                    self._keys = fresh
                    return self._keys.pop()
            running.join()  # emptied before the refill ahead landed: wait for it

    def _grow(self) -> int:
        """The size of the next refill (the one after it doubles, up to ``POOL``); under
        the lock."""
        n = self._next
        self._next = min(POOL, n * 2)
        self._low = n // 4
        return n

    def _ahead(self, commit: Any) -> None:
        """The next refill, committed in a thread; under the lock. A refill that fails
        hands nothing out: the take that finds the pool empty refills itself (and raises
        what the store raises)."""
        n = self._grow()

        def run() -> None:
            fresh: list[tuple[UUID, bytes]] = []
            try:
                fresh = new_keys(n)
                commit(fresh)
            except Exception:  # noqa: BLE001 - the next take refills in the caller's thread
                fresh = []
            finally:
                with self._lock:
                    self._keys = fresh + self._keys
                    self._refill = None

        self._refill = threading.Thread(target=run, name="letterlog-keys-ahead", daemon=True)
        self._refill.start()

    def drain(self) -> list[UUID]:
        """The keys never handed out (given back on close: no message uses them), after a
        refill on its way has landed."""
        with self._lock:
            running = self._refill
        if running is not None:
            running.join()
        with self._lock:
            unused, self._keys = [k for k, _ in self._keys], []
        return unused

    def _forked(self) -> None:
        self._lock = threading.Lock()
        self._refill = None
        self._keys = []
        self._next, self._low = POOL_FIRST, 0


_POOLS: weakref.WeakSet[_Pool] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for pool in list(_POOLS):
        pool._forked()


os.register_at_fork(after_in_child=_after_fork_in_child)


def wrap(kek: bytes, key_id: UUID, key: bytes) -> bytes:
    """A data key sealed by a key-encryption key: ``nonce (12) + ciphertext``, the key id as
    authenticated data (a wrapped key cannot be moved to another id)."""
    nonce = os.urandom(NONCE)
    return nonce + AESGCM(kek).encrypt(nonce, key, key_id.bytes)


def unwrap(kek: bytes, key_id: UUID, wrapped: bytes) -> bytes:
    return AESGCM(kek).decrypt(bytes(wrapped[:NONCE]), bytes(wrapped[NONCE:]), key_id.bytes)


def _private_sqlite(path: str, synchronous: str) -> sqlite3.Connection:
    """A key file: 0600 before SQLite makes it (and its -wal, -shm), WAL, ``secure_delete``
    (a deleted key's bytes are zeroed)."""
    from adapters.files.filemodes import private_file, read_only_sqlite

    read_only = read_only_sqlite(path)  # a snapshot, a backup mount: read, never written
    if read_only is not None:
        return sqlite3.connect(read_only, uri=True, isolation_level=None,
                               check_same_thread=False, timeout=30)
    if path != ":memory:" and not path.startswith("file:"):
        private_file(path)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("PRAGMA secure_delete=ON")
    return conn


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
            self._conn.execute("CREATE TABLE IF NOT EXISTS keks (kek_id BLOB PRIMARY KEY, "
                               "kek BLOB NOT NULL, created REAL NOT NULL) WITHOUT ROWID")
            columns = {r[1] for r in self._conn.execute("PRAGMA table_info(keks)")}
            if "retiring" not in columns:  # a vault made before ADR 0063
                self._conn.execute("ALTER TABLE keks ADD COLUMN retiring INTEGER")

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
# KEK is stored a moment before the keys wrapped by it): removed by the next destroy.
ORPHAN_AGE_S = 3600.0
# A key read while another process rotates its batch is read again, at most this many times.
RACES = 5


class _KeyTable(Protocol):
    """Where the wrapped data keys live: ``(key_id, wrapped key, kek_id)``; a destroyed key
    keeps its id with both NULL; a key written before the hierarchy has a plain key and no
    KEK until ``wrap_legacy``."""

    def insert(self, rows: list[tuple[UUID, bytes, UUID]]) -> None: ...
    def row(self, key_id: UUID) -> tuple[bytes | None, UUID | None] | None: ...
    def rotate(self, key_ids: list[UUID], plan: Any) -> int: ...
    def delete(self, key_ids: list[UUID]) -> None: ...
    def destroyed_ids(self) -> list[UUID]: ...
    def referenced(self) -> set[UUID]: ...
    def legacy(self) -> list[tuple[UUID, bytes]]: ...
    def count(self) -> dict[str, int]: ...
    def checkpoint(self) -> None: ...
    def close(self) -> None: ...


_Row = tuple[UUID, "bytes | None", "UUID | None"]


class KekVault(Protocol):
    """Where the KEKs live: ``Vault`` (a file), or the key cluster
    (``adapters.eventlog.keycluster.PostgresVault``, ADR 0073)."""

    path: str

    def add(self, keks: Iterable[tuple[UUID, bytes]]) -> None: ...
    def get(self, kek_id: UUID) -> bytes | None: ...
    def mark_retiring(self, kek_ids: Iterable[UUID]) -> None: ...
    def retiring(self) -> set[UUID]: ...
    def remove(self, kek_ids: Iterable[UUID], *, wait: float = 10.0) -> None: ...
    def ids(self) -> dict[UUID, float]: ...
    def close(self) -> None: ...


class WrappedKeyStore:
    """Data keys wrapped by KEKs (ADR 0041). Each pool refill gets a KEK of its own; keys are
    committed wrapped before their KEK is stored, so a refill cut short leaves only unused
    rows. Destroying keys rotates each KEK they were under: a new KEK is stored, the batch's
    other keys are re-wrapped under it and the destroyed ones cleared in one transaction of
    the key table, then the old KEK is removed from the vault."""

    def __init__(self, table: _KeyTable, vault: KekVault) -> None:
        self.table, self.vault = table, vault
        self._pool = _Pool()
        legacy = self.table.legacy()
        if legacy:
            self._wrap_legacy(legacy)
        register(self)

    def _wrap_legacy(self, rows: list[tuple[UUID, bytes]]) -> None:
        """Keys a store wrote before the hierarchy (plain) wrapped now, ``POOL`` per KEK."""
        for i in range(0, len(rows), POOL):
            [(kek_id, kek)] = new_keys(1)
            self.vault.add([(kek_id, kek)])
            self.table.insert([(k, wrap(kek, k, key), kek_id) for k, key in rows[i:i + POOL]])
        self.table.checkpoint()  # the plain keys' old pages: zeroed, the WAL truncated

    def _commit(self, keys: list[tuple[UUID, bytes]]) -> None:
        [(kek_id, kek)] = new_keys(1)
        self.table.insert([(k, wrap(kek, k, key), kek_id) for k, key in keys])
        self.vault.add([(kek_id, kek)])

    def new_key(self) -> tuple[UUID, bytes]:
        return self._pool.take(self._commit)

    def get(self, key_id: UUID) -> bytes | None:
        for _ in range(RACES):
            row = self.table.row(key_id)
            if row is None:
                return None
            wrapped, kek_id = row
            if wrapped is None:
                return DESTROYED
            if kek_id is None:
                return bytes(wrapped)  # not wrapped yet (a store opened by an older version)
            kek = self.vault.get(kek_id)
            if kek is not None:
                return unwrap(kek, key_id, wrapped)
            # another process rotated the batch between the two reads (the row read was
            # wrapped under the KEK it has just removed): read the row again
        raise KeyStoreMissing(f"data key {key_id}: its key-encryption key {kek_id} is not "
                              f"in the vault {self.vault.path} (the wrong vault, or lost)")

    def destroy(self, key_ids: Iterable[UUID]) -> int:
        ids = list(dict.fromkeys(key_ids))
        if not ids:
            return 0
        retired: list[UUID] = []

        def plan(rows: list[_Row]) -> list[tuple[UUID, bytes, UUID]]:
            """Inside the key table's transaction: the batches' other keys under new KEKs
            (a key not yet wrapped is only ever among the destroyed ones)."""
            doomed, fresh = set(ids), {}
            for _, _, kek_id in rows:
                if kek_id is not None and kek_id not in fresh:
                    fresh[kek_id] = new_keys(1)[0]
            self.vault.add(fresh.values())  # stored before any key is wrapped by them
            self.vault.mark_retiring(fresh)  # removed once nothing refers to them (sweep)
            retired.extend(fresh)
            out = []
            for key_id, wrapped, kek_id in rows:
                if key_id in doomed or wrapped is None or kek_id is None:
                    continue
                new_id, new_kek = fresh[kek_id]
                key = unwrap(self._kek(kek_id), key_id, wrapped)
                out.append((key_id, wrap(new_kek, key_id, key), new_id))
            return out

        destroyed = self.table.rotate(ids, plan)
        fault_point("keys:rotated")  # the old KEKs are still in the vault: sweep removes them
        self.sweep(retired)
        return destroyed

    def sweep(self, retired: Iterable[UUID] = ()) -> int:
        """Removes from the vault every KEK no data key refers to any more that was being
        rotated away (marked retiring before the rotation committed), or that ``retired``
        names, or that is an interrupted refill's or rotation's leftover older than
        ``ORPHAN_AGE_S``. Idempotent: an erasure killed after its rotation and before this
        is finished by the next one (ADR 0063). How many KEKs were removed."""
        referenced = self.table.referenced()
        now = time.time()
        retiring = self.vault.retiring() | set(retired)
        gone = [k for k, created in self.vault.ids().items() if k not in referenced
                and (k in retiring or now - created > ORPHAN_AGE_S)]
        # committed: a reader of the vault delays only its WAL's truncation, which the
        # erasure's completion step waits for, reports and records (lifecycle/completion.py)
        with contextlib.suppress(KeyVaultBusy):
            self.vault.remove(gone, wait=0)
        return len(gone)

    def _kek(self, kek_id: UUID) -> bytes:
        kek = self.vault.get(kek_id)
        if kek is None:
            raise KeyStoreMissing(f"key-encryption key {kek_id} is not in the vault "
                                  f"{self.vault.path}")
        return kek

    def destroyed_ids(self) -> list[UUID]:
        return self.table.destroyed_ids()

    def count(self) -> dict[str, int]:
        """Keys live, destroyed and in all; KEKs in the vault (proportional: ADR 0041)."""
        return {**self.table.count(), "keks": len(self.vault.ids())}

    def close(self) -> None:
        _OPEN.discard(self)
        unused = self._pool.drain()
        try:
            if unused:
                self.table.delete(unused)
        finally:
            self.table.close()
            self.vault.close()


class _SqliteKeyTable:
    """``keys.sqlite``: WAL, ``secure_delete``, the WAL truncated after each rotation."""

    def __init__(self, path: str, synchronous: str) -> None:
        self._conn = _private_sqlite(path, synchronous)
        self._lock = threading.Lock()
        with self._lock:
            self._conn.execute("CREATE TABLE IF NOT EXISTS data_keys "
                               "(key_id BLOB PRIMARY KEY, key BLOB) WITHOUT ROWID")
            columns = {r[1] for r in self._conn.execute("PRAGMA table_info(data_keys)")}
            if "kek_id" not in columns:
                self._conn.execute("ALTER TABLE data_keys ADD COLUMN kek_id BLOB")
                self._conn.execute("CREATE INDEX IF NOT EXISTS data_keys_kek "
                                   "ON data_keys (kek_id)")

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


# One advisory-lock key for letterlog's schema creation on PostgreSQL (the log's tables and
# the key table; any stable 64-bit number works).
SCHEMA_LOCK_KEY = zlib.crc32(b"letterlog schema")


class _PostgresKeyTable:
    """The table ``letterlog_data_keys`` in the log's PostgreSQL database: wrapped keys only,
    so what its WAL, archives, replicas and backups keep is useless once the KEK is gone."""

    def __init__(self, conninfo: str) -> None:
        import psycopg

        self._conninfo = conninfo
        self._conn = psycopg.connect(conninfo, autocommit=True)
        self._lock = threading.Lock()
        # CREATE TABLE IF NOT EXISTS is not safe against itself: two processes creating the
        # table at once fail on pg_type's unique index. Serialised with the log's schema.
        with self._lock, self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
            self._conn.execute("CREATE TABLE IF NOT EXISTS letterlog_data_keys "
                               "(key_id uuid PRIMARY KEY, key bytea)")
            self._conn.execute("ALTER TABLE letterlog_data_keys "
                               "ADD COLUMN IF NOT EXISTS kek_id uuid")
            self._conn.execute("CREATE INDEX IF NOT EXISTS letterlog_data_keys_kek "
                               "ON letterlog_data_keys (kek_id)")

    def insert(self, rows: list[tuple[UUID, bytes, UUID]]) -> None:
        with self._lock, self._conn.transaction(), self._conn.cursor() as cur:
            cur.executemany("INSERT INTO letterlog_data_keys VALUES (%s, %s, %s) "
                            "ON CONFLICT (key_id) DO UPDATE SET key = EXCLUDED.key, "
                            "kek_id = EXCLUDED.kek_id", rows)

    def row(self, key_id: UUID) -> tuple[bytes | None, UUID | None] | None:
        import psycopg

        query = "SELECT key, kek_id FROM letterlog_data_keys WHERE key_id = %s"
        with self._lock:
            try:
                row = self._conn.execute(query, (key_id,)).fetchone()
            except (psycopg.OperationalError, psycopg.InterfaceError):
                # the server restarted (or the connection was cut): a read is safe to repeat
                # on a new connection; if the server is still down this raises, and the
                # caller retries later (never a reason to call the event corrupt)
                if not (self._conn.closed or self._conn.broken):
                    raise
                self._conn = psycopg.connect(self._conninfo, autocommit=True)
                row = self._conn.execute(query, (key_id,)).fetchone()
        return None if row is None else (row[0], row[1])

    def rotate(self, key_ids: list[UUID], plan: Any) -> int:
        with self._lock, self._conn.transaction(), self._conn.cursor() as cur:
            # rotations of one batch and refills wait for each other; readers never wait
            cur.execute("LOCK TABLE letterlog_data_keys IN SHARE ROW EXCLUSIVE MODE")
            rows = cur.execute(
                "SELECT key_id, key, kek_id FROM letterlog_data_keys WHERE kek_id IN "
                "(SELECT kek_id FROM letterlog_data_keys WHERE key_id = ANY(%s) "
                "AND key IS NOT NULL) OR (key_id = ANY(%s) AND kek_id IS NULL "
                "AND key IS NOT NULL)", (key_ids, key_ids)).fetchall()
            rewrapped = plan(rows)
            cur.execute("UPDATE letterlog_data_keys SET key = NULL, kek_id = NULL "
                        "WHERE key_id = ANY(%s) AND key IS NOT NULL", (key_ids,))
            destroyed = cur.rowcount
            cur.executemany("UPDATE letterlog_data_keys SET key = %s, kek_id = %s "
                            "WHERE key_id = %s", [(w, e, k) for k, w, e in rewrapped])
        return destroyed

    def delete(self, key_ids: list[UUID]) -> None:
        with self._lock:
            self._conn.execute("DELETE FROM letterlog_data_keys WHERE key_id = ANY(%s)",
                               (key_ids,))

    def destroyed_ids(self) -> list[UUID]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT key_id FROM letterlog_data_keys WHERE key IS NULL").fetchall()
        return [r[0] for r in rows]

    def referenced(self) -> set[UUID]:
        with self._lock:
            return {r[0] for r in self._conn.execute(
                "SELECT DISTINCT kek_id FROM letterlog_data_keys WHERE kek_id IS NOT NULL")}

    def legacy(self) -> list[tuple[UUID, bytes]]:
        with self._lock:
            return [(k, bytes(v)) for k, v in self._conn.execute(
                "SELECT key_id, key FROM letterlog_data_keys "
                "WHERE kek_id IS NULL AND key IS NOT NULL")]

    def count(self) -> dict[str, int]:
        with self._lock:
            row = self._conn.execute(
                "SELECT count(key), count(*) - count(key) FROM letterlog_data_keys").fetchone()
        return {"keys": row[0], "destroyed": row[1]} if row else {"keys": 0, "destroyed": 0}

    def checkpoint(self) -> None:
        """Nothing to do: the old plain keys stay in the WAL and old row versions of a store
        written before the hierarchy (ADR 0041 says so)."""

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def postgres_kek_use(conninfo: str) -> dict[UUID, int]:
    """Each KEK the log's live data keys are wrapped under, and how many (a restore's check
    before it writes anything: ADR 0074); {} for a database without the key table."""
    import psycopg

    with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
        (table,) = conn.execute("SELECT to_regclass('letterlog_data_keys')").fetchone() or (None,)
        if table is None:
            return {}
        return dict(conn.execute(
            "SELECT kek_id, count(*) FROM letterlog_data_keys WHERE kek_id IS NOT NULL "
            "AND key IS NOT NULL GROUP BY kek_id").fetchall())


def PostgresKeyStore(conninfo: str, *, vault: str | Path,  # noqa: N802
                     key_store: str | None = None, standbys: Iterable[str] = (),
                     timeout: float = 10.0) -> WrappedKeyStore:
    """Wrapped keys in the log's database; their KEKs in ``vault`` (a file outside it), or,
    with ``key_store`` (a DSN), in the key cluster, the file (if one is there) read where a
    KEK is not in the key cluster yet (before ``letterlog keys migrate``: ADR 0073)."""
    table = _PostgresKeyTable(conninfo)
    if key_store is None:
        return WrappedKeyStore(table, Vault(vault))
    from adapters.eventlog.keycluster import FallbackVault, PostgresVault

    try:
        keks: Any = PostgresVault(key_store, timeout=timeout, standbys=standbys)
        if Path(vault).is_file():
            keks = FallbackVault(keks, Vault(vault))
    except BaseException:
        table.close()
        raise
    return WrappedKeyStore(table, keks)


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
