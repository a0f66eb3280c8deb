"""Consistent copies of a store's SQLite files: each with SQLite's backup API in one read
transaction (``_copy_sqlite``: one snapshot while deliveries go on), and the key files
together under one write lock (``_write_locked``: a key table and the vault of its KEKs as
they stood at one moment)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_fixed

from adapters.backup.common import Progress
from adapters.files.filemodes import create_private
from domain.errors import StoreBusy

STEP_PAGES = 1024  # pages per backup step (progress between steps)
LOCK_WAIT_S = 60.0  # how long a backup tries to lock the key files before it gives up


def _copy_sqlite(source: Path, target: Path, progress: Progress,
                 before: Callable[[sqlite3.Connection], Any] | None = None) -> Any:
    """``source`` copied to ``target`` (new, 0600) as one snapshot: a read transaction is
    held on ``source`` for the whole copy, so the steps never restart on a writer's commit.
    ``before(connection)`` runs inside that transaction first (what it returns is
    returned): it sees exactly the copied state."""
    os.close(create_private(target))
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True, isolation_level=None,
                          timeout=30)
    dst = sqlite3.connect(target, isolation_level=None)
    try:
        src.execute("BEGIN")
        src.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the snapshot starts
        seen = before(src) if before is not None else None
        name = source.name

        def step(status: int, remaining: int, total: int) -> None:
            progress(name, total - remaining, total)

        src.backup(dst, pages=STEP_PAGES, progress=step)
        src.execute("COMMIT")
        dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal
    finally:
        src.close()
        dst.close()
    with open(target, "rb+") as fh:
        os.fsync(fh.fileno())
    return seen


@contextlib.contextmanager
def _write_locked(paths: list[Path], wait: float = LOCK_WAIT_S) -> Iterator[None]:
    """A write transaction held on each SQLite file in ``paths`` (readers go on, writers
    wait), taken in name order; if one cannot be taken at once every lock is let go and all
    are tried again (no deadlock with a writer that holds one and waits for another)."""

    def lock_all() -> list[sqlite3.Connection]:
        held: list[sqlite3.Connection] = []
        try:
            for path in sorted(paths):
                con = sqlite3.connect(path, isolation_level=None, timeout=0.2)
                held.append(con)
                con.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            for con in held:
                con.close()
            raise
        return held

    def gave_up(state: Any) -> None:
        raise StoreBusy(f"could not lock the key files for {wait:g} s (a writer kept "
                        f"them): try the backup again") from None

    # tenacity: every 50 ms while a writer holds one (busy, locked), for ``wait`` seconds
    held = Retrying(retry=retry_if_exception(_busy), stop=stop_after_delay(wait),
                    wait=wait_fixed(0.05), sleep=time.sleep,
                    retry_error_callback=gave_up)(lock_all)
    try:
        yield
    finally:
        for con in held:
            with contextlib.suppress(sqlite3.Error):
                con.execute("ROLLBACK")
            con.close()


def _busy(error: BaseException) -> bool:
    """A lock another connection holds (tried again); any other SQLite error is raised."""
    return isinstance(error, sqlite3.OperationalError) and (
        "locked" in str(error) or "busy" in str(error))
