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

A reader of many events at once (a page of the log, a batch of Kafka records) reads their
keys first, in one query per key store (``keys_read_ahead``, ADR 0117), and opens each
sealed part with them; they are dropped with the page.

Here: the cipher, the registry of open key stores, the pool and the in-memory store. The
key stores: ``wrappedkeys`` (data keys wrapped by KEKs) on ``keysqlite`` or ``keypostgres``
(where the wrapped keys live), their KEKs in ``keyvault`` (or the key cluster).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Protocol
from uuid import UUID

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

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


def open_sealed(blob: bytes, keys: Mapping[bytes, bytes] | None = None
                ) -> tuple[UUID, bytes | None, bytes | None]:
    """``(key id, key, plaintext)``; key and plaintext are None if the key was destroyed.
    ``keys``: what ``keys_read_ahead`` read for the page this blob is in."""
    raw = bytes(blob[:16])
    key_id = UUID(bytes=raw)
    key = keys.get(raw) if keys else None
    key = key_for(key_id) if key is None else key or None
    if key is None:
        return key_id, None, None
    nonce, ciphertext = blob[16:16 + NONCE], blob[16 + NONCE:]
    return key_id, key, AESGCM(key).decrypt(bytes(nonce), bytes(ciphertext), key_id.bytes)


class KeyStore(Protocol):
    """A store may also read many keys at once, ``get_many(key_ids) -> {key id: key or
    DESTROYED}`` for the ids it holds, each id its 16 bytes (``keys_read_ahead`` uses it
    where it is there)."""

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


def keys_read_ahead(key_ids: Collection[bytes]) -> dict[bytes, bytes]:
    """The keys of ``key_ids`` (each a key id's 16 bytes; ``DESTROYED`` for a destroyed
    one), from one read per open key store that reads many keys at once (``get_many``):
    handed to ``open_sealed`` (through ``transcoder.ext_hook_for``), a page of sealed events
    costs one query instead of one per event (ADR 0117). Only an optimisation, never a
    change of meaning: a key it lacks (no store has ``get_many``, its read failed, a key no
    store knows) is read on its own by ``key_for``, with the same errors. The keys are the
    state at the read, as a read per event at that moment would be; the caller holds them
    for one page or batch only."""
    wanted: set[bytes] = set(key_ids)
    found: dict[bytes, bytes] = {}
    if not wanted:
        return found
    for store in list(_OPEN):
        many = getattr(store, "get_many", None)
        if many is None or not wanted:
            continue
        try:
            got = many(wanted)
        except Exception:  # noqa: BLE001 - read one by one then, where failures are said
            continue
        found.update(got)
        wanted.difference_update(got)
    return found


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

    def get_many(self, key_ids: Iterable[bytes]) -> dict[bytes, bytes]:
        return {k: v for k in key_ids if (v := self._keys.get(UUID(bytes=k))) is not None}

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
