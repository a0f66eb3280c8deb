"""The backup's format and its file work, shared by taking a backup (``copying``) and
restoring one (``restoring``): the manifest, the errors, consistent copies of SQLite files
(SQLite's backup API in one read transaction; the key files under one write lock) and of
plain files, each with its SHA-256.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from eventsourcing.utils import get_topic
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_fixed

from adapters.files import datadir
from adapters.files.filemodes import create_private, fsync_dir
from domain.errors import LetterlogError, StoreBusy
from domain.message import Message

FORMAT = "letterlog-backup/1"
RECORD_FORMAT = "letterlog-erasures/1"
RECORD_SUFFIX = ".erasures.json"  # a record kept beside the backups: DIR/../NAME.erasures.json
MANIFEST = "manifest.json"
LOG = datadir.LOG
READ_MODELS = (datadir.READ_MODELS, datadir.STREAM_TABLES)
PAYLOADS = datadir.PAYLOADS
STEP_PAGES = 1024  # pages per backup step (progress between steps)
LOCK_WAIT_S = 60.0  # how long a backup tries to lock the key files before it gives up

Progress = Callable[[str, int, int], None]
OpenStore = Callable[..., Any]
"""Opens a store: ``(data, create=False, read_models=...) -> Letterlog`` (``Letterlog.open``)."""
"""``progress(what, done, total)``: bytes (or pages) of the part being copied."""


class BackupError(LetterlogError):
    """A backup or restore that cannot be done as asked (nothing was changed)."""


class BackupInvalid(BackupError):
    """The directory is not a complete letterlog backup, or a file in it is damaged."""


class KeksMissing(BackupError):
    """The restored log uses key-encryption keys neither the backup nor the key store
    holds: refused before anything is written."""


class NoErasureRecord(BackupError):
    """A restore with no record of the erasures made after the backup was taken (nothing was
    changed): restored as it is, the backup would bring back what they erased."""


def _no_progress(what: str, done: int, total: int) -> None:
    return None


def _version() -> str:

    try:
        return version("letterlog")
    except PackageNotFoundError:
        return "unknown"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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


def _copy_file(source: Path, target: Path) -> tuple[int, str] | None:
    """A plain file copied (new, 0600; mtime kept: a payload's grace period runs from it),
    fsynced; (size, sha256), or None if the source vanished (a purge deleted it)."""
    h = hashlib.sha256()
    try:
        src = open(source, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return None
    with src:
        fd = create_private(target)
        with os.fdopen(fd, "wb") as out:
            size = 0
            for block in iter(lambda: src.read(1 << 20), b""):
                out.write(block)
                h.update(block)
                size += len(block)
            out.flush()
            os.fsync(out.fileno())
        st = os.fstat(src.fileno())
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    return size, h.hexdigest()


def _log_facts(con: sqlite3.Connection) -> dict[str, int]:
    """The log's head and how many messages it has (ever, and purged), from the stored
    events' topics alone (nothing decoded)."""
    head = con.execute("SELECT COALESCE(MAX(rowid), 0) FROM stored_events").fetchone()[0]
    messages = con.execute("SELECT count(DISTINCT originator_id) FROM stored_events "
                           "WHERE topic LIKE 'domain.message:Message.%'").fetchone()[0]
    purged = con.execute("SELECT count(DISTINCT originator_id) FROM stored_events "
                         "WHERE topic = ?", (_purged_topic(),)).fetchone()[0]
    return {"position": int(head), "messages": int(messages), "purged_messages": int(purged)}


def _purged_topic() -> str:


    return str(get_topic(Message.Purged))


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


def _sqlite_files(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_file() and p.name.endswith(".sqlite"))


def _payload_files(root: Path) -> list[Path]:
    """Every file under ``payloads/`` but its temporary writes (``.tmp``)."""
    base = root / PAYLOADS
    found = []
    for dirpath, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(dirpath, f) for f in sorted(files) if not f.startswith(".")]
    return found


def _write_json(path: Path, obj: dict[str, Any]) -> None:
    """``obj`` as JSON in ``path`` (0600), in one step: a temporary file renamed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = create_private(tmp)
    with os.fdopen(fd, "w") as fh:
        json.dump(obj, fh, indent=1, sort_keys=True)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def read_manifest(source: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of the backup in ``source``; ``BackupInvalid`` if there is none."""
    path = Path(source) / MANIFEST
    if not Path(source).is_dir():
        raise BackupInvalid(f"{source}: no such directory (give the directory "
                            "`letterlog backup` made)")
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise BackupInvalid(f"{source}: not a complete letterlog backup (no {MANIFEST}: "
                            "the backup was interrupted, or this is another directory)") from None
    except (ValueError, OSError) as e:
        raise BackupInvalid(f"{path}: cannot be read ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupInvalid(f"{path}: not a letterlog backup manifest ({FORMAT})")
    return manifest
