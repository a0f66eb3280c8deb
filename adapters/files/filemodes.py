"""Private files: everything letterlog creates in a data directory is for its owner alone.

The data directory and every directory letterlog makes in it are created 0700, every file
0600, whatever the process's umask (the mode is given when the file is created and set
again right after, before anything is written: a umask can only take bits away, and a
library must not change its host process's umask). SQLite gives a database's ``-wal`` and
``-shm`` files the mode of the database, so a database file created here first keeps its
companions private too.

An existing file or directory is never changed: an older store's 0644 files stay as they
are until the operator decides (``check_private`` refuses a key store or data directory
open to other users, as ssh refuses a private key readable by others).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import time
from pathlib import Path
from urllib.parse import quote

from domain.errors import StoreNotPrivate

FILE_MODE = 0o600
DIR_MODE = 0o700
OPEN_TO_OTHERS = 0o077  # any group or other permission bit

log = logging.getLogger("letterlog")


def private_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` as a directory; created (with its missing parents) 0700 if absent. An
    existing directory is left as it is."""
    path = Path(path)
    if path.is_dir():
        return path
    if not path.parent.is_dir() and path.parent != path:
        private_dir(path.parent)
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        return path  # made by another process meanwhile (or not a directory: the caller sees)
    os.chmod(path, DIR_MODE)  # the umask may have taken bits away (or a 0o7xx umask)
    return path


def read_only_sqlite(path: str | os.PathLike[str]) -> str | None:
    """A read-only SQLite URI for an existing database file in a directory this process
    cannot write (a snapshot, a backup mount), where SQLite could not make its ``-wal`` and
    ``-shm``: ``mode=ro`` when both are there to read, else ``immutable=1`` (no ``-wal``:
    the file alone holds the database, and nothing will change it). ``None``: open it as
    usual (absent, in memory, a URI already, or a writable directory)."""
    text = os.fspath(path)
    if not text or text.startswith(("file:", ":memory:")) or not os.path.isfile(text):
        return None
    if os.access(os.path.dirname(os.path.abspath(text)), os.W_OK):
        return None

    wal = all(os.path.exists(text + suffix) for suffix in ("-wal", "-shm"))
    return f"file:{quote(os.path.abspath(text))}?{'mode=ro' if wal else 'immutable=1'}"


def write_ahead(conn: sqlite3.Connection, wait: float = 30.0) -> None:
    """``conn``'s database in WAL mode. A new file's first switch to WAL needs every other
    connection out of it, and SQLite answers "database is locked" at once, without its busy
    handler, to a process that meets another switching at the same moment (processes
    opening one new store together). Tried again every 10 ms for ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def private_file(path: str | os.PathLike[str]) -> Path:
    """Creates ``path`` empty and 0600 if it does not exist (e.g. before SQLite opens it);
    an existing file is left as it is."""
    path = Path(path)
    try:
        fd = create_private(path, os.O_WRONLY | os.O_NOFOLLOW)
    except FileExistsError:
        return path
    os.close(fd)
    return path


def create_private(path: str | os.PathLike[str], flags: int = os.O_WRONLY) -> int:
    """A descriptor of a new file at ``path`` (``O_EXCL``: FileExistsError if there is one),
    0600 whatever the umask."""
    fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_private(path: Path, *, what: str, allow_shared: bool) -> None:
    """Refuses (``StoreNotPrivate``) ``path`` if group or others may read or write it
    (``allow_shared``: only a logged warning). An absent path passes."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return
    if not mode & OPEN_TO_OTHERS:
        return
    fix = "700" if path.is_dir() else "600"
    message = (f"{path}: {what} is open to other users (mode {mode:04o}); letterlog keeps it "
               f"private: `chmod {fix} {path}`, or set LETTERLOG_ALLOW_SHARED_KEYS=true to "
               f"open it anyway")
    if allow_shared:
        log.warning("%s (allowed by LETTERLOG_ALLOW_SHARED_KEYS)",
                    message.split("; letterlog")[0])
        return
    raise StoreNotPrivate(message)


def fsync_dir(path: Path) -> None:
    """Makes a directory's entries durable (a file created, renamed or removed in it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
