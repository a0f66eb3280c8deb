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

What could not be finished is recorded in ``<data>/erasures-pending/`` (one small JSON file
per unfinished erasure: when, which files, which processes held them; no message id, no
content), and named: the file and the ids of the processes holding it open, found in
``/proc/*/fd``. The next erasure, purge run or ``letterlog erase complete`` tries again and
removes the records made before its checkpoints began once every file is done.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from tenacity import Retrying, retry_if_result

from adapters.files import datadir
from adapters.files.filemodes import create_private, private_dir

PENDING_DIR = "erasures-pending"
EXIT_INCOMPLETE = 3
"""The exit status of an erasure (or purge run) that committed but could not finish within
the bound: the keys are destroyed and ``Purged`` recorded; a file still holds the data."""

STORE_FILES = (datadir.READ_MODELS, datadir.STREAM_TABLES, datadir.KEYS)


@dataclass(frozen=True)
class Holder:
    """A file a checkpoint could not finish, and the processes that have it open."""

    path: str
    pids: tuple[int, ...] = ()
    names: tuple[str, ...] = ()
    reason: str = ""  # a server's file (the key cluster's): what still holds it

    def describe(self) -> str:
        if self.reason:
            return self.reason
        if not self.pids:
            return f"{self.path}: held open by an unknown process"
        who = ", ".join(f"pid {p} ({n})" if n else f"pid {p}"
                        for p, n in zip(self.pids, self.names, strict=True))
        return f"{self.path}: held open by {who}"

    def as_dict(self) -> dict[str, Any]:
        out = {"file": self.path, "pids": list(self.pids), "processes": list(self.names)}
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass
class Completion:
    """The outcome of one completion attempt."""

    complete: bool = True
    holders: list[Holder] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # every file checkpointed
    seconds: float = 0.0
    cleared: int = 0  # pending records removed

    def line(self) -> str:
        """One line naming what still holds erased data (empty when complete)."""
        if self.complete:
            return ""
        return ("erasure not yet complete, erased data is still in "
                + "; ".join(h.describe() for h in self.holders)
                + f" (waited {self.seconds:.1f} s); the erasure is committed; "
                "`letterlog erase complete` or the next purge run finishes it once it closes")

    def as_dict(self) -> dict[str, Any]:
        return {"complete": self.complete, "pending": [h.as_dict() for h in self.holders],
                "waited_seconds": round(self.seconds, 3), "pending_cleared": self.cleared}


def store_files(data: str | os.PathLike[str], vault: str | os.PathLike[str] | None) -> list[Path]:
    """The SQLite files of the store in ``data`` that can hold erased data in plain form (or
    the keys to it), those that exist."""
    root = Path(data)
    files = [root / name for name in STORE_FILES]
    files.append(Path(vault) if vault else root / datadir.VAULT)
    return [f for f in files if f.is_file()]


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


class PendingErasures:
    """``<data>/erasures-pending/``: one JSON record per erasure not yet finished."""

    def __init__(self, data: str | os.PathLike[str]) -> None:
        self.dir = Path(data) / PENDING_DIR

    def records(self) -> list[tuple[Path, dict[str, Any]]]:
        if not self.dir.is_dir():
            return []
        out = []
        for path in sorted(self.dir.glob("*.json")):
            try:
                out.append((path, json.loads(path.read_text())))
            except (OSError, ValueError):
                continue  # being written, or removed meanwhile
        return out

    def record(self, completion: Completion, *, position: int, messages: int) -> None:
        private_dir(self.dir)
        now = datetime.now(UTC)
        name = f"{now.strftime('%Y%m%dT%H%M%S%f')}-{uuid.uuid4().hex[:8]}"
        body = json.dumps({"since": now.isoformat(), "position": position,
                           "messages": messages,
                           "files": [h.path for h in completion.holders],
                           "holders": [h.as_dict() for h in completion.holders]}).encode()
        tmp = self.dir / f".{name}.tmp"
        fd = create_private(tmp)
        try:
            os.write(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.dir / f"{name}.json")

    def clear(self, paths: list[Path]) -> int:
        cleared = 0
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                cleared += 1
        return cleared


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
