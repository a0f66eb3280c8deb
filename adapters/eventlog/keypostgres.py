"""The key store on PostgreSQL: wrapped data keys in the log's database
(``letterlog_data_keys``), their KEKs in a vault file or the key cluster (ADR 0073)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
from psycopg.conninfo import make_conninfo

from adapters.eventlog.keycluster import FallbackVault, PostgresVault
from adapters.eventlog.keyvault import Vault
from adapters.eventlog.schemalock import SCHEMA_LOCK_KEY
from adapters.eventlog.wrappedkeys import WrappedKeyStore
from domain.errors import SettingsError


class _PostgresKeyTable:
    """The table ``letterlog_data_keys`` in the log's PostgreSQL database: wrapped keys only,
    so what its WAL, archives, replicas and backups keep is useless once the KEK is gone."""

    def __init__(self, conninfo: str) -> None:
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
        rows = self._read("SELECT key, kek_id FROM letterlog_data_keys WHERE key_id = %s",
                          key_id)
        return (rows[0][0], rows[0][1]) if rows else None

    def rows(self, key_ids: list[bytes]) -> dict[bytes, tuple[bytes | None, UUID | None]]:
        """``row`` of each of ``key_ids`` (16 bytes each) found, in one query."""
        return {k.bytes: (w, e) for k, w, e in self._read(
            "SELECT key_id, key, kek_id FROM letterlog_data_keys WHERE key_id = ANY(%s)",
            [UUID(bytes=k) for k in key_ids])}

    def _read(self, query: str, argument: Any) -> list[Any]:
        with self._lock:
            try:
                return self._conn.execute(query, (argument,)).fetchall()
            except (psycopg.OperationalError, psycopg.InterfaceError):
                # the server restarted (or the connection was cut): a read is safe to repeat
                # on a new connection; if the server is still down this raises, and the
                # caller retries later (never a reason to call the event corrupt)
                if not (self._conn.closed or self._conn.broken):
                    raise
                self._conn = psycopg.connect(self._conninfo, autocommit=True)
                return self._conn.execute(query, (argument,)).fetchall()

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
    try:
        keks: Any = PostgresVault(key_store, timeout=timeout, standbys=standbys)
        if Path(vault).is_file():
            keks = FallbackVault(keks, Vault(vault))
    except BaseException:
        table.close()
        raise
    return WrappedKeyStore(table, keks)


def key_store_of(env: Any) -> WrappedKeyStore:
    """The data keys of a PostgreSQL log whose eventsourcing environment is ``env``: the key
    table in the log's database, the KEKs in ``LETTERLOG_KEY_VAULT`` (required: a file
    outside the database) or the key cluster (``LETTERLOG_KEY_STORE_DSN``)."""
    vault = env.get("LETTERLOG_KEY_VAULT")
    if not vault:
        raise SettingsError("a PostgreSQL log needs its key vault: LETTERLOG_KEY_VAULT "
                            "(a file outside the database: the key-encryption keys)")
    return PostgresKeyStore(make_conninfo(
        dbname=env.get("POSTGRES_DBNAME"), host=env.get("POSTGRES_HOST"),
        port=env.get("POSTGRES_PORT"), user=env.get("POSTGRES_USER"),
        password=env.get("POSTGRES_PASSWORD"),
        connect_timeout=env.get("POSTGRES_CONNECT_TIMEOUT") or "10"), vault=vault,
        key_store=env.get("LETTERLOG_KEY_STORE_DSN") or None,
        standbys=(env.get("LETTERLOG_KEY_STORE_STANDBYS") or "").split(),
        timeout=float(env.get("POSTGRES_CONNECT_TIMEOUT") or 10))


def kek_use_of(parts: dict[str, str]) -> dict[UUID, int]:
    """``postgres_kek_use`` of the log's database named by ``parts`` (``POSTGRES_DBNAME``,
    ``_HOST``, ``_PORT``, ``_USER``, ``_PASSWORD``)."""
    return postgres_kek_use(make_conninfo(
        dbname=parts["POSTGRES_DBNAME"], host=parts["POSTGRES_HOST"],
        port=parts["POSTGRES_PORT"], user=parts["POSTGRES_USER"],
        password=parts["POSTGRES_PASSWORD"]))
