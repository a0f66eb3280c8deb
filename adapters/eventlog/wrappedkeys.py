"""The key store of data keys wrapped by key-encryption keys (ADR 0041): ``WrappedKeyStore``
over a key table (``keysqlite``, ``keypostgres``) and a KEK vault (``keyvault.Vault`` or
the key cluster)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol
from uuid import UUID

from adapters.eventlog.keyvault import KeyVaultBusy, unwrap, unwrapper, wrap
from adapters.eventlog.sealing import (
    _OPEN,
    DESTROYED,
    POOL,
    KeyStoreMissing,
    _Pool,
    new_keys,
    register,
)
from adapters.operations.faults import fault_point

ORPHAN_AGE_S = 3600.0
# A key read while another process rotates its batch is read again, at most this many times.
RACES = 5
# ``letterlog keys migrate`` on a store whose KEKs have no key cluster to move into
NO_KEY_CLUSTER = ("no key store to move the key-encryption keys into: set "
                  "LETTERLOG_KEY_STORE_DSN (the key cluster; scale-out only)")


class _KeyTable(Protocol):
    """Where the wrapped data keys live: ``(key_id, wrapped key, kek_id)``; a destroyed key
    keeps its id with both NULL; a key written before the hierarchy has a plain key and no
    KEK until ``wrap_legacy``."""

    def insert(self, rows: list[tuple[UUID, bytes, UUID]]) -> None: ...
    def row(self, key_id: UUID) -> tuple[bytes | None, UUID | None] | None: ...
    def rows(self, key_ids: list[bytes]) -> dict[bytes, tuple[bytes | None, UUID | None]]: ...
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
            key = self._opened(key_id.bytes, wrapped, kek_id, {})
            if key is not None:
                return key
            # another process rotated the batch between the two reads (the row read was
            # wrapped under the KEK it has just removed): read the row again
        raise KeyStoreMissing(f"data key {key_id}: its key-encryption key {kek_id} is not "
                              f"in the vault {self.vault.path} (the wrong vault, or lost)")

    def get_many(self, key_ids: Iterable[bytes]) -> dict[bytes, bytes]:
        """``get`` of each key this store holds (ids and answers by the id's 16 bytes), from
        one read of the key table (ADR 0117); a key whose KEK is not in the vault (a
        rotation between the two reads) is left out, for ``get`` to read again."""
        unwrappers: dict[UUID, Callable[[bytes, bytes], bytes] | None] = {}
        found: dict[bytes, bytes] = {}
        for key_id, (wrapped, kek_id) in self.table.rows(list(key_ids)).items():
            with contextlib.suppress(Exception):  # ``get`` reads it again and says
                key = self._opened(key_id, wrapped, kek_id, unwrappers)
                if key is not None:
                    found[key_id] = key
        return found

    def _opened(self, key_id: bytes, wrapped: bytes | None, kek_id: UUID | None,
                unwrappers: dict[UUID, Callable[[bytes, bytes], bytes] | None]) -> bytes | None:
        """The key a row of the key table holds (``DESTROYED`` if destroyed); None if its KEK
        is not in the vault. ``unwrappers``: the KEKs' ciphers found so far (per KEK)."""
        if wrapped is None:
            return DESTROYED
        if kek_id is None:
            return bytes(wrapped)  # not wrapped yet (a store opened by an older version)
        if kek_id not in unwrappers:
            kek = self.vault.get(kek_id)
            unwrappers[kek_id] = None if kek is None else unwrapper(kek)
        unwrap_one = unwrappers[kek_id]
        return None if unwrap_one is None else unwrap_one(key_id, wrapped)

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
