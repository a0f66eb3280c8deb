"""``letterlog keys migrate``: a scale-out store's ``vault.sqlite`` moved into the key
cluster (ADR 0073). Until it has run, reads fall back to the file (``FallbackVault``)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any
from uuid import UUID

from adapters.eventlog.keycluster import FallbackVault, PostgresVault
from adapters.eventlog.keyvault import Vault
from adapters.eventlog.wrappedkeys import NO_KEY_CLUSTER, WrappedKeyStore
from domain.errors import LetterlogError, SettingsError


class MigrationFailed(LetterlogError):
    """A KEK would be lost by removing the vault file: nothing was removed."""


def migrate_store(keys: Any, vault_file: Path, *, remove_file: bool = True) -> dict[str, Any]:
    """``migrate`` of the store whose data keys are ``keys`` into its key cluster: the
    cluster itself when reads still fall back to ``vault_file`` (``FallbackVault``).
    ``SettingsError`` when its KEKs have no key cluster (``LETTERLOG_KEY_STORE_DSN``)."""
    vault = keys.vault if isinstance(keys, WrappedKeyStore) else None
    if not isinstance(keys, WrappedKeyStore) or not isinstance(
            vault, FallbackVault | PostgresVault):
        raise SettingsError(NO_KEY_CLUSTER)
    primary = vault.primary if isinstance(vault, FallbackVault) else vault
    return migrate(vault_file, primary, keys.table.referenced(), remove_file=remove_file)


def migrate(vault_file: Path, key_store: PostgresVault, referenced: set[UUID],
            *, remove_file: bool = True) -> dict[str, Any]:
    """``letterlog keys migrate``: every KEK of ``vault_file`` copied into the key store
    (kept if there already: idempotent), read back and compared; every KEK a data key
    refers to (``referenced``) checked to be in the key store; then, with ``remove_file``,
    the file (and its -wal, -shm) deleted. Nothing is deleted unless every check passed."""
    copied = 0
    if vault_file.is_file():
        old = Vault(vault_file)
        try:
            with old._lock:  # noqa: SLF001 - the file's own rows, with their marks
                rows = [(UUID(bytes=bytes(k)), bytes(v), c, bool(r)) for k, v, c, r in
                        old._conn.execute("SELECT kek_id, kek, created, retiring FROM keks")]  # noqa: SLF001
        finally:
            old.close()
        before = set(key_store.ids())
        for kek_id, kek, created, retiring in rows:
            key_store.add([(kek_id, kek)], created=created, retiring=retiring)
        copied = sum(1 for r in rows if r[0] not in before)
        stored = {k: v for k, v, _, _ in key_store.rows()}
        differ = [str(k) for k, v, _, _ in rows if stored.get(k) != v]
        if differ:
            raise MigrationFailed(f"{vault_file}: {len(differ)} key-encryption key(s) differ "
                                  f"in {key_store.path} (e.g. {differ[0]}): the file is kept")
        in_file = len(rows)
    else:
        in_file = 0
    missing = sorted(str(k) for k in referenced - set(key_store.ids()))
    if missing:
        raise MigrationFailed(f"{len(missing)} key-encryption key(s) that data keys refer to "
                              f"are in neither {vault_file} nor {key_store.path} (e.g. "
                              f"{missing[0]}): the messages under them cannot be opened; "
                              f"the file is kept")
    removed = False
    if remove_file and vault_file.is_file():
        for part in (Path(f"{vault_file}-wal"), Path(f"{vault_file}-shm"), vault_file):
            with contextlib.suppress(FileNotFoundError):
                part.unlink()
        removed = True
    return {"vault_file": str(vault_file), "keks_in_file": in_file, "keks_copied": copied,
            "keks_in_key_store": len(key_store.ids()), "referenced": len(referenced),
            "file_removed": removed, "key_store": key_store.path}
