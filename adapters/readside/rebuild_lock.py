"""One rebuild at a time per store: an ``flock`` on ``<data>/rebuild.lock``.

The lock is held by the process that rebuilds (the single process's ``letterlog rebuild``,
or the Spark job's driver) for the whole rebuild or view build, and released by the kernel
when that process ends, however it ends: a driver killed with SIGKILL leaves nothing held.
The file keeps the holder's pid and start time, to name it in the refusal; the file itself
staying behind means nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from adapters.files.filemodes import private_file
from domain.errors import StoreBusy

LOCK_NAME = "rebuild.lock"


class RebuildRunning(StoreBusy):
    """Another rebuild of the same store holds the lock; nothing was done."""


def _refusal(path: Path) -> RebuildRunning:
    try:
        holder = path.read_text().strip()
    except OSError:
        holder = ""
    who = f" ({holder})" if holder else ""
    return RebuildRunning(f"{path.parent}: another rebuild of this store is running{who}; "
                          "one at a time: wait for it to end")


@contextlib.contextmanager
def rebuild_lock(data: str | os.PathLike[str]) -> Iterator[Path]:
    """Holds ``data``'s rebuild lock for the block; ``RebuildRunning`` at once if another
    process holds it."""
    path = private_file(Path(data) / LOCK_NAME)
    with open(path, "r+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _refusal(path) from None
        fh.truncate(0)
        fh.write(f"pid {os.getpid()}, since "
                 f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
        fh.flush()
        try:
            yield path
        finally:
            fh.truncate(0)
            fcntl.flock(fh, fcntl.LOCK_UN)


def check_not_running(data: str | os.PathLike[str]) -> None:
    """``RebuildRunning`` if a rebuild of ``data`` runs now (a quick check before starting
    one in another process, which takes the lock itself)."""
    path = Path(data) / LOCK_NAME
    if not path.exists():
        return
    with open(path) as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _refusal(path) from None
        fcntl.flock(fh, fcntl.LOCK_UN)
