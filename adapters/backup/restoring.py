"""Restoring a backup (``letterlog restore-backup``): every file checked against the
manifest, the store built beside the target and put in place, the erasures recorded since
the backup made again on it (``erasures``); refused, with nothing changed, when no record
covers the backup (ADR 0069) or a KEK the log uses is in neither the backup nor the key
cluster (ADR 0074).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from uuid import UUID

from adapters.backup.common import (
    LOG,
    MANIFEST,
    PAYLOADS,
    RECORD_SUFFIX,
    BackupError,
    BackupInvalid,
    KeksMissing,
    NoErasureRecord,
    OpenStore,
    Progress,
    _no_progress,
    read_manifest,
)
from adapters.backup.copying import erased_while_copied
from adapters.backup.erasures import ErasureRecord, read_erasure_record
from adapters.backup.filecopies import _copy_file, _sha256, _sqlite_files
from adapters.backup.logfacts import _log_facts
from adapters.backup.reapplying import reapply
from adapters.files import datadir
from adapters.files.filemodes import DIR_MODE, fsync_dir, private_dir
from adapters.lifecycle.completed import Holder
from adapters.lifecycle.walcheckpoint import holders_of
from domain.errors import LetterlogError, StoreBusy

__all__ = ["records_beside", "restore"]


def _store_holders(root: Path) -> list[str]:
    """Processes with a file of the store in ``root`` open."""

    found = []
    for name in _sqlite_files(root):
        pids, names = holders_of(root / name)
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
        held = _store_holders(root)
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
