"""What the key cluster's tests share (ADR 0073): a scale-out deployment's environment with
its KEKs in the key cluster, and the attacker's view of the cluster's files and rows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

from tests.erasure_support import every_file

ROOT = Path(__file__).resolve().parents[1]


def key_store_env(data: Path, *, dsn: str, key_dsn: str, standbys: str = "") -> dict[str, str]:
    """A process of the scale-out deployment: the log in PostgreSQL (``dsn``), the KEKs in
    the key cluster (``key_dsn``), the tables embedded. ``LETTERLOG_KEY_VAULT`` names a
    file that must never be made."""
    return {"LETTERLOG_DATA": str(data), "LETTERLOG_EVENT_STORE": "postgres",
            "LETTERLOG_POSTGRES_DSN": dsn, "LETTERLOG_KEY_STORE_DSN": key_dsn,
            "LETTERLOG_KEY_STORE_STANDBYS": standbys, "LETTERLOG_TABLE_STORE": "embedded",
            "LETTERLOG_KEY_VAULT": str(data / "vault.sqlite")}


def cli(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "adapters.cli", *args], cwd=ROOT,
                          env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=timeout)


def sql(dsn: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(query, params)  # type: ignore[arg-type]
        return list(cur.fetchall()) if cur.description else []


def keks(key_dsn: str) -> dict[UUID, bytes]:
    """Every KEK the key cluster holds (what an attacker with its rows has)."""
    return {k: bytes(v) for k, v in sql(key_dsn, "SELECT kek_id, kek FROM letterlog_keks")}


def server_files(server: Any) -> list[tuple[Path, bytes]]:
    """Every file of a PostgreSQL server's data directory (heap, indexes, ``pg_wal``,
    ``pg_xact``...), as a copy of its disk holds them now."""
    return list(every_file(Path(server.workdir) / "data"))


def files_with(files: list[tuple[Path, bytes]], secrets: list[bytes]) -> list[str]:
    return sorted({str(p) for p, blob in files for s in secrets if s in blob})


def checkpoint(server: Any) -> None:
    """The server's dirty pages written to its files (what a copy of the disk then holds)."""
    sql(server.admin_dsn, "CHECKPOINT")
