"""The two WAL truncations that wait for readers (tenacity): the key vault's checkpoint
tries again every 50 ms and raises ``KeyVaultBusy`` after its wait; the completion's
``truncate_wal`` tries until its deadline and answers False, or True once the reader is
gone."""

from __future__ import annotations

import sqlite3
import time

import pytest

from adapters.eventlog.sealing import KeyVaultBusy, Vault
from adapters.lifecycle.completion import truncate_wal


def reader_holding(path) -> sqlite3.Connection:
    """A connection in a read transaction: the WAL cannot be truncated under it."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return conn


def test_the_vault_retries_while_a_reader_holds_its_wal_then_gives_up(tmp_path, monkeypatch):
    vault = Vault(tmp_path / "vault.sqlite")
    vault.checkpoint(1.0)  # nothing holds it: at once
    slept: list[float] = []
    real_sleep = time.sleep
    monkeypatch.setattr("adapters.eventlog.sealing.time.sleep",
                        lambda s: (slept.append(s), real_sleep(s)))
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
