"""The backup's format, shared by taking a backup (``copying``) and restoring one
(``restoring``): the manifest, its names and the errors; the copies themselves:
``sqlitecopies``, ``filecopies``, ``logfacts``.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from adapters.files import datadir
from adapters.files.filemodes import create_private, fsync_dir
from domain.errors import LetterlogError

FORMAT = "letterlog-backup/1"
RECORD_FORMAT = "letterlog-erasures/1"
RECORD_SUFFIX = ".erasures.json"  # a record kept beside the backups: DIR/../NAME.erasures.json
MANIFEST = "manifest.json"
LOG = datadir.LOG
READ_MODELS = (datadir.READ_MODELS, datadir.STREAM_TABLES)
PAYLOADS = datadir.PAYLOADS

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
