"""A SQLite file's write-ahead log truncated within a bound in time (``truncate_wal``), or
the processes that keep it from being so (``holders_of``: a reader's snapshot needs the
old pages), found in ``/proc/*/fd``."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from tenacity import Retrying, retry_if_result


def holders_of(path: Path) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The other processes with ``path`` (or its -wal, -shm) open, from ``/proc/*/fd``
    (processes of other users are not visible to an ordinary user)."""
    real = os.path.realpath(path)
    targets = {real, real + "-wal", real + "-shm"}
    me = os.getpid()
    pids: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return (), ()
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        fd_dir = f"/proc/{entry}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"{fd_dir}/{fd}") in targets:
                    pids.append(int(entry))
                    break
            except OSError:
                continue
    names = []
    for pid in sorted(pids):
        try:
            names.append(Path(f"/proc/{pid}/comm").read_text().strip())
        except OSError:
            names.append("")
    return tuple(sorted(pids)), tuple(names)


def _wal_empty(path: Path) -> bool:
    try:
        return os.path.getsize(f"{path}-wal") == 0
    except FileNotFoundError:
        return True


def truncate_wal(path: Path, deadline: float) -> bool:
    """``PRAGMA wal_checkpoint(TRUNCATE)`` on ``path`` until it reports success (not busy,
    every frame copied) and the WAL file is empty, or ``deadline`` (``time.monotonic``)
    passes. SQLite's busy handler waits for the readers between attempts."""
    try:
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=rw", uri=True,
                               isolation_level=None, timeout=0)  # never creates the file
    except sqlite3.Error:
        return not path.exists()

    started = 0.0  # when the current attempt began

    def truncated() -> bool:
        nonlocal started
        remaining = deadline - time.monotonic()
        wait_ms = int(min(max(remaining, 0.0), 1.0) * 1000)
        conn.execute(f"PRAGMA busy_timeout={wait_ms}")
        started = time.monotonic()
        try:
            busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.OperationalError:  # locked by a writer beyond the busy wait
            busy, frames, copied = 1, -1, -1
        return not busy and frames in (0, -1) and copied in (0, -1) and _wal_empty(path)

    def pause(state: Any) -> float:
        """No wait after an attempt that SQLite's busy handler made wait; 50 ms after one answered
        at once (another checkpoint)."""
        return 0.05 if time.monotonic() - started < 0.05 else 0.0

    try:
        conn.execute("PRAGMA secure_delete=ON")
        # tenacity: tried again until done or ``deadline`` (then False)
        return bool(Retrying(retry=retry_if_result(lambda done: not done),
                             stop=lambda state: time.monotonic() >= deadline, wait=pause,
                             sleep=time.sleep, retry_error_callback=lambda state: False
                             )(truncated))
    finally:
        conn.close()
