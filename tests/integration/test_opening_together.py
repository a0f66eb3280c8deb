"""Processes opening one new SQLite file of the store at the same moment all start (the
pipelined import's two processes, a pool of workers over one PostgreSQL database): the vault,
``keys.sqlite``, the read models and the log's file are each made once, in WAL mode, and a key
file made by an older version is given its newest column once, its keys kept. A CI run once
failed with "duplicate column name: retiring" when two processes both added it; a new file's
switch to WAL answered "database is locked" to one of two processes making it."""

from __future__ import annotations

import multiprocessing
import sqlite3
from contextlib import closing
from pathlib import Path
from uuid import UUID, uuid4

import pytest

from adapters.eventlog.keysqlite import _SqliteKeyTable
from adapters.eventlog.keyvault import Vault
from adapters.eventlog.sqlitelog import EVENTS_PAGE_SIZE, _new_file_page_size
from adapters.tables.sqlite.store import SqliteTableStore

PROCESSES = 8
ROUNDS = 6


OPENERS = {  # each kind of file a store makes, opened as the store opens it
    "vault": lambda path: Vault(path, synchronous="NORMAL").close(),
    "keys": lambda path: _SqliteKeyTable(path, "NORMAL").close(),
    "tables": lambda path: SqliteTableStore(path).close(),
    "events": lambda path: _new_file_page_size(path, EVENTS_PAGE_SIZE),
}


def _open_together(barrier: object, kind: str, path: str, queue: object) -> None:
    barrier.wait()  # type: ignore[attr-defined]
    try:
        OPENERS[kind](path)
        queue.put("ok")  # type: ignore[attr-defined]
    except Exception as error:  # noqa: BLE001 - the test reports what each process met
        queue.put(f"{type(error).__name__}: {error}")  # type: ignore[attr-defined]


def _all_open(kind: str, path: Path) -> list[str]:
    # forked before any connection to the file is open here: SQLite must never see a
    # connection carried across fork (its children would trust locks they do not hold)
    ctx = multiprocessing.get_context("fork")
    barrier, queue = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=_open_together, args=(barrier, kind, str(path), queue))
             for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    outcomes = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    return outcomes


def _columns(path: Path, table: str = "keks") -> list[str]:
    with closing(sqlite3.connect(path)) as conn, conn:
        return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def _journal_mode(path: Path) -> str:
    with closing(sqlite3.connect(path)) as conn, conn:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])


@pytest.mark.parametrize("name", ["vault", "keys", "tables", "events"])
def test_processes_making_one_new_file_at_once_all_start(tmp_path: Path, name: str) -> None:
    for n in range(ROUNDS):
        path = tmp_path / f"{name}-{n}.sqlite"
        assert _all_open(name, path) == ["ok"] * PROCESSES
        assert _journal_mode(path) == "wal"
    if name == "vault":
        assert _columns(path) == ["kek_id", "kek", "created", "retiring"]
    if name == "keys":
        assert _columns(path, "data_keys") == ["key_id", "key", "kek_id"]


def _old_vault(path: Path, kek_id: UUID, kek: bytes) -> None:
    # the table as vaults made before ADR 0063 have it
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE keks (kek_id BLOB PRIMARY KEY, kek BLOB NOT NULL, "
                     "created REAL NOT NULL) WITHOUT ROWID")
        conn.execute("INSERT INTO keks VALUES (?, ?, 0)", (kek_id.bytes, kek))


def test_processes_opening_an_old_vault_at_once_add_its_column_once_and_keep_its_keys(
        tmp_path: Path) -> None:
    for n in range(ROUNDS):
        path, kek_id, kek = tmp_path / f"vault-old-{n}.sqlite", uuid4(), bytes(range(32))
        _old_vault(path, kek_id, kek)
        assert _all_open("vault", path) == ["ok"] * PROCESSES
        assert _columns(path) == ["kek_id", "kek", "created", "retiring"]
        vault = Vault(path)
        assert vault.get(kek_id) == kek
        assert vault.retiring() == set()
        vault.close()  # none open when the next round forks


def test_processes_opening_an_old_key_file_at_once_add_its_column_and_index_once(
        tmp_path: Path) -> None:
    for n in range(ROUNDS):
        path, key_id = tmp_path / f"keys-old-{n}.sqlite", uuid4()
        # keys.sqlite before its data keys had a KEK batch
        with closing(sqlite3.connect(path)) as conn, conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE data_keys (key_id BLOB PRIMARY KEY, key BLOB) "
                         "WITHOUT ROWID")
            conn.execute("INSERT INTO data_keys VALUES (?, ?)", (key_id.bytes, b"wrapped"))
        assert _all_open("keys", path) == ["ok"] * PROCESSES
        assert _columns(path, "data_keys") == ["key_id", "key", "kek_id"]
        with closing(sqlite3.connect(path)) as conn, conn:
            assert conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND "
                                "name = 'data_keys_kek'").fetchone() == ("data_keys_kek",)
        assert _SqliteKeyTable(str(path), "NORMAL").row(key_id) == (b"wrapped", None)
