"""The key store's PostgreSQL cluster (ADR 0073) and a streaming standby of it.

``KeyClusterServer``: a ``PostgresServer`` of its own (its own ``initdb``, WAL and port),
run with the WAL policy that lets an erasure's scrub leave no copy of a removed KEK:
``wal_recycle=off`` (old segments unlinked, never renamed for reuse), ``wal_init_zero=on``,
``archive_mode=off``, ``wal_keep_size=0``; the application's role may run what the scrub
runs (``CHECKPOINT``: ``pg_checkpoint``; ``pg_switch_wal``, ``pg_ls_waldir``,
``pg_control_checkpoint``). ``KeyStandbyServer``: ``pg_basebackup -R`` of it, started as a
hot standby, and made the primary's synchronous standby (a commit returns once the standby
has flushed it). ``promote()`` makes it the primary.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from ._common import PRIVATE_UMASK, ServiceFailed, run_checked, wait_for
from .postgres import PostgresServer, _os_user

__all__ = ["KEY_CLUSTER_SETTINGS", "KeyClusterServer", "KeyStandbyServer"]

KEY_CLUSTER_SETTINGS: dict[str, Any] = {
    "wal_level": "replica",
    "archive_mode": "off",
    "wal_recycle": "off",
    "wal_init_zero": "on",
    "wal_keep_size": "0",
    "max_wal_senders": "4",
    "max_replication_slots": "4",
    "synchronous_commit": "on",
    "min_wal_size": "32MB",
}


class KeyClusterServer(PostgresServer):
    """The key cluster: database ``letterlog_keys`` owned by role ``letterlog_keys``."""

    name = "keys"

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("user", "letterlog_keys")
        kwargs.setdefault("dbname", "letterlog_keys")
        kwargs["settings"] = {**KEY_CLUSTER_SETTINGS, **(kwargs.get("settings") or {})}
        super().__init__(**kwargs)

    def bring_up(self, launch: Any) -> None:
        super().bring_up(launch)
        import psycopg
        from psycopg import sql

        role = sql.Identifier(self.user)
        # a function's grants are per database: the store's, and template1 for any made later
        for db in (self.dbname, "template1"):
            in_db = self.admin_dsn.rsplit("/", 1)[0] + f"/{db}"
            with psycopg.connect(in_db, autocommit=True, connect_timeout=10) as conn:
                conn.execute(sql.SQL("GRANT pg_checkpoint, pg_monitor TO {}").format(role))
                for function in ("pg_switch_wal()", "pg_ls_waldir()",
                                 "pg_control_checkpoint()"):
                    conn.execute(sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}").format(
                        sql.SQL(function), role))


class KeyStandbyServer(PostgresServer):
    """A streaming standby of ``primary`` (a started ``KeyClusterServer``), synchronous."""

    name = "keys-standby"

    def __init__(self, primary: KeyClusterServer, *, synchronous: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(user=primary.user, dbname=primary.dbname, password=primary.password,
                         admin_password=primary.admin_password,
                         settings={**KEY_CLUSTER_SETTINGS, "hot_standby": "on"}, **kwargs)
        self.primary = primary
        self.synchronous = synchronous
        self.application_name = f"keys_standby_{os.getpid()}"

    def prepare(self) -> None:
        """``pg_basebackup -R`` of the primary into ``workdir/data`` (then the base class
        finds a cluster there and runs no initdb)."""
        assert self.workdir is not None and self.bindir is not None
        account = _os_user()
        if account is not None:
            os.chown(self.workdir, account.pw_uid, account.pw_gid)
        if not self.initialized:
            source = f"{self.primary.admin_dsn}?application_name={self.application_name}"
            run_checked([str(self.bindir / "pg_basebackup"), "-d", source, "-D",
                         str(self.workdir / "data"), "-R", "-X", "stream", "-c", "fast",
                         "--no-sync"],
                        what="keys-standby: pg_basebackup", log=self.workdir / "basebackup.log",
                        cwd=self.workdir, timeout=300, umask=PRIVATE_UMASK,
                        user=account.pw_uid if account else None,
                        group=account.pw_gid if account else None)
        super().prepare()
        if account is not None:
            os.chown(self.workdir / "sock", account.pw_uid, account.pw_gid)
            (self.workdir / "postgres.log").touch()
            os.chown(self.workdir / "postgres.log", account.pw_uid, account.pw_gid)

    def _create_role_and_db(self) -> None:
        """Replicated from the primary."""

    def bring_up(self, launch: Any) -> None:
        super().bring_up(launch)
        if not self.synchronous:
            return
        import psycopg

        with psycopg.connect(self.primary.admin_dsn, autocommit=True) as conn:
            conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = "
                         f"'{self.application_name}'")
            conn.execute("SELECT pg_reload_conf()")

            def synchronous() -> bool:
                row = conn.execute("SELECT sync_state FROM pg_stat_replication WHERE "
                                   "application_name = %s", (self.application_name,)).fetchone()
                return row is not None and row[0] == "sync"

            wait_for(synchronous, what="the key cluster's standby to be synchronous",
                     timeout=60, log_paths=self.log_paths, interval=0.2)

    def promote(self) -> None:
        """The standby made the primary (``pg_promote``, waited for)."""
        import psycopg

        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            (done,) = conn.execute("SELECT pg_promote(true, 60)").fetchone()  # type: ignore[misc]
        if not done:
            raise ServiceFailed(f"{self.name}: not promoted within 60 s")

    @property
    def log_paths(self) -> list[Any]:
        paths = super().log_paths
        return [*paths, self.workdir / "basebackup.log"] if self.workdir else paths


def remove_data(server: PostgresServer) -> None:
    """A lost disk: the server's whole data directory deleted (the server already stopped
    or killed)."""
    if server.workdir is not None:
        shutil.rmtree(server.workdir / "data", ignore_errors=True)
