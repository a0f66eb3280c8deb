"""A locked event store is the domain's ``StoreBusy`` (no driver strings in the domain):
nothing is written, the command tries again, and succeeds once the lock is released."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from adapters.eventlog.store import open_log, sqlite_env
from adapters.payloads.memory import InMemoryPayloadStore
from domain.account import Account
from domain.errors import InvalidState, StoreBusy
from domain.service import Mailstore

ADA = "ada@example.org"


@pytest.mark.slow  # a second process, or seconds of waiting: not in make test-fast
def test_a_locked_sqlite_log_raises_store_busy_and_commands_retry(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite"
    env = sqlite_env(str(path), "normal") | {"SQLITE_LOCK_TIMEOUT": "1"}
    log = open_log(env)
    mail = Mailstore(log, InMemoryPayloadStore(), max_retries=2, log_head=log.head)
    mail.create_mailbox(ADA, "A", create_account=True)
    head = log.head()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        with pytest.raises(StoreBusy, match="locked"):
            log.save(Account.open("bob@example.org"))
        with pytest.raises(InvalidState, match="gave up after 2"):
            mail.create_mailbox(ADA, "B", create_account=True)
    finally:
        holder.rollback()
        holder.close()
    assert log.head() == head
    assert mail.create_mailbox(ADA, "B", create_account=True).changed
    log.close()
