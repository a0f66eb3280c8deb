"""The messages an import reads, as the source knows them: ``SourceMessage`` (its real file's
name, its bytes, flags, internal date, Maildir++ folder, idempotency key), the keys that make
importing a source again deliver nothing, and the Maildir reader (``import_mbox`` reads mbox
files; ``importer`` delivers both; its docstring says what is kept of each source).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.parser import BytesHeaderParser
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING

from domain.errors import InvalidCommand

if TYPE_CHECKING:
    pass

MAILDIR_FLAGS = {"S": "\\Seen", "R": "\\Answered", "F": "\\Flagged", "T": "\\Deleted",
                 "D": "\\Draft", "P": "$Forwarded"}
_HEADERS = BytesHeaderParser()
FOLDER_ROLES = {"sent": "sent", "sent items": "sent", "sent messages": "sent",
                "sent mail": "sent", "drafts": "drafts", "trash": "trash",
                "deleted items": "trash", "deleted messages": "trash", "junk": "junk",
                "junk e-mail": "junk", "spam": "junk", "archive": "archive",
                "archives": "archive"}


@dataclass(frozen=True)
class SourceMessage:
    """One message of an mbox or Maildir with what its source says about it."""

    name: str  # the real file (and the message's number in an mbox)
    raw: bytes = field(repr=False)
    flags: tuple[str, ...] = ()
    internal_date: datetime | None = None
    folder: str = ""  # a Maildir++ sub-folder's mailbox name ("" = the target mailbox)
    error: str | None = None  # why it could not be read
    key: str | None = None  # the idempotency key: importing it again delivers nothing


def mbox_key(first: str, index: int, raw: bytes) -> str:
    """The idempotency key of an mbox's ``index``-th message: the file is identified by its
    first message (``first``: the first 32 hex digits of its SHA-256; appending mail to an
    mbox keeps it), the message by its position and content. Importing the file again, or a
    copy of it, finds every key already claimed."""
    return f"mbox:{first}:{index}:{hashlib.sha256(raw).hexdigest()[:32]}"


def maildir_key(file_name: str) -> str:
    """A Maildir message's unique name (its file name without the ``:2,`` info)."""
    return "maildir:" + file_name.partition(":2,")[0]


def target_key(key: str | None, mailbox: str) -> str | None:
    """A source message's idempotency key for an import into ``mailbox``: the same source
    imported into another mailbox is imported there too (a copy, as a mail administrator
    asks for), imported again into the same mailbox adds nothing. INBOX's key is the
    source's key itself (what imports into INBOX always used)."""
    if key is None or mailbox.upper() == "INBOX":
        return key
    return f"{key}>{mailbox}"


def maildir_flags(info_flags: str) -> list[str]:
    """Maildir's info letters (``:2,FRS``) as IMAP flags; unknown letters are ignored."""
    return sorted({MAILDIR_FLAGS[c] for c in info_flags if c in MAILDIR_FLAGS})


def header_block(raw: bytes) -> bytes:
    """A message's header lines: up to the first empty line (LF or CRLF), all of it if none."""
    ends = [i for i in (raw.find(b"\n\n"), raw.find(b"\r\n\r\n")) if i >= 0]
    return raw[:min(ends)] if ends else raw


def header_date(raw: bytes) -> datetime | None:
    value = _HEADERS.parsebytes(header_block(raw)).get("Date")
    try:
        when = parsedate_to_datetime(str(value)) if value else None
    except (TypeError, ValueError, IndexError):
        return None
    if when is not None and when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when


def _is_maildir(path: Path) -> bool:
    return (path / "cur").is_dir() or (path / "new").is_dir()


def maildir_folders(path: Path) -> list[tuple[str, Path]]:
    """The Maildir itself (``""``) and its Maildir++ sub-folders as mailbox names
    (``.Archive.2024`` → ``Archive/2024``)."""
    if not path.exists():
        raise InvalidCommand(f"{path}: no such directory")
    if not path.is_dir():
        raise InvalidCommand(f"{path}: is not a directory (import mbox?)")
    if not _is_maildir(path):
        raise InvalidCommand(f"{path}: is not a Maildir (no cur/ or new/)")
    subs = sorted(p for p in path.iterdir()
                  if p.name.startswith(".") and p.name not in (".", "..") and p.is_dir()
                  and _is_maildir(p))
    return [("", path), *[(p.name[1:].replace(".", "/"), p) for p in subs]]


def _maildir_files(folder: Path) -> Iterator[tuple[Path, str]]:
    for sub in ("new", "cur"):
        d = folder / sub
        if not d.is_dir():
            continue
        for entry in sorted(os.scandir(d), key=lambda e: e.name):
            if entry.name.startswith(".") or not entry.is_file():
                continue
            info = entry.name.rpartition(":2,")[2] if ":2," in entry.name else ""
            yield Path(entry.path), info


def maildir_messages(path: Path) -> tuple[int, Iterator[SourceMessage]]:
    folders = maildir_folders(path)
    files = [(name, f, info) for name, folder in folders for f, info in _maildir_files(folder)]
    if not files:
        raise InvalidCommand(f"{path}: is an empty Maildir (no messages to import)")

    def gen() -> Iterator[SourceMessage]:
        for name, f, info in files:
            try:
                raw = f.read_bytes()
                date = datetime.fromtimestamp(f.stat().st_mtime, UTC)
            except OSError as e:
                yield SourceMessage(str(f), b"", error=f"cannot read: {e.strerror or e}")
                continue
            yield SourceMessage(str(f), raw, tuple(maildir_flags(info)), date, name,
                                key=maildir_key(f.name))

    return len(files), gen()
