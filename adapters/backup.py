"""Online backup and restore of an embedded store (``letterlog backup``, ``restore-backup``).

A backup is a directory: a copy of every SQLite file of the data directory, the payload
files, and ``manifest.json`` (written last: a directory without it is not a backup). The
SQLite files are copied with SQLite's backup API from a connection holding a read
transaction, so each copy is one consistent snapshot while deliveries go on; in this order:

1. the read models (``tables.sqlite``, ``stream-tables.sqlite``): derived from the log, so
   copied *before* it, they are never ahead of the log in the copy (they catch up when the
   restored store is opened);
2. the log (``events.sqlite``): its head is the backup's position;
3. the payload files (a payload is stored before the event that refers to it commits, so
   every payload the copied log refers to is there, unless it was purged meanwhile);
4. every other SQLite file, the key files (``keys.sqlite``, ``vault.sqlite``) among them:
   keys are only ever added or destroyed, so copies taken after the log hold every key the
   copied log uses. They are copied together while a write lock is held on each (readers go
   on; a writer waits the few milliseconds the copies take), so a key table and the vault
   of its key-encryption keys are copied as they stood at one moment (a rotation between
   two copies would leave keys wrapped under a KEK the copied vault does not have).

A restore checks every file against the manifest's SHA-256, builds the store beside the
target, then puts it in place. An erasure made in the store being replaced after the
backup was taken is made again on the restored store (``ErasureRecord``): ADR 0046.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID

from adapters import datadir
from adapters.filemodes import DIR_MODE, create_private, fsync_dir, private_dir
from domain.errors import LetterlogError, StoreBusy

if TYPE_CHECKING:
    from adapters.face import Store

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
    from importlib.metadata import PackageNotFoundError, version

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


# -- copying ---------------------------------------------------------------------------------
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
    from eventsourcing.utils import get_topic

    from domain.message import Message

    return str(get_topic(Message.Purged))


@contextlib.contextmanager
def _write_locked(paths: list[Path], wait: float = LOCK_WAIT_S) -> Iterator[None]:
    """A write transaction held on each SQLite file in ``paths`` (readers go on, writers
    wait), taken in name order; if one cannot be taken at once every lock is let go and all
    are tried again (no deadlock with a writer that holds one and waits for another)."""
    from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_fixed

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


def _copy_payloads(store: Any, out: Path, progress: Progress,
                   files: list[dict[str, Any]]) -> dict[str, Any]:
    """Every payload of ``store`` (HBase's payload table, then any file of the host's)
    written into ``out/payloads`` in the file store's format, with its write time: the
    backup holds the payloads as an embedded store's backup does, and a restore puts them
    back into HBase (``letterlog payloads migrate``). A payload purged while it is copied
    is counted as vanished."""
    from adapters.payloads.files import FilePayloadStore
    from domain.errors import PayloadMissing

    copies = FilePayloadStore(out / PAYLOADS)
    counts: dict[str, Any] = {"files": 0, "bytes": 0, "vanished": 0, "from": "hbase"}
    entries = list(store.list())
    for i, (sha, _, written_at) in enumerate(entries, 1):
        try:
            ref = copies.put_stream(store.open(sha))
        except PayloadMissing:
            counts["vanished"] += 1
            continue
        if ref.sha256 != sha:
            raise BackupError(f"payload {sha}: read back from the payload store as "
                              f"{ref.sha256} (damaged); the backup in {out} is incomplete")
        path = copies.file_of(ref.sha256)
        os.utime(path, (written_at, written_at))
        size = path.stat().st_size
        counts["files"] += 1
        counts["bytes"] += size
        files.append({"path": str(path.relative_to(out)), "size": size,
                      "sha256": _sha256(path)})
        progress(PAYLOADS, i, len(entries))
    shutil.rmtree(out / PAYLOADS / ".tmp", ignore_errors=True)
    copies.close()
    return counts


def backup(data: str | os.PathLike[str], target: str | os.PathLike[str], *,
           vault: str | os.PathLike[str] | None = None, log: bool = True,
           keks: Callable[[], list[tuple[UUID, bytes, float, bool]]] | None = None,
           payloads: Any = None, progress: Progress = _no_progress) -> dict[str, Any]:
    """An online copy of the embedded store in ``data`` into ``target`` (absent or empty;
    made 0700, its files 0600); returns the manifest. ``log=False`` (the log is in
    PostgreSQL, backed up with its own tools first): the payloads and the key files only.
    ``payloads``: the payload store when it is not the data directory's files (HBase on
    the scale-out path, ADR 0072): its payloads are copied from it. ``keks``: the key
    cluster's KEKs (ADR 0074), read last (after the log's base backup and the payloads)
    and written into the backup as ``vault.sqlite``."""
    from adapters.datadir import check_data_dir

    root, out = Path(data).absolute(), Path(target).absolute()
    check_data_dir(root, log, False, allow_shared=True)
    if keks is None and vault is not None and Path(vault).absolute().parent != root:
        raise BackupError(f"LETTERLOG_KEY_VAULT ({vault}) is outside the data directory: "
                          "back the store up with its vault in the data directory (the "
                          "default), or copy the vault with the key files yourself")
    if out == root or root in out.parents:
        raise BackupError(f"{out}: inside the data directory it backs up; give another one")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BackupError(f"{out}: exists and is not an empty directory (a backup goes into "
                          "a new one)")
    began = time.monotonic()
    private_dir(out)
    os.chmod(out, DIR_MODE)
    names = _sqlite_files(root)
    files: list[dict[str, Any]] = []

    def sqlite_entry(name: str) -> dict[str, Any]:
        path = out / name
        return {"path": name, "size": path.stat().st_size, "sha256": _sha256(path)}

    derived = [n for n in names if n in READ_MODELS]
    if not log:  # the read models are HBase's (or rebuilt from the log), the log PostgreSQL's
        derived = []
        names = [n for n in names if n not in READ_MODELS and n != LOG]
    for name in derived:  # 1. the read models: never ahead of the log copied after them
        _copy_sqlite(root / name, out / name, progress)
        files.append(sqlite_entry(name))
    log_facts = None
    if log:
        log_facts = _copy_sqlite(root / LOG, out / LOG, progress, _log_facts)  # 2. the log
        files.append(sqlite_entry(LOG))
    copied_payloads = {"files": 0, "bytes": 0, "vanished": 0}  # 3. the payloads
    sources = _payload_files(root) if payloads is None else []
    if payloads is not None:
        copied_payloads = _copy_payloads(payloads, out, progress, files)
    total = len(sources)
    for i, source in enumerate(sources, 1):
        rel = source.relative_to(root)
        private_dir((out / rel).parent)
        copied = _copy_file(source, out / rel)
        if copied is None:
            copied_payloads["vanished"] += 1
        else:
            copied_payloads["files"] += 1
            copied_payloads["bytes"] += copied[0]
            files.append({"path": str(rel), "size": copied[0], "sha256": copied[1]})
        progress(PAYLOADS, i, total)
    later = [n for n in names if n not in READ_MODELS and n != LOG]
    with _write_locked([root / n for n in later]):  # 4. the keys, at one moment
        for name in later:
            _copy_sqlite(root / name, out / name, progress)
    from_key_cluster = 0
    if keks is not None:  # 5. the key cluster's KEKs, after everything that refers to them
        from_key_cluster = _write_keks(out / datadir.VAULT, keks())
        later = [*[n for n in later if n != datadir.VAULT], datadir.VAULT]
    shredded = _destroy_keys_of_purged(out) if log and (out / LOG).is_file() else 0
    files = [sqlite_entry(LOG) if f["path"] == LOG else f for f in files]  # as opened there
    for name in later:  # the key files were written here: folded back into the files
        con = sqlite3.connect(out / name)
        try:
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            con.close()
    for name in later:
        files.append(sqlite_entry(name))
    skipped = sorted(p.name for p in root.iterdir()
                     if p.name != PAYLOADS and p.name not in names and p.name != LOG
                     and p.name not in READ_MODELS
                     and not p.name.endswith(("-wal", "-shm", ".lock")))
    manifest = {
        "format": FORMAT,
        "letterlog_version": _version(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "source": str(root),
        "log": log_facts,
        "order": [*derived, *([LOG] if log else []), PAYLOADS, *later],
        "payloads": copied_payloads,
        "files": files,
        "bytes": sum(f["size"] for f in files),
        "skipped": skipped,
        "keys_destroyed_in_copy": shredded,
        "keks_from_key_cluster": from_key_cluster,
        "seconds": round(time.monotonic() - began, 3),
    }
    for dirpath, _, _ in os.walk(out):
        fsync_dir(Path(dirpath))
    _write_json(out / MANIFEST, manifest)
    return manifest


def _write_keks(path: Path, rows: list[tuple[UUID, bytes, float, bool]]) -> int:
    """The key cluster's KEKs into the backup's vault file (the vault's own schema: a
    restore reads it as an old vault until it moves them into the key cluster); a vault
    file the data directory still had (before ``keys migrate``) keeps its KEKs too."""
    from adapters.eventlog.sealing import Vault

    Vault(path, synchronous="NORMAL").close()  # the file and its table, 0600
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("BEGIN")
        con.executemany("INSERT OR IGNORE INTO keks (kek_id, kek, created, retiring) "
                        "VALUES (?, ?, ?, ?)",
                        [(k.bytes, v, c, 1 if r else None) for k, v, c, r in rows])
        con.execute("COMMIT")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()
    return len(rows)


def _sealed_parts(log: Any) -> Iterator[tuple[Any, Any, Any]]:
    """``(message id, event, personal part)`` of every event of ``log`` that carries one."""
    from adapters.eventlog.reader import read_events

    for _, event in read_events(log):
        part = getattr(event, "personal", None)
        if part is not None and getattr(part, "key_id", None) is not None:
            yield event.originator_id, event, part


def _destroy_keys_of_purged(out: Path) -> int:
    """In the copy: the key of every message its log says is purged is destroyed. An
    erasure appends ``Purged`` before it destroys the key: one that fell between the copy
    of the log and that of the keys would otherwise leave the copy a key the live store no
    longer has."""
    from adapters.eventlog.reader import read_events
    from adapters.eventlog.store import open_log, sqlite_env

    log = open_log(sqlite_env(str(out / LOG), "normal"))
    try:
        purged = {e.originator_id for _, e in read_events(log)
                  if type(e).__qualname__ == "Message.Purged"}
        keys = {part.key_id for message_id, _, part in _sealed_parts(log)
                if message_id in purged and not part.shredded}
        return log.keys.destroy(keys)
    finally:
        log.close()


def erased_while_copied(store: Store) -> list[Any]:
    """Messages the restored log holds as not purged whose key the copy has destroyed: an
    erasure that fell between the copy of the log and that of the keys (its ``Purged`` is
    after the log's copy). They are erased again so that the store says what happened."""
    purged = {e.originator_id for _, e in store.events()
              if type(e).__qualname__ == "Message.Purged"}
    return sorted({message_id for message_id, _, part in _sealed_parts(store.log)
                   if part.shredded and message_id not in purged})


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


# -- the erasure record ----------------------------------------------------------------------
@dataclass
class ErasureRecord:
    """What a store erased: the messages purged (``Message.Purged``) and the data keys
    destroyed. Ids only, no personal data: kept apart from backups, it lets a restore make
    those erasures again (``letterlog erase export``)."""

    messages: set[UUID] = field(default_factory=set)
    destroyed_keys: set[UUID] = field(default_factory=set)
    position: int = 0
    sources: list[str] = field(default_factory=list)

    def merge(self, other: ErasureRecord) -> None:
        self.messages |= other.messages
        self.destroyed_keys |= other.destroyed_keys
        self.position = max(self.position, other.position)
        self.sources += other.sources

    def as_dict(self) -> dict[str, Any]:
        return {"format": RECORD_FORMAT, "position": self.position,
                "created": datetime.now(UTC).isoformat(timespec="seconds"),
                "messages": sorted(str(m) for m in self.messages),
                "destroyed_keys": sorted(str(k) for k in self.destroyed_keys)}


def erasure_record(store: Store) -> ErasureRecord:
    """The erasures recorded in an open store: its log's ``Purged`` events (read by topic,
    nothing decoded) and its key store's destroyed ids."""
    recorder, topic = store.log.recorder, _purged_topic()
    head = store.max_position()
    messages: set[UUID] = set()
    start = 1
    while start <= head:
        page = recorder.select_notifications(start, 5000, head, topics=[topic])
        if not page:
            break
        messages.update(cast("UUID", n.originator_id) for n in page)
        start = page[-1].id + 1
    return ErasureRecord(messages, set(store.log.keys.destroyed_ids()), head,
                         [str(store.settings.data)])


def read_erasure_record(source: str | os.PathLike[str],
                        open_store: OpenStore) -> ErasureRecord:
    """The record in a file ``letterlog erase export`` wrote, or that of the store in the
    data directory ``source`` (opened read-only as far as it goes: no read models)."""
    path = Path(source)
    if path.is_dir():
        with open_store(path, create=False, read_models=False) as store:
            return erasure_record(store)
    try:
        obj = json.loads(path.read_text())
        if obj.get("format") != RECORD_FORMAT:
            raise ValueError(f"not {RECORD_FORMAT}")
        return ErasureRecord({UUID(m) for m in obj["messages"]},
                             {UUID(k) for k in obj["destroyed_keys"]},
                             int(obj.get("position", 0)), [str(path)])
    except FileNotFoundError:
        raise BackupError(f"{path}: no such file or data directory") from None
    except (ValueError, KeyError, TypeError, AttributeError, OSError) as e:
        raise BackupError(f"{path}: not an erasure record written by `letterlog erase "
                          f"export` nor a data directory ({e})") from None


def export_erasures(store: Store, target: str | os.PathLike[str]) -> ErasureRecord:
    """The store's erasure record written to ``target`` (0600, replaced in one step)."""
    record = erasure_record(store)
    _write_json(Path(target).absolute(), record.as_dict())
    return record


def reapply(store: Store, record: ErasureRecord) -> dict[str, Any]:
    """Makes ``record``'s erasures again on ``store``: each message it names that is still
    active here is erased (``erase_message``), then every key it names is destroyed."""
    from domain.errors import MessageNotFound

    erased, absent = [], 0
    for message_id in sorted(record.messages):
        try:
            state = store.message_record(message_id).state
        except MessageNotFound:
            absent += 1  # delivered after the backup: not in the restored store
            continue
        if state == "purged":
            continue
        store.erase_message(message_id)
        erased.append(str(message_id))
    destroyed = store.log.keys.destroy(record.destroyed_keys)
    completion = store.complete_erasures(record=bool(erased or destroyed))
    return {"messages_erased_again": erased, "messages_not_in_backup": absent,
            "keys_destroyed_again": destroyed, "erasure_complete": completion.complete}


# -- restore ---------------------------------------------------------------------------------
def _holders(root: Path) -> list[str]:
    """Processes with a file of the store in ``root`` open."""
    from adapters.lifecycle.completion import Holder, _holders

    found = []
    for name in _sqlite_files(root):
        pids, names = _holders(root / name)
        if pids:
            found.append(Holder(str(root / name), pids, names).describe())
    return found


def _check_files(source: Path, manifest: dict[str, Any], progress: Progress) -> None:
    entries = manifest.get("files") or []
    total = sum(int(f["size"]) for f in entries)
    done = 0
    for f in entries:
        path = source / f["path"]
        if ".." in Path(f["path"]).parts or Path(f["path"]).is_absolute():
            raise BackupInvalid(f"{source / MANIFEST}: names a file outside the backup: "
                                f"{f['path']}")
        if not path.is_file():
            raise BackupInvalid(f"{path}: missing from the backup")
        if path.stat().st_size != f["size"] or _sha256(path) != f["sha256"]:
            raise BackupInvalid(f"{path}: damaged (its size or SHA-256 is not the one the "
                                "manifest recorded)")
        done += int(f["size"])
        progress("checking", done, total)


def records_beside(source: str | os.PathLike[str]) -> list[Path]:
    """The erasure records kept beside the backup in ``source``: every ``*.erasures.json``
    file in the directory that holds it (``letterlog erase export /backups/NAME.erasures.json``
    after each erasure or on a schedule)."""
    parent = Path(source).absolute().parent
    return sorted(p for p in parent.glob(f"*{RECORD_SUFFIX}") if p.is_file())


def _check_record_covers(record: ErasureRecord, manifest: dict[str, Any], src: Path,
                         root: Path, no_record: bool) -> str | None:
    """Refuses (``NoErasureRecord``) a restore that has no record of the erasures made after
    the backup, unless ``no_record``: none found, or every one found older than the backup
    (its position before the backup's: it cannot hold an erasure made after it). Returns
    why there is none (``no_record`` given), or None: the records cover the backup."""
    position = (manifest.get("log") or {}).get("position")
    where = (f"the backup {src} (log position {position}, taken {manifest.get('created')})"
             if position is not None else f"the backup {src} (taken {manifest.get('created')})")
    if not record.sources:
        why = (f"no record of the erasures made after {where} was found: {root} holds no "
               f"store to read them from, there is no *{RECORD_SUFFIX} beside the backup in "
               f"{src.parent}, and no --reapply-erasures FROM was given")
    elif position is not None and 0 < record.position < int(position):
        why = (f"the erasure records found ({', '.join(record.sources)}) end at log position "
               f"{record.position}, before {where}: they hold no erasure made after it")
    else:
        return None
    if no_record:
        return why
    raise NoErasureRecord(
        f"{why}. Restored so, every message erased after the backup would come back, "
        "readable. Give --reapply-erasures FROM (a file `letterlog erase export` wrote, or "
        "the live data directory), or keep the record beside the backups as "
        f"{src.parent / ('NAME' + RECORD_SUFFIX)}; if no record survives, "
        "--no-erasure-record restores anyway (what was erased after the backup is back until "
        "`letterlog erase reapply FROM` is run with a record). Nothing was changed")


def restore(source: str | os.PathLike[str], data: str | os.PathLike[str], *,
            open_store: OpenStore, force: bool = False,
            reapply_from: Iterable[str | os.PathLike[str]] = (),
            no_record: bool = False,
            kek_use: Callable[[], dict[UUID, int]] | None = None,
            key_cluster_ids: Callable[[], set[UUID]] | None = None,
            move_payloads: Callable[[Path], dict[str, Any]] | None = None,
            progress: Progress = _no_progress) -> dict[str, Any]:
    """Puts the backup in ``source`` in place as the store in ``data``.

    ``move_payloads(data)``: where payloads live in HBase (ADR 0072), the restored payload
    files are then copied into it and removed here (``letterlog payloads migrate
    --remove-local``); until that has run they are read where they are.

    ``data`` must be absent or empty, or hold a store and ``force`` be given; no process may
    have that store open. The erasures recorded in the store being replaced, in each record
    kept beside the backup (``records_beside``), and in each of ``reapply_from`` (records
    ``letterlog erase export`` wrote, or data directories) that the backup predates are
    made again on the restored store. With no such record (or only records older than the
    backup) the restore is refused before anything is written (``NoErasureRecord``) unless
    ``no_record`` is given. ``open_store`` opens a store (``Letterlog.open``: the entry
    point hands it over). ``kek_use`` (a PostgreSQL log: each KEK its live data keys are
    wrapped under) and ``key_cluster_ids`` (the KEKs the key cluster holds): every KEK the
    log uses must be in the backup's vault file or the key cluster, else the restore is
    refused before anything is written, naming them (``KeksMissing``, ADR 0074)."""
    src, root = Path(source).absolute(), Path(data).absolute()
    manifest = read_manifest(src)
    if root == src or src in root.parents or root in src.parents:
        raise BackupError(f"{root}: the backup and the restored store must not contain one "
                          "another")
    replacing = root.exists() and (not root.is_dir() or any(root.iterdir()))
    if replacing:
        if not root.is_dir() or not any((root / n).exists() for n in (LOG, datadir.VAULT,
                                                                       PAYLOADS)):
            raise BackupError(f"{root}: exists and holds no letterlog store (no {LOG}); a "
                              "restore goes into a new or empty directory, or replaces a "
                              "store (with --force)")
        if not force:
            raise BackupError(f"{root}: holds a letterlog store; restoring replaces it (and "
                              "what it received after the backup): give --force")
        held = _holders(root)
        if held:
            raise StoreBusy(f"{root}: the store is in use ({'; '.join(held)}): stop those "
                            "processes before restoring over it")
    reapply_from = list(reapply_from)
    if no_record and reapply_from:
        raise BackupError("--no-erasure-record and --reapply-erasures contradict each other: "
                          "give one")
    record = ErasureRecord()
    beside = [p for p in records_beside(src) if p.absolute() not in
              {Path(x).absolute() for x in reapply_from}]
    for extra in [*reapply_from, *beside]:  # read before anything changes: a bad one
        record.merge(read_erasure_record(extra, open_store))  # changes nothing
    if replacing:
        try:
            record.merge(read_erasure_record(root, open_store))
        except LetterlogError as e:
            raise BackupError(f"{root}: cannot read the erasures recorded in the store being "
                              f"replaced ({e}); give them with --reapply-erasures FILE (from "
                              "`letterlog erase export`), or move the store away first "
                              "and restore into an empty directory") from None
    uncovered = _check_record_covers(record, manifest, src, root, no_record)
    _check_files(src, manifest, progress)
    if kek_use is not None:
        _check_keks(src, kek_use(), key_cluster_ids() if key_cluster_ids else set())
    _remove_stale_staging(root)
    staging = root.with_name(f".{root.name}.restoring-{os.getpid()}")
    private_dir(root.parent)
    os.mkdir(staging, DIR_MODE)
    os.chmod(staging, DIR_MODE)
    try:
        total = len(manifest["files"])
        for i, f in enumerate(manifest["files"], 1):
            target = staging / f["path"]
            private_dir(target.parent)
            copied = _copy_file(src / f["path"], target)
            if copied is None or copied[1] != f["sha256"]:
                raise BackupInvalid(f"{src / f['path']}: changed while it was restored")
            progress("restoring", i, total)
        for dirpath, _, _ in os.walk(staging):
            fsync_dir(Path(dirpath))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    replaced = root.with_name(f".{root.name}.replaced-{os.getpid()}")
    was_empty = not replacing and root.exists()
    found_mode = (root.stat().st_mode & 0o7777) if was_empty else DIR_MODE
    if replacing:
        os.rename(root, replaced)
    elif was_empty:
        root.rmdir()  # empty
    os.rename(staging, root)
    fsync_dir(root.parent)
    try:
        result = _open_restored(root, record, open_store)
    except BaseException as e:
        if not replacing:  # a failure says nothing changed: the target as it was found
            _take_back(root, was_empty, found_mode)
        if replacing:
            raise BackupError(f"{root}: restored, but making the recorded erasures again "
                              f"failed ({e}); the store it replaced is kept in {replaced}: "
                              f"run `letterlog --data {root} restore-backup {src} --force "
                              f"--reapply-erasures {replaced}` again") from e
        raise
    if replacing:  # the erasures are made again: the old store is no longer needed
        shutil.rmtree(replaced)
    if move_payloads is not None:
        try:
            result["payloads_moved"] = move_payloads(root)
        except (LetterlogError, OSError) as e:  # read from the files meanwhile
            result["payloads_moved"] = {
                "problem": f"{type(e).__name__}: {e}; the restored payloads are read from "
                           f"{root / PAYLOADS} until `letterlog payloads migrate "
                           "--remove-local` has copied them"}
    result.update({"restored": str(root), "from": str(src),
                   "position": (manifest["log"] or {}).get("position"),
                   "backup_created": manifest["created"],
                   "replaced": replacing, "erasures_from": record.sources,
                   "erasure_record_position": record.position if record.sources else None,
                   "no_erasure_record": uncovered})
    return result


def _check_keks(src: Path, use: dict[UUID, int], in_key_cluster: set[UUID]) -> None:
    """Every KEK the log's live data keys are wrapped under is in the backup's vault file
    or in the key cluster; else ``KeksMissing`` naming them (nothing written yet)."""
    in_backup: set[UUID] = set()
    if (src / datadir.VAULT).is_file():
        con = sqlite3.connect(f"file:{src / datadir.VAULT}?mode=ro", uri=True)
        try:
            in_backup = {UUID(bytes=bytes(r[0])) for r in con.execute("SELECT kek_id FROM keks")}
        finally:
            con.close()
    missing = {k: n for k, n in use.items() if k not in in_backup and k not in in_key_cluster}
    if missing:
        keys = sum(missing.values())
        named = ", ".join(str(k) for k in sorted(missing, key=str)[:3])
        raise KeksMissing(
            f"{src}: the log's data keys are wrapped under {len(missing)} key-encryption "
            f"key(s) that neither the backup's {datadir.VAULT} nor the key store holds "
            f"({named}{', ...' if len(missing) > 3 else ''}): {keys} data key(s), whose "
            "messages could not be opened. The key copy (`letterlog backup`) must be taken "
            "after the log's base backup with no erasure or purge run between the two "
            "(docs/operations.md); restore the log from a base backup that this key copy "
            "covers, or give a key copy taken after it. Nothing was changed")


def _take_back(root: Path, was_empty: bool, mode: int) -> None:
    """A restore into a new or empty directory that failed once its copy was in place
    (the copy cannot be opened, the erasures cannot be made again): the copy goes, so the
    target is as it was (absent, or empty) and the restore can be run again."""
    aside = root.with_name(f".{root.name}.restoring-{os.getpid()}")
    with contextlib.suppress(OSError):
        os.rename(root, aside)  # out of the way at once, deleted after
        if was_empty:  # as it was found: empty, with its mode
            os.mkdir(root)
            os.chmod(root, mode)
    shutil.rmtree(aside, ignore_errors=True)
    fsync_dir(root.parent)


def _remove_stale_staging(root: Path) -> None:
    """Staging directories a killed restore left beside ``root`` (copies of a backup: plain
    text read models) are deleted once the process that made them is gone."""
    for stale in root.parent.glob(f".{root.name}.restoring-*"):
        pid = stale.name.rsplit("-", 1)[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(stale, ignore_errors=True)


def _open_restored(root: Path, record: ErasureRecord,
                   open_store: OpenStore) -> dict[str, Any]:
    with open_store(root, create=False) as store:
        caught_up = store.catch_up()  # the read models were copied before the log
        during = erased_while_copied(store)
        for message_id in during:
            store.erase_message(message_id)
        again = reapply(store, record)
        again["erased_while_copied"] = [str(m) for m in during]
        if getattr(store.settings, "key_store_dsn", None):  # the copy's KEKs: into the key
            again["keys_migrated"] = store.migrate_keys()   # cluster, the file removed
        head = store.max_position()
    facts = None
    if (root / LOG).is_file():
        con = sqlite3.connect(f"file:{root / LOG}?mode=ro", uri=True)
        try:
            facts = _log_facts(con)
        finally:
            con.close()
    return {"events_projected": caught_up, "head": head, "log": facts, **again}
