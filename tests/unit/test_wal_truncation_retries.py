"""Waiting for other connections, by tenacity: the key vault's checkpoint tries again every
50 ms and raises ``KeyVaultBusy`` after its wait; the completion's ``truncate_wal`` tries
until its deadline and answers False, or True once the reader is gone; a backup locking the
key files tries again every 50 ms while a writer holds one, then ``StoreBusy``."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable

import pytest

from adapters.eventlog.keyvault import KeyVaultBusy, Vault
from adapters.lifecycle.walcheckpoint import truncate_wal


def recording(slept: list[float]) -> Callable[[float], None]:
    """``time.sleep`` that records this thread's sleeps: patching ``time.sleep`` patches it
    for every thread, and a thread an earlier test left behind may sleep meanwhile."""
    real_sleep, here = time.sleep, threading.current_thread()

    def sleep(seconds: float) -> None:
        if threading.current_thread() is here:
            slept.append(seconds)
        real_sleep(seconds)

    return sleep


def reader_holding(path) -> sqlite3.Connection:
    """A connection in a read transaction: the WAL cannot be truncated under it."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return conn


@pytest.mark.wallclock  # bounds a wait in wall-clock time: make test, not test-fast
def test_the_vault_retries_while_a_reader_holds_its_wal_then_gives_up(tmp_path, monkeypatch):
    vault = Vault(tmp_path / "vault.sqlite")
    vault.checkpoint(1.0)  # nothing holds it: at once
    slept: list[float] = []
    monkeypatch.setattr("adapters.eventlog.keyvault.time.sleep", recording(slept))
    reader = reader_holding(tmp_path / "vault.sqlite")
    vault._conn.execute("CREATE TABLE IF NOT EXISTS t (x)")  # a frame in the WAL
    started = time.monotonic()
    with pytest.raises(KeyVaultBusy, match="kept its write-ahead log"):
        vault.checkpoint(1.2)  # SQLite's busy handler waits 1 s at most per try
    assert 1.2 <= time.monotonic() - started < 5
    assert slept == [0.05]  # tried again once, 50 ms after the first try
    reader.rollback()
    reader.close()
    vault.checkpoint(1.0)  # the reader gone: done


@pytest.mark.wallclock  # bounds a wait in wall-clock time: make test, not test-fast
def test_truncate_wal_tries_until_its_deadline_then_succeeds_without_the_reader(tmp_path):
    path = tmp_path / "tables.sqlite"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE t (x)")
    reader = reader_holding(path)
    writer.execute("INSERT INTO t VALUES (1)")  # the WAL grows past the reader's snapshot
    started = time.monotonic()
    assert truncate_wal(path, time.monotonic() + 0.3) is False
    assert 0.3 <= time.monotonic() - started < 5
    reader.rollback()
    reader.close()
    assert truncate_wal(path, time.monotonic() + 2.0) is True
    writer.close()


@pytest.mark.wallclock  # bounds a wait in wall-clock time: make test, not test-fast
def test_a_backup_retries_locking_the_key_files_while_a_writer_holds_one(tmp_path,
                                                                         monkeypatch):
    from adapters.backup.sqlitecopies import _write_locked
    from domain.errors import StoreBusy

    files = [tmp_path / "a.sqlite", tmp_path / "b.sqlite"]
    for f in files:
        sqlite3.connect(f, isolation_level=None).execute("CREATE TABLE t (x)")
    writer = sqlite3.connect(files[1], isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # holds the second: every try lets the first go again
    slept: list[float] = []
    monkeypatch.setattr("adapters.backup.sqlitecopies.time.sleep", recording(slept))
    started = time.monotonic()
    with (pytest.raises(StoreBusy, match="could not lock the key files for 1 s"),
          _write_locked(files, wait=1.0)):
        pass
    assert time.monotonic() - started >= 1.0  # never gives up before its time
    # tried again, 50 ms apart (one try waits 0.2 s for the lock: at least one more fits in
    # the second, however slow the machine; how many more is the machine's pace)
    assert len(slept) >= 1 and set(slept) == {0.05}
    writer.rollback()
    with _write_locked(files, wait=0.6):  # the writer gone: both held at once
        assert sqlite3.connect(files[0], timeout=0).execute("SELECT 1").fetchone() == (1,)
    writer.close()
