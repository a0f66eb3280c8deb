"""The attacker of the crash tests of erasure on a log in PostgreSQL (ADR 0063, ADR 0071):
every KEK in the key cluster (ADR 0073: every KEK it serves, and KEK-sized windows near KEK
ids in every file of its data directory as it is on disk), or, for a deployment without
one, in a copy of the vault (and KEK-sized windows near KEK ids in its files), tried on
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
from tests.erasure_support import every_file, files_holding_any_form

PURGED_TOPIC = "domain.message:Message.Purged"


def intents_left(dsn: str, data: Path) -> int:
    """The erasure intents not finished: rows in the log's database (ADR 0084), and any
    intent file the host's data directory still holds."""
    import psycopg

    files = data / "erasures-intent"
    count = len(list(files.glob("*.json"))) if files.is_dir() else 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        try:
            (rows,) = conn.execute("SELECT count(*) FROM letterlog_erasure_intents").fetchone()  # type: ignore[misc]
        except psycopg.errors.UndefinedTable:
            rows = 0
    return count + int(rows)


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


def recoverable_keys_in_cluster(key_dsn: str, key_files: list[bytes], dsn: str,
                                pg_blobs: list[bytes], key_ids: list[UUID]) -> list[UUID]:
    """The data keys among ``key_ids`` that open with a key the key cluster holds."""
    keks = {bytes(r[0]) for r in sql(key_dsn, "SELECT kek FROM letterlog_keks")}
    return [key_id for key_id in key_ids if key_opens(
        key_id, pg_blobs, key_files, keks, wrapped={bytes(r[0]) for r in sql(
            dsn, "SELECT key FROM letterlog_data_keys WHERE key_id = %s AND key IS NOT NULL",
            key_id)})]


def stale_keks_in_cluster(key_dsn: str, dsn: str, *, retiring_only: bool = False) -> int:
    """KEKs in the key cluster that no data key refers to (a rotation's old KEK left);
    ``retiring_only`` as for the vault."""
    referenced = {r[0] for r in sql(
        dsn, "SELECT DISTINCT kek_id FROM letterlog_data_keys WHERE kek_id IS NOT NULL")}
    where = " WHERE retiring" if retiring_only else ""
    return sum(1 for (k,) in sql(key_dsn, f"SELECT kek_id FROM letterlog_keks{where}")  # noqa: S608
               if k not in referenced)


def copy_vault(data: Path, scratch: Path) -> Path:
    """The vault's files as they are on disk (``-wal`` included), copied under ``scratch``."""
    vault_copy = scratch / "vault"
    vault_copy.mkdir(parents=True)
    for p in data.iterdir():
        if p.name.startswith("vault.sqlite") and p.is_file():
            shutil.copy2(p, vault_copy / p.name)
    return vault_copy


def evidence(dep: dict[str, Any], scratch: Path, key_ids: list[UUID],
             markers: list[bytes]) -> dict[str, Any]:
    """What an attacker finds in a deployment whose log is in PostgreSQL, item by item:
    ``dep`` names its data directory, DSNs and the server's data directory, and its key
    cluster's DSN and data directory (``key_dsn``, ``key_root``) if it has one. The ids
    purged in the log (``purged``), the data keys among ``key_ids`` that open
    (``keys_open``), the intents left, the rotated-away KEKs, and the files of the data
    directory holding any of ``markers`` with those they hold (``files``)."""
    data, dsn = dep["data"], dep["dsn"]
    retiring_only = dep.get("retiring_only", False)
    if dep.get("key_dsn"):
        # every file of the key cluster as it is on disk (no checkpoint: that would do the
        # erasure's scrub for it)
        key_files = [blob for _, blob in every_file(dep["key_root"])]
        assert not list(data.glob("vault.sqlite*")), "the KEKs are the key cluster's alone"
    else:
        vault_copy = copy_vault(data, scratch)
    try:
        [(table,)] = sql(dsn, "SELECT table_name FROM information_schema.columns WHERE "
                         "column_name = 'topic' AND table_name LIKE '%%events'")
        purged = {str(r[0]) for r in sql(
            dsn, f'SELECT originator_id FROM "{table}" WHERE topic = %s', PURGED_TOPIC)}
        blobs = pg_files(dsn, dep["admin_dsn"], dep["pg_root"])
        if dep.get("key_dsn"):
            keys_open = recoverable_keys_in_cluster(dep["key_dsn"], key_files, dsn, blobs,
                                                    key_ids)
            stale = stale_keks_in_cluster(dep["key_dsn"], dsn, retiring_only=retiring_only)
        else:
            keys_open = recoverable_keys(vault_copy, dsn, blobs, key_ids)
            stale = stale_keks(vault_copy, dsn, retiring_only=retiring_only)
        return {"intents": intents_left(dsn, data), "purged": purged, "keys_open": keys_open,
                "stale_keks": stale, "files": files_holding_any_form(data, markers)}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def state_of(dep: dict[str, Any], scratch: Path, ids: list[UUID], key_ids: list[UUID],
             markers: list[bytes]) -> dict[str, Any]:
    """What is left (``tests.erasure_crash_support.Examine``) of a deployment whose log is in
    PostgreSQL: ``evidence`` counted."""
    found = evidence(dep, scratch, key_ids, markers)
    return {"intents": found["intents"],
            "purged": sum(1 for i in ids if str(i) in found["purged"]),
            "keys_open": len(found["keys_open"]), "stale_keks": found["stale_keks"],
            "files_with_markers": sorted(found["files"])}
