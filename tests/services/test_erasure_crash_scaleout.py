"""Erasure as an intent that completes, with the log in PostgreSQL (ADR 0063, ADR 0071):
``kill -9`` at every step boundary of ``erase-message``, ``erase-account`` and ``purge run``
(a real CLI subprocess killed by the test fault point ``LETTERLOG_TEST_CRASH_AT``), then
what docs/lifecycle.md says to run; then an attacker holding every key the deployment has
tries them on every wrapped copy of the erased messages' data keys: nothing opens, and a
message beside them still opens.

Which deployment: the log, its outbox and the wrapped data keys (``letterlog_data_keys``)
in PostgreSQL, the KEKs in the key cluster (a PostgreSQL cluster of their own: ADR 0073),
the tables embedded (SQLite). What a crash
can leave decryptable is decided by the log (``Message.Purged`` by topic after the intent's
position) and the key steps (the key table's rotation in PostgreSQL, the vault's removal):
those are the scale-out store's own code paths here. HBase and Kafka add only the workers'
lag and ``erase complete``'s compaction, which runs after the keys whatever the crash
(tests/services/test_erasure_scaleout.py attacks that part), at minutes per case for 17
cases.

The attacker reads: every KEK in the key cluster (SQL), and every 32-byte window near a KEK
id found in any file of the key cluster's data directory as it is on disk (heap, ``pg_wal``:
a deleted KEK's row, its WAL records and full-page images); every wrapped copy of each data
key in PostgreSQL, the live row (SQL) and every 60-byte window near the key id in the
database's heap files and ``pg_wal`` (old row versions, WAL records). ``KILLED`` is the killed-step
table (``pytest -s`` prints it)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from adapters.embedded import Letterlog
from tests.erasure_crash_support import (
    ERASE_STEPS,
    PURGE_STEPS,
    Table,
    erase_case,
    key_opens,
    print_table,
    purge_case,
)
from tests.erasure_support import every_file, files_holding_any_form

pytestmark = [pytest.mark.services, pytest.mark.slow]

KILLED: Table = []  # (command, killed at, left, repaired by)
PURGED_TOPIC = "domain.message:Message.Purged"


@pytest.fixture
def deployment(tmp_path: Path, pg_dsn: str, postgres_server: Any, key_dsn: str,
               key_cluster: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The data directory and the environment of every process of this deployment."""
    data = tmp_path / "data"
    env = {"LETTERLOG_EVENT_STORE": "postgres", "LETTERLOG_POSTGRES_DSN": pg_dsn,
           "LETTERLOG_KEY_STORE_DSN": key_dsn,
           "LETTERLOG_KEY_VAULT": str(data / "vault.sqlite"),  # never made
           "LETTERLOG_TABLE_STORE": "embedded"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)  # the fresh reader and this process open the same
    with Letterlog.open(data) as store:
        assert store.settings.event_store == "postgres"
    return {"data": data, "dsn": pg_dsn, "pg_root": Path(postgres_server.workdir) / "data",
            "admin_dsn": postgres_server.admin_dsn, "key_dsn": key_dsn,
            "key_root": Path(key_cluster.workdir) / "data"}


# -- the attacker ------------------------------------------------------------------------------
def _pg_files(dsn: str, admin_dsn: str, pg_root: Path) -> list[bytes]:
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


def _sql(dsn: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return list(conn.execute(query, params).fetchall())  # type: ignore[arg-type]


def recoverable_keys(key_dsn: str, key_files: list[bytes], dsn: str, pg_files: list[bytes],
                     key_ids: list[UUID]) -> list[UUID]:
    """The data keys among ``key_ids`` that open with a key the deployment holds."""
    keks = {bytes(r[0]) for r in _sql(key_dsn, "SELECT kek FROM letterlog_keks")}
    return [key_id for key_id in key_ids if key_opens(
        key_id, pg_files, key_files, keks, wrapped={bytes(r[0]) for r in _sql(
            dsn, "SELECT key FROM letterlog_data_keys WHERE key_id = %s AND key IS NOT NULL",
            key_id)})]


def stale_keks(key_dsn: str, dsn: str) -> int:
    """KEKs in the key cluster that no data key refers to (a rotation's old KEK left)."""
    referenced = {r[0] for r in _sql(
        dsn, "SELECT DISTINCT kek_id FROM letterlog_data_keys WHERE kek_id IS NOT NULL")}
    return sum(1 for (k,) in _sql(key_dsn, "SELECT kek_id FROM letterlog_keks")
               if k not in referenced)


def _key_cluster_files(root: Path) -> list[bytes]:
    """Every file of the key cluster as it is on disk (no checkpoint: that would do the
    erasure's scrub for it)."""
    return [blob for _, blob in every_file(root)]


def state_of(dep: dict[str, Any], scratch: Path, ids: list[UUID], key_ids: list[UUID],
             markers: list[bytes]) -> dict[str, Any]:
    data, dsn, key_dsn = dep["data"], dep["dsn"], dep["key_dsn"]
    key_files = _key_cluster_files(dep["key_root"])
    assert not list(data.glob("vault.sqlite*")), "the KEKs are the key cluster's alone"
    [(table,)] = _sql(dsn, "SELECT table_name FROM information_schema.columns WHERE "
                      "column_name = 'topic' AND table_name LIKE '%%events'")
    purged = {str(r[0]) for r in _sql(
        dsn, f'SELECT originator_id FROM "{table}" WHERE topic = %s', PURGED_TOPIC)}
    intents = data / "erasures-intent"
    pg_files = _pg_files(dsn, dep["admin_dsn"], dep["pg_root"])
    return {"intents": len(list(intents.glob("*.json"))) if intents.is_dir() else 0,
            "purged": sum(1 for i in ids if str(i) in purged),
            "keys_open": len(recoverable_keys(key_dsn, key_files, dsn, pg_files, key_ids)),
            "stale_keks": stale_keks(key_dsn, dsn),
            "files_with_markers": sorted(files_holding_any_form(data, markers))}


@pytest.mark.parametrize("step", ERASE_STEPS)
@pytest.mark.parametrize("command", ["erase-message", "erase-account"])
def test_an_erasure_killed_at_any_step_on_postgres_is_finished_by_the_next_command(
        tmp_path: Path, deployment: dict[str, Any], command: str, step: str) -> None:
    erase_case(deployment["data"], partial(state_of, deployment), tmp_path, command, step,
               KILLED)


@pytest.mark.parametrize("step", PURGE_STEPS)
def test_a_purge_run_killed_at_any_step_on_postgres_is_finished_by_the_next_run(
        tmp_path: Path, deployment: dict[str, Any], step: str) -> None:
    purge_case(deployment["data"], partial(state_of, deployment), tmp_path, step, KILLED)


@pytest.fixture(autouse=True, scope="module")
def _killed_step_table() -> Any:
    """Prints the killed-step table once the module's tests have run (``pytest -s``)."""
    yield
    print_table(KILLED)
