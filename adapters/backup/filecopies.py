"""Plain files copied into a backup or out of one (``_copy_file``: 0600, fsynced, the
mtime kept), each with its SHA-256, and the files of a data directory a backup copies: its
SQLite files and its payload files."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from adapters.backup.common import PAYLOADS
from adapters.files.filemodes import create_private


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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
