"""Taking a backup (``letterlog backup``): the store's files copied in the order the package
docstring gives, the manifest written last.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from adapters.backup.common import (
    FORMAT,
    LOG,
    MANIFEST,
    PAYLOADS,
    READ_MODELS,
    BackupError,
    Progress,
    _no_progress,
    _version,
    _write_json,
)
from adapters.backup.filecopies import _copy_file, _payload_files, _sha256, _sqlite_files
from adapters.backup.logfacts import _log_facts
from adapters.backup.sqlitecopies import _copy_sqlite, _write_locked
from adapters.eventlog.keyvault import Vault
from adapters.eventlog.reader import read_events
from adapters.eventlog.store import open_log, sqlite_env
from adapters.files import datadir
from adapters.files.datadir import check_data_dir
from adapters.files.filemodes import DIR_MODE, fsync_dir, private_dir
from adapters.payloads.files import FilePayloadStore
from domain.errors import PayloadMissing

if TYPE_CHECKING:
    from adapters.face import Store

__all__ = ["backup", "erased_while_copied"]


def _copy_payloads(store: Any, out: Path, progress: Progress,
                   files: list[dict[str, Any]]) -> dict[str, Any]:
    """Every payload of ``store`` (HBase's payload table, then any file of the host's)
    written into ``out/payloads`` in the file store's format, with its write time: the
    backup holds the payloads as an embedded store's backup does, and a restore puts them
    back into HBase (``letterlog payloads migrate``). A payload purged while it is copied
    is counted as vanished."""

    copies = FilePayloadStore(out / PAYLOADS)
    counts: dict[str, Any] = {"files": 0, "bytes": 0, "vanished": 0, "from": "hbase"}
    entries = list(store.list())
    for i, (sha, _, written_at) in enumerate(entries, 1):
        try:
            # the same address: the log refers to it (ADR 0099)
            ref = copies.put_stream(store.open(sha), address=sha)
        except PayloadMissing:
            counts["vanished"] += 1
            continue
        if ref.address != sha:
            raise BackupError(f"payload {sha}: read back from the payload store as "
                              f"{ref.address} (damaged); the backup in {out} is incomplete")
        path = copies.file_of(ref.address)
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

    for _, event in read_events(log):
        part = getattr(event, "personal", None)
        if part is not None and getattr(part, "key_id", None) is not None:
            yield event.originator_id, event, part


def _destroy_keys_of_purged(out: Path) -> int:
    """In the copy: the key of every message its log says is purged is destroyed. An
    erasure appends ``Purged`` before it destroys the key: one that fell between the copy
    of the log and that of the keys would otherwise leave the copy a key the live store no
    longer has."""

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
