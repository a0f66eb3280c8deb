"""Finishing an erasure on the SQLite files of a data directory, within a bound in time.

A purge or an erasure deletes rows; SQLite (``secure_delete``) writes the pages without
them to the write-ahead log, and the plain text stays in the database file's old pages and
in older WAL frames until a checkpoint copies the new pages over them and the WAL is
truncated. A process holding a read transaction on the file keeps both from happening (its
snapshot needs the old pages). So after each erasure and purge run, every SQLite file that
held the erased data (``tables.sqlite``, ``stream-tables.sqlite``, ``keys.sqlite``,
``vault.sqlite``) is checkpointed with ``PRAGMA wal_checkpoint(TRUNCATE)`` and the result
checked (not busy, the WAL empty on disk), retried until ``LETTERLOG_ERASE_WAIT_SECONDS``
have passed. ``events.sqlite`` is not among them: it holds the personal data only sealed,
under keys destroyed in ``keys.sqlite`` and ``vault.sqlite``.

The checkpoint: ``walcheckpoint``. What could not be finished is named (the file and the
processes holding it open: ``completed``) and recorded (``pendingerasures``); the next
erasure, purge run or ``letterlog erase complete`` tries again.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Protocol, runtime_checkable

from adapters.files import datadir
from adapters.lifecycle.completed import Completion, Holder
from adapters.lifecycle.pendingerasures import PendingErasures
from adapters.lifecycle.walcheckpoint import holders_of, truncate_wal

STORE_FILES = (datadir.READ_MODELS, datadir.STREAM_TABLES, datadir.KEYS)


def store_files(data: str | os.PathLike[str], vault: str | os.PathLike[str] | None) -> list[Path]:
    """The SQLite files of the store in ``data`` that can hold erased data in plain form (or
    the keys to it), those that exist."""
    root = Path(data)
    files = [root / name for name in STORE_FILES]
    files.append(Path(vault) if vault else root / datadir.VAULT)
    return [f for f in files if f.is_file()]


class Scrubbed(Protocol):
    """What a scrub of the key cluster left: one line per server that may still hold a
    removed KEK."""

    left: list[str]


@runtime_checkable
class KeyCluster(Protocol):
    """The key-encryption keys in a PostgreSQL key cluster (``PostgresVault``,
    ``FallbackVault``; ADR 0073): a removal there is complete once no server's files hold
    it."""

    path: str

    def owes_scrub(self) -> bool: ...

    def scrub(self, deadline: float, *, force: bool = False) -> Scrubbed: ...


def complete(data: str | os.PathLike[str], vault: str | os.PathLike[str] | None, *,
             wait: float, record: bool = False, position: int = 0,
             messages: int = 0, key_cluster: KeyCluster | None = None) -> Completion:
    """Checkpoints every store file (within ``wait`` seconds in all); when all are done,
    the pending records made before this began are removed; else, with ``record`` (an
    erasure or purge that deleted something now), a record is added. With nothing deleted
    now and nothing pending, one attempt without waiting (a reader then delays nothing).
    ``key_cluster``: the KEKs' PostgreSQL cluster (``PostgresVault``), scrubbed within the
    same bound when a removal there awaits it (ADR 0073)."""
    pending = PendingErasures(data)
    before = [path for path, _ in pending.records()]
    dirty = key_cluster is not None and key_cluster.owes_scrub()
    owed = record or bool(before) or dirty
    began = time.monotonic()
    deadline = began + (wait if owed else 0.0)  # nothing erased is owed: one try, no wait
    files = store_files(data, vault)
    holders: list[Holder] = []
    for path in files:
        if not truncate_wal(path, deadline):
            pids, names = holders_of(path)
            holders.append(Holder(str(path), pids, names))
    if dirty and key_cluster is not None:
        scrubbed = key_cluster.scrub(deadline)
        holders += [Holder(key_cluster.path, reason=line) for line in scrubbed.left]
    outcome = Completion(complete=not holders or not owed, holders=holders if owed else [],
                         files=[str(f) for f in files], seconds=time.monotonic() - began)
    if outcome.complete:
        outcome.cleared = pending.clear(before)
    elif record:
        pending.record(outcome, position=position, messages=messages)
    return outcome
