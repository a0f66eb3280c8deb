"""The scratch directories a rebuild makes in the data directory (``run_directory``), the
Spark job's and the embedded one's over several processes (``adapters.readside.rangefold``):
each task's folded tables (plain text: subjects, senders) as a run file, merged by the
driver, and deleted when the job ends; those a killed driver left are deleted by
``remove_stale_runs`` (the next job, and every purge run and erasure)."""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

RUN_DIRS = (".spark-runs-", ".spark-warm-up-", ".rebuild-runs-")
"""The scratch directories' name prefixes."""
_OWNER = ".owner"
_UNOWNED_GRACE_S = 60.0  # a directory made but not locked yet: its driver is starting


@contextlib.contextmanager
def run_directory(data: Path, prefix: str = RUN_DIRS[0]) -> Iterator[str]:
    """A scratch directory for one job's run files in ``data``, locked by this process for
    as long as the job runs and deleted when it ends, failed or not. A driver killed before
    it could delete it leaves it unlocked: ``remove_stale_runs`` deletes it then."""
    path = tempfile.mkdtemp(prefix=prefix, dir=data)
    owner = open(Path(path) / _OWNER, "a+")  # noqa: SIM115 - held for the whole job
    try:
        fcntl.flock(owner, fcntl.LOCK_EX)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        owner.close()


def remove_stale_runs(data: Path) -> list[str]:
    """Deletes the run directories in ``data`` whose job is gone (no process holds their
    lock); returns their names. A running job's directory is left alone."""
    removed = []
    for prefix in RUN_DIRS:
        for path in sorted(Path(data).glob(prefix + "*")):
            lock = path / _OWNER
            try:
                if not lock.exists():
                    if time.time() - path.stat().st_mtime < _UNOWNED_GRACE_S:
                        continue
                    shutil.rmtree(path, ignore_errors=True)
                    removed.append(path.name)
                    continue
                with open(lock, "a+") as fh:
                    try:
                        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue  # its job runs
                    shutil.rmtree(path, ignore_errors=True)
                    removed.append(path.name)
            except FileNotFoundError:
                continue  # its job ended meanwhile
    return removed
