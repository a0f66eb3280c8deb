"""Making a removed KEK gone from every file of the key cluster (``PostgresVault.scrub``).

In order, on the primary: ``VACUUM FULL`` of the KEK table (a new file without the dead
tuples; the old one unlinked), ``pg_switch_wal()`` (the segment that logged the deletion,
and the full-page images holding the deleted row, is closed), ``CHECKPOINT`` (every segment
before the checkpoint's redo point is unlinked: ``wal_recycle=off``, no archive, no
``wal_keep_size``). Then each standby named: once it has replayed that checkpoint, a
``CHECKPOINT`` there (a restartpoint) unlinks its copies. Each server is then checked:
``pg_ls_waldir()`` lists no segment up to the one that held the deletion. Settings that
would keep a copy (``archive_mode`` on, ``wal_recycle`` on) are reported, never changed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

TABLE = "letterlog_keks"
POLL_S = 0.05


def describe(dsn: str) -> str:
    """The DSN without its password, for messages."""
    try:
        parts = conninfo_to_dict(dsn)
    except Exception:  # noqa: BLE001 - a malformed DSN is named as given, less a password
        return "the key store"
    return (f"key store {parts.get('host', '?')}:{parts.get('port', '5432')}"
            f"/{parts.get('dbname', '')}")


@dataclass
class Scrub:
    """What a scrub of the key cluster did: ``done`` once no file of the primary or of a
    standby named holds a removed KEK; ``left``: one line per server that still may."""

    done: bool
    owed: bool = True
    left: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"done": self.done, "owed": self.owed, "left": self.left,
                "seconds": round(self.seconds, 3)}


def _old_segments(conn: Any, boundary: str) -> list[str]:
    """WAL files (segments, ``.partial`` ones too) at or before ``boundary`` (a segment
    name; compared without the timeline, the first 8 characters)."""
    names = [r[0] for r in conn.execute("SELECT name FROM pg_ls_waldir()").fetchall()]
    return sorted(n for n in names if len(n) >= 24 and n[:24].isalnum()
                  and not n.endswith(".history") and n[8:24] <= boundary[8:24])


def _policy(conn: Any, where: str) -> list[str]:
    settings = dict(conn.execute(
        "SELECT name, setting FROM pg_settings WHERE name IN "
        "('archive_mode', 'wal_recycle', 'wal_keep_size')").fetchall())
    left = []
    if settings.get("archive_mode", "off") != "off":
        left.append(f"{where}: archive_mode is {settings['archive_mode']}: its WAL archive "
                    "keeps removed key-encryption keys (the key cluster must not archive)")
    if settings.get("wal_recycle", "off") != "off":
        left.append(f"{where}: wal_recycle is on: old WAL segments are renamed for reuse "
                    "with their bytes (set wal_recycle = off)")
    return left


def _until(deadline: float, check: Any) -> Any:
    while True:
        result = check()
        if result or time.monotonic() >= deadline:
            return result
        time.sleep(POLL_S)


def scrub(dsn: str, standbys: list[str], deadline: float, name: str) -> Scrub:
    began = time.monotonic()
    left: list[str] = []
    ms = max(100, int((deadline - time.monotonic()) * 1000))
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f"SET lock_timeout = {ms}")
            conn.execute(f"VACUUM FULL {TABLE}")
            boundary = conn.execute("SELECT pg_walfile_name(pg_current_wal_lsn())"
                                    ).fetchone()[0]  # type: ignore[index]
            conn.execute("SELECT pg_switch_wal()")
            conn.execute("CHECKPOINT")
            (redo,) = conn.execute("SELECT redo_lsn FROM pg_control_checkpoint()"
                                   ).fetchone()  # type: ignore[misc]

            def primary_clean() -> list[str]:
                old = _old_segments(conn, boundary)
                if old:
                    conn.execute("CHECKPOINT")
                return old

            _until(deadline, lambda: not primary_clean())
            old = _old_segments(conn, boundary)
            if old:
                left.append(f"{name}: pg_wal still holds {len(old)} segment(s) from before "
                            f"the removal ({old[0]}...): a replication slot or wal_keep_size "
                            "keeps them")
            left += _policy(conn, name)
    except psycopg.Error as e:
        return Scrub(done=False, left=[f"{name}: {' '.join(str(e).split())}"],
                     seconds=time.monotonic() - began)
    for standby in standbys:
        left += _scrub_standby(standby, redo, boundary, deadline)
    return Scrub(done=not left, left=left, seconds=time.monotonic() - began)


def _scrub_standby(dsn: str, redo: Any, boundary: str, deadline: float) -> list[str]:
    where = f"standby {describe(dsn).removeprefix('key store ')}"
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            def replayed() -> bool:
                (lsn,) = conn.execute(  # type: ignore[misc]
                    "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (str(redo),)).fetchone()
                return bool(lsn)

            if not _until(deadline, replayed):
                return [f"{where}: has not replayed the scrub's checkpoint {redo} yet"]

            def clean() -> bool:
                conn.execute("CHECKPOINT")  # a restartpoint: replayed segments unlinked
                return not _old_segments(conn, boundary)

            if not _until(deadline, clean):
                old = _old_segments(conn, boundary)
                return [f"{where}: pg_wal still holds {len(old)} segment(s) from before the "
                        f"removal ({old[0]}...)", *_policy(conn, where)]
            return _policy(conn, where)
    except psycopg.Error as e:
        return [f"{where}: {' '.join(str(e).split())}"]
