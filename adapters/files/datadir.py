"""The data directory of an embedded store, checked before anything opens it.

``check_data_dir`` raises a ``StoreUnavailable`` naming what is wrong (a file where the
directory should be, no store in it for a reader, an ``events.sqlite`` that is not
letterlog's, a data directory or key store open to other users: ``StoreNotPrivate``);
the store (``Letterlog.open``) and the fast read path (``adapters.startup.current``) both
check through it, so both refuse alike. A data directory it creates is 0700
(``adapters.files.filemodes``).
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from adapters.files.filemodes import (
    DIR_MODE,
    check_private,
    private_dir,
    private_file,
    read_only_sqlite,
)
from domain.errors import StoreNotPrivate, StoreUnavailable

SQLITE_MAGIC = b"SQLite format 3\x00"

# -- the data directory's names: the one place they are spelled --------------------------------
LOG = "events.sqlite"  # the SQLite event log
READ_MODELS = "tables.sqlite"  # the embedded read models
STREAM_TABLES = "stream-tables.sqlite"  # a stream worker's tables when not HBase's
KEYS = "keys.sqlite"  # the data keys, wrapped (beside an SQLite log)
VAULT = "vault.sqlite"  # the key-encryption keys (LETTERLOG_KEY_VAULT may put it elsewhere)
PAYLOADS = "payloads"  # the payload files
PROJECTIONS_LOCK = ".projections.lock"  # held by whoever projects into the read models


def check_data_dir(root: Path, sqlite_log: bool, create: bool, *,
                   allow_shared: bool = False, vault: Path | None = None,
                   writable: bool = True) -> None:
    """A data directory a store can use, or a ``StoreUnavailable`` naming what is wrong.
    The directory and its key store must be closed to other users (``StoreNotPrivate``;
    ``allow_shared``: a warning only). A directory it creates is 0700, and so is an empty
    one a new store is made in (nothing in it yet: the store's own); a directory holding
    anything is never changed. ``writable=False``: a reader that writes nothing into the
    directory (the Spark export) takes a read-only one too (a snapshot, a backup mount)."""
    try:
        if root.exists() and not root.is_dir():
            raise StoreUnavailable(f"{root}: is not a directory (give --data a directory)")
        if not create:
            # the hint is for a person at a terminal; an unmounted volume looks the same,
            # and there ``init`` would make an empty store: the MTA paths never print it
            make = (f"if its volume is not mounted, mount it; for a new store, "
                    f"`letterlog --data {root} init` makes one")
            if not root.is_dir():
                raise StoreUnavailable(f"{root}: no letterlog store here (no such directory)",
                                       hint=make)
            if sqlite_log and not (root / LOG).is_file():
                raise StoreUnavailable(f"{root}: holds no letterlog store (no events.sqlite)",
                                       hint=make)
        if not root.is_dir():
            private_dir(root)
        elif create and not any(os.scandir(root)) and os.stat(root).st_uid == os.geteuid():
            os.chmod(root, DIR_MODE)  # a new store's own (empty) directory
        if not os.access(root, os.R_OK | os.X_OK | (os.W_OK if writable else 0)):
            if os.statvfs(root).f_flag & os.ST_RDONLY:
                raise StoreUnavailable(f"{root}: on a read-only filesystem")
            raise StoreUnavailable(f"{root}: not readable and writable by this user")
        if sqlite_log:
            check_event_store(root / LOG)  # not a store at all: said first
        check_private(root, what="the data directory", allow_shared=allow_shared)
        for keys in (KEYS, KEYS + "-wal", VAULT, VAULT + "-wal"):
            check_private(root / keys, what="the key store", allow_shared=allow_shared)
        check_vault(Path(vault) if vault else root / VAULT, allow_shared=allow_shared)
    except OSError as e:
        raise StoreUnavailable(f"{root}: cannot use as a data directory: "
                               f"{e.strerror or e}") from None


def check_vault(path: Path, *, allow_shared: bool = False) -> None:
    """The vault (``LETTERLOG_KEY_VAULT``, default ``<data>/vault.sqlite``) is checked like
    the data directory: its directory, the file and its ``-wal``/``-shm`` closed to other
    users (``StoreNotPrivate``, ``allow_shared``: a warning), and each owned by this user;
    a ``-wal`` or ``-shm`` without the vault beside it (made by someone else, waiting for
    the first KEKs) is refused too (ADR 0064)."""
    check_private(path.parent, what="the key vault's directory", allow_shared=allow_shared)
    for part in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        check_private(part, what="the key vault", allow_shared=allow_shared)
        try:
            owner = part.lstat().st_uid
        except FileNotFoundError:
            continue
        if part.is_symlink():
            raise StoreNotPrivate(f"{part}: the key vault is a symbolic link; letterlog "
                                  f"opens only a file of its own: remove it")
        if owner != os.geteuid():
            raise StoreNotPrivate(f"{part}: the key vault belongs to another user (uid "
                                  f"{owner}); letterlog opens only its own: remove it, or "
                                  f"point LETTERLOG_KEY_VAULT at this user's file")
        if part != path and not path.exists():
            raise StoreNotPrivate(f"{part}: a write-ahead file without the key vault "
                                  f"{path} beside it (made by another process before the "
                                  f"vault): remove it")


def check_event_store(path: Path) -> None:
    """An existing ``events.sqlite`` must be an SQLite file holding letterlog's tables (or
    none yet): anything else is refused before the library writes its tables into it."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb") as fh:
        if fh.read(16) != SQLITE_MAGIC:
            raise StoreUnavailable(f"{path}: is not a letterlog event store "
                                   "(not an SQLite database)")


    try:  # in a read-only directory (a snapshot) as SQLite can open it there
        con = sqlite3.connect(read_only_sqlite(path) or f"file:{path}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master "
                                                "WHERE type = 'table'")}
        finally:
            con.close()
    except sqlite3.OperationalError as e:  # unreadable now (a full disk, I/O): not "not ours"
        raise StoreUnavailable(f"{path}: cannot be read ({e})") from None
    except sqlite3.DatabaseError as e:
        raise StoreUnavailable(f"{path}: is not a letterlog event store ({e})") from None
    if tables and "stored_events" not in tables:
        raise StoreUnavailable(f"{path}: is not a letterlog event store "
                               "(an SQLite database without letterlog's tables)")


PARTS = (("events", (LOG,)), ("read_models", (READ_MODELS,)),
         ("payloads", (PAYLOADS,)), ("keys", (KEYS, VAULT)))
"""The data directory's parts, by the names their files and directories start with (an
SQLite file's WAL and shared-memory files go with it)."""


def disk_bytes(root: Path) -> int:
    """Bytes allocated on disk to ``root`` and everything under it (st_blocks, as ``du``
    counts them; directories included). A file with several names under ``root`` (a payload
    and its content link, ADR 0099) is counted once, as ``du`` counts it."""
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        return 0
    total = st.st_blocks * 512
    seen = {(st.st_dev, st.st_ino)}
    for dirpath, dirs, files in os.walk(root):
        for name in (*files, *dirs):
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except FileNotFoundError:  # removed while counting
                continue
            if st.st_nlink > 1:
                inode = (st.st_dev, st.st_ino)
                if inode in seen:
                    continue
                seen.add(inode)
            total += st.st_blocks * 512
    return total


def disk_use(root: Path) -> dict[str, int]:
    """Bytes on disk per part of the data directory (``PARTS``; ``other``: the directory
    itself and anything else in it) and their ``total``."""
    use = {part: 0 for part, _ in PARTS} | {"other": 0}
    use["other"] = os.lstat(root).st_blocks * 512
    for entry in os.scandir(root):
        part = next((p for p, starts in PARTS if entry.name.startswith(starts)), "other")
        use[part] += disk_bytes(Path(entry.path))
    use["total"] = sum(use.values())
    return use


@contextmanager
def exclusive(root: str | os.PathLike[str], name: str) -> Iterator[None]:
    """A cross-process lock in the data directory, ``<root>/.<name>.lock`` (embedded mode:
    e.g. ``views``, held while saved views are dropped or erased from)."""
    path = private_file(Path(root) / f".{name}.lock")
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def json_records(directory: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Each ``*.json`` record of ``directory`` (none if it does not exist), in name order,
    with its path; a record being written or removed meanwhile is passed over."""
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.glob("*.json")):
        try:
            found.append((path, json.loads(path.read_text())))
        except (OSError, ValueError):
            continue
    return found
