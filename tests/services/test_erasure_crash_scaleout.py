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

import pytest

from adapters.embedded import Letterlog
from tests.erasure_crash_support import (
    ERASE_STEPS,
    PURGE_STEPS,
    Table,
    erase_case,
    print_table,
    purge_case,
)
from tests.services.erasure_attacker import state_of

pytestmark = [pytest.mark.services, pytest.mark.slow]

KILLED: Table = []  # (command, killed at, left, repaired by)


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
            "key_root": Path(key_cluster.workdir) / "data",
            # a stale KEK is one a rotation marked: a process that closed cleanly leaves its
            # pool refill's KEK unreferenced (its unused keys deleted, none ever sealed
            # anything) until the orphan sweep an hour later
            "retiring_only": True}


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
