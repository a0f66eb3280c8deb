"""The key-encryption keys (KEKs) in a PostgreSQL cluster of their own: the key store every
application host reaches (``LETTERLOG_KEY_STORE_DSN``; ADR 0073).

The same five operations as the vault file (``keyvault.Vault``): add, get (cached in the
process), mark retiring, remove, list. What makes a removal final on this engine is
``scrub``, the erasure's completion step on the key cluster: the table rewritten
(``VACUUM FULL``: a deleted KEK's dead tuple goes with the old file), the WAL segment
holding the deletion switched (``pg_switch_wal``) and a ``CHECKPOINT`` that unlinks every
segment before it (the cluster runs ``wal_recycle=off``: a segment is removed, never renamed
for reuse with its old bytes; ``wal_init_zero=on``; no WAL archive), then the same on every
standby named in ``LETTERLOG_KEY_STORE_STANDBYS`` (a ``CHECKPOINT`` there is a restartpoint,
which drops the replayed segments), and each checked: no segment older than the scrub's
position is left in ``pg_wal`` (``pg_ls_waldir``). Until every check passes the erasure is
not complete (exit 3, ADR 0044).

A KEK is committed here (and, with ``synchronous_standby_names``, on a standby) before any
data key it wraps is handed out: ``WrappedKeyStore`` commits the wrapped rows, then the
KEK, then uses the keys. The connection is libpq's: a multi-host DSN
(``host=a,b target_session_attrs=read-write``) follows a promoted standby; a call whose
connection broke is made once more on a new one (every write here is idempotent).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from uuid import UUID

import psycopg

from adapters.eventlog.keyscrub import TABLE, Scrub, describe, scrub
from domain.errors import StoreBusy

STATE = "letterlog_kek_scrub"  # one row: whether a removal awaits its scrub
# One advisory-lock key for the key cluster's schema (any stable 64-bit number).
SCHEMA_LOCK_KEY = 0x6C6C_6B65_6B73  # "llkeks"


class KeyClusterUnavailable(StoreBusy):
    """The key cluster did not answer: nothing was decided (a key is never taken for
    destroyed), and a retry may succeed (exit 1, an MTA's 4.x.x)."""


class PostgresVault:
    """The KEKs in ``letterlog_keks`` on the key cluster (``dsn``)."""

    def __init__(self, dsn: str, *, timeout: float = 10.0,
                 standbys: Iterable[str] = ()) -> None:
        self.dsn = dsn
        self.path = describe(dsn)  # named in messages, like the vault file's path
        self.standbys = [s for s in standbys if s]
        self._timeout = max(2, int(timeout + 0.999))
        self._lock = threading.Lock()
        self._cache: dict[UUID, bytes] = {}
        self._conn: Any = None
        with self._lock:
            self._call(self._schema)

    # -- the connection ----------------------------------------------------------------
    def _connect(self) -> Any:
        try:
            return psycopg.connect(self.dsn, autocommit=True, connect_timeout=self._timeout)
        except psycopg.OperationalError as e:
            raise KeyClusterUnavailable(f"{self.path}: {' '.join(str(e).split())}") from None

    def _call(self, work: Callable[[Any], Any]) -> Any:
        """``work(connection)``; once more on a new connection if this one broke (a
        restarted or promoted server: every statement here may be repeated)."""
        if self._conn is None or self._conn.closed:
            self._conn = self._connect()
        try:
            return work(self._conn)
        except (psycopg.OperationalError, psycopg.InterfaceError) as e:
            if not (self._conn.closed or self._conn.broken):
                raise
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = self._connect()
            try:
                return work(self._conn)
            except (psycopg.OperationalError, psycopg.InterfaceError):
                raise KeyClusterUnavailable(f"{self.path}: {' '.join(str(e).split())}") from e

    @staticmethod
    def _schema(conn: Any) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
            conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (kek_id uuid PRIMARY KEY, "
                         "kek bytea NOT NULL, created double precision NOT NULL, "
                         "retiring boolean NOT NULL DEFAULT false)")
            conn.execute(f"CREATE TABLE IF NOT EXISTS {STATE} (one boolean PRIMARY KEY "
                         "DEFAULT true CHECK (one), dirty boolean NOT NULL)")
            conn.execute(f"INSERT INTO {STATE} VALUES (true, false) ON CONFLICT DO NOTHING")

    # -- the vault's operations ------------------------------------------------------------
    def add(self, keks: Iterable[tuple[UUID, bytes]], *, created: float | None = None,
            retiring: bool = False) -> None:
        """One statement, one round trip (a pool refill's KEK); a KEK already there is
        kept (a repeated call after a lost answer, a migration run twice)."""
        rows = list(keks)
        if not rows:
            return
        now = time.time() if created is None else created
        ids, values = [k for k, _ in rows], [v for _, v in rows]
        with self._lock:
            self._call(lambda c: c.execute(
                f"INSERT INTO {TABLE} (kek_id, kek, created, retiring) "
                "SELECT * FROM unnest(%s::uuid[], %s::bytea[]) AS t(i, k), "
                "LATERAL (SELECT %s::double precision, %s::boolean) AS x "
                "ON CONFLICT (kek_id) DO NOTHING", (ids, values, now, retiring)))

    def get(self, kek_id: UUID) -> bytes | None:
        kek = self._cache.get(kek_id)
        if kek is None:
            with self._lock:
                row = self._call(lambda c: c.execute(
                    f"SELECT kek FROM {TABLE} WHERE kek_id = %s", (kek_id,)).fetchone())
            if row is None:
                return None
            kek = self._cache[kek_id] = bytes(row[0])
        return kek

    def mark_retiring(self, kek_ids: Iterable[UUID]) -> None:
        ids = list(kek_ids)
        if ids:
            with self._lock:
                self._call(lambda c: c.execute(
                    f"UPDATE {TABLE} SET retiring = true WHERE kek_id = ANY(%s)", (ids,)))

    def retiring(self) -> set[UUID]:
        with self._lock:
            return {r[0] for r in self._call(lambda c: c.execute(
                f"SELECT kek_id FROM {TABLE} WHERE retiring").fetchall())}

    def remove(self, kek_ids: Iterable[UUID], *, wait: float = 10.0) -> None:
        """The KEKs deleted, and the scrub marked owed in the same transaction (the
        erasure's completion step makes it final: ``scrub``)."""
        ids = list(kek_ids)
        for k in ids:
            self._cache.pop(k, None)
        if not ids:
            return

        def delete(conn: Any) -> None:
            with conn.transaction():
                conn.execute(f"DELETE FROM {TABLE} WHERE kek_id = ANY(%s)", (ids,))
                conn.execute(f"UPDATE {STATE} SET dirty = true")

        with self._lock:
            self._call(delete)

    def checkpoint(self, wait: float = 10.0) -> None:
        """Nothing at once: ``scrub`` (the completion step) makes removals final."""

    def ids(self) -> dict[UUID, float]:
        with self._lock:
            return dict(self._call(lambda c: c.execute(
                f"SELECT kek_id, created FROM {TABLE}").fetchall()))

    def rows(self) -> list[tuple[UUID, bytes, float, bool]]:
        """Every KEK with its creation time and retiring mark (a backup's copy)."""
        with self._lock:
            return [(k, bytes(v), c, r) for k, v, c, r in self._call(lambda c: c.execute(
                f"SELECT kek_id, kek, created, retiring FROM {TABLE}").fetchall())]

    def owes_scrub(self) -> bool:
        with self._lock:
            row = self._call(lambda c: c.execute(f"SELECT dirty FROM {STATE}").fetchone())
        return bool(row and row[0])

    def scrub(self, deadline: float, *, force: bool = False) -> Scrub:
        """Makes every removal final in every file of the key cluster and its standbys
        (see the module's docstring), unless none is owed (``force``: even then); the
        outcome names what is left."""
        if not force and not self.owes_scrub():
            return Scrub(done=True, owed=False)
        with self._lock:
            outcome = scrub(self.dsn, self.standbys, deadline, self.path)
            if outcome.done:
                self._call(lambda c: c.execute(f"UPDATE {STATE} SET dirty = false"))
        return outcome

    def close(self) -> None:
        self._cache.clear()
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = None


class FallbackVault:
    """The key store, and the old vault file read where a KEK is not in it yet (a store
    before ``letterlog keys migrate``). New KEKs go to the key store only; a removal removes
    from both."""

    def __init__(self, primary: PostgresVault, old: Any) -> None:
        self.primary, self.old = primary, old
        self.path = primary.path
        self.dsn = primary.dsn

    def add(self, keks: Iterable[tuple[UUID, bytes]]) -> None:
        self.primary.add(keks)

    def get(self, kek_id: UUID) -> bytes | None:
        return self.primary.get(kek_id) or self.old.get(kek_id)

    def mark_retiring(self, kek_ids: Iterable[UUID]) -> None:
        ids = list(kek_ids)
        self.primary.mark_retiring(ids)
        self.old.mark_retiring(ids)

    def retiring(self) -> set[UUID]:
        found: set[UUID] = self.primary.retiring() | self.old.retiring()
        return found

    def remove(self, kek_ids: Iterable[UUID], *, wait: float = 10.0) -> None:
        ids = list(kek_ids)
        self.primary.remove(ids, wait=wait)
        self.old.remove(ids, wait=wait)

    def checkpoint(self, wait: float = 10.0) -> None:
        self.old.checkpoint(wait)

    def ids(self) -> dict[UUID, float]:
        return {**self.old.ids(), **self.primary.ids()}

    def owes_scrub(self) -> bool:
        return self.primary.owes_scrub()

    def scrub(self, deadline: float, *, force: bool = False) -> Scrub:
        return self.primary.scrub(deadline, force=force)

    def close(self) -> None:
        try:
            self.primary.close()
        finally:
            self.old.close()


def kek_ids(dsn: str, *, timeout: float = 10.0) -> set[UUID]:
    """The KEK ids the key cluster holds, read only (no table made: {} without one)."""
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=max(2, int(timeout))) as c:
            (table,) = c.execute(f"SELECT to_regclass('{TABLE}')").fetchone() or (None,)
            if table is None:
                return set()
            return {r[0] for r in c.execute(f"SELECT kek_id FROM {TABLE}").fetchall()}
    except psycopg.OperationalError as e:
        raise KeyClusterUnavailable(f"{describe(dsn)}: {' '.join(str(e).split())}") from None
