"""The attacker of the crash tests of erasure on a log in PostgreSQL (ADR 0063, ADR 0071):
every KEK in a copy of the vault (and KEK-sized windows near KEK ids in its files), tried on
every wrapped copy of the erased messages' data keys: the live row, and every window near
the key id in the database's heap files and ``pg_wal`` after a checkpoint. Shared by
tests/services/test_erasure_crash_scaleout.py (tables embedded) and
tests/services/test_erasure_crash_hbase.py (HBase, Kafka and a stream worker)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any
from uuid import UUID

from tests.erasure_crash_support import key_opens
from tests.erasure_support import files_holding_any_form

PURGED_TOPIC = "domain.message:Message.Purged"


def pg_files(dsn: str, admin_dsn: str, pg_root: Path) -> list[bytes]:
    """The database's heap and index files and the server's WAL, after a checkpoint (what a
    copy of the server's disk holds, old row versions included)."""
    import psycopg

    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # the heap's pages on disk, as a copy of it holds them
    with psycopg.connect(dsn, autocommit=True) as conn:
        (oid,) = conn.execute("SELECT oid FROM pg_database "
                              "WHERE datname = current_database()").fetchone()  # type: ignore[misc]
    blobs = []
    for sub in (pg_root / "base" / str(oid), pg_root / "pg_wal"):
        for path in sub.iterdir():
            if path.is_file():
                blobs.append(path.read_bytes())
    return blobs


def sql(dsn: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return list(conn.execute(query, params).fetchall())  # type: ignore[arg-type]


def recoverable_keys(vault_copy: Path, dsn: str, pg_blobs: list[bytes],
                     key_ids: list[UUID]) -> list[UUID]:
    """The data keys among ``key_ids`` that open with a key the deployment holds."""
    vault_files = [p.read_bytes() for p in vault_copy.iterdir() if p.is_file()]
    con = sqlite3.connect(vault_copy / "vault.sqlite")
    try:
        keks = {bytes(r[0]) for r in con.execute("SELECT kek FROM keks")}
    finally:
        con.close()
    return [key_id for key_id in key_ids if key_opens(
        key_id, pg_blobs, vault_files, keks, wrapped={bytes(r[0]) for r in sql(
            dsn, "SELECT key FROM letterlog_data_keys WHERE key_id = %s AND key IS NOT NULL",
            key_id)})]


def stale_keks(vault_copy: Path, dsn: str, *, retiring_only: bool = False) -> int:
    """KEKs in the vault that no data key refers to (a rotation's old KEK left behind).
    ``retiring_only``: only those a rotation marked (a deployment whose processes came and
    went also holds KEKs of pool refills whose unused keys were deleted: they wrapped keys
    that never sealed anything, and the sweep removes them after an hour)."""
    referenced = {r[0].bytes for r in sql(
        dsn, "SELECT DISTINCT kek_id FROM letterlog_data_keys WHERE kek_id IS NOT NULL")}
    con = sqlite3.connect(vault_copy / "vault.sqlite")
    where = " WHERE retiring = 1" if retiring_only else ""
    try:
        return sum(1 for (k,) in con.execute(f"SELECT kek_id FROM keks{where}")  # noqa: S608
                   if bytes(k) not in referenced)
    finally:
        con.close()


def state_of(dep: dict[str, Any], scratch: Path, ids: list[UUID], key_ids: list[UUID],
             markers: list[bytes]) -> dict[str, Any]:
    """What is left (``tests.erasure_crash_support.Examine``) of a deployment whose log is in
    PostgreSQL: ``dep`` names its data directory, DSNs and the server's data directory."""
    data, dsn = dep["data"], dep["dsn"]
    vault_copy = scratch / "vault"
    vault_copy.mkdir(parents=True)
    for p in data.iterdir():  # the vault's files as they are on disk (-wal included)
        if p.name.startswith("vault.sqlite") and p.is_file():
            shutil.copy2(p, vault_copy / p.name)
    try:
        [(table,)] = sql(dsn, "SELECT table_name FROM information_schema.columns WHERE "
                         "column_name = 'topic' AND table_name LIKE '%%events'")
        purged = {str(r[0]) for r in sql(
            dsn, f'SELECT originator_id FROM "{table}" WHERE topic = %s', PURGED_TOPIC)}
        intents = data / "erasures-intent"
        blobs = pg_files(dsn, dep["admin_dsn"], dep["pg_root"])
        return {"intents": len(list(intents.glob("*.json"))) if intents.is_dir() else 0,
                "purged": sum(1 for i in ids if str(i) in purged),
                "keys_open": len(recoverable_keys(vault_copy, dsn, blobs, key_ids)),
                "stale_keks": stale_keks(vault_copy, dsn,
                                         retiring_only=dep.get("retiring_only", False)),
                "files_with_markers": sorted(files_holding_any_form(data, markers))}
    finally:
        shutil.rmtree(scratch)
