"""Import mbox files and Maildir folders through the batched delivery path, with progress."""

from __future__ import annotations

import mailbox as stdlib_mailbox
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from domain.commands import Deliver, build
from domain.errors import InvalidCommand, LetterlogError

MAILDIR_FLAGS = {"S": "\\Seen", "R": "\\Answered", "F": "\\Flagged", "T": "\\Deleted",
                 "D": "\\Draft", "P": "$Forwarded"}


def maildir_flags(info_flags: str) -> list[str]:
    """Maildir's info letters (``:2,FRS``) as IMAP flags; unknown letters are ignored."""
    return sorted({MAILDIR_FLAGS[c] for c in info_flags if c in MAILDIR_FLAGS})


def mbox_messages(path: Path) -> tuple[int, Iterator[tuple[str, bytes, list[str]]]]:
    box = stdlib_mailbox.mbox(str(path), create=False)
    keys = list(box.keys())

    def gen() -> Iterator[tuple[str, bytes, list[str]]]:
        for k in keys:
            yield f"{path}#{k}", box.get_bytes(k), []

    return len(keys), gen()


def maildir_messages(path: Path) -> tuple[int, Iterator[tuple[str, bytes, list[str]]]]:
    if not (path / "cur").is_dir() and not (path / "new").is_dir():
        raise InvalidCommand(f"{path}: not a Maildir (no cur/ or new/)")
    box = stdlib_mailbox.Maildir(str(path), factory=None, create=False)
    keys = sorted(box.keys())

    def gen() -> Iterator[tuple[str, bytes, list[str]]]:
        for k in keys:
            msg = box.get_message(k)
            yield f"{path}/{k}", box.get_bytes(k), maildir_flags(msg.get_flags())

    return len(keys), gen()


def _batches(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for it in items:
        batch.append(it)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def run_import(store: Any, total: int, items: Iterable[tuple[str, bytes, list[str]]],
               account: str, mailbox: str, *, batch: int = 100,
               progress: bool = True) -> dict[str, Any]:
    imported = 0
    rejected: list[dict[str, str]] = []
    columns = (TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, disable=not progress, transient=False) as bar:
        task = bar.add_task("import", total=total)
        for chunk in _batches(items, max(1, batch)):
            checked = []
            for name, raw, flags in chunk:
                try:
                    cmd = build(Deliver, account=account, mailbox=mailbox, raw=raw, flags=flags)
                    checked.append(store.mail.check(cmd))  # a bad message alone is rejected
                except LetterlogError as e:
                    rejected.append({"message": name, "error": str(e)})
            imported += len(store.mail.deliver_checked(checked))
            bar.advance(task, len(chunk))
    return {"imported": imported, "rejected": len(rejected), "rejections": rejected}


def import_mbox(store: Any, path: Path, account: str, mailbox: str = "INBOX", *,
                batch: int = 100, progress: bool = True) -> dict[str, Any]:
    if not path.is_file():
        raise InvalidCommand(f"{path}: not an mbox file")
    total, items = mbox_messages(path)
    return run_import(store, total, items, account, mailbox, batch=batch, progress=progress)


def import_maildir(store: Any, path: Path, account: str, mailbox: str = "INBOX", *,
                   batch: int = 100, progress: bool = True) -> dict[str, Any]:
    total, items = maildir_messages(path)
    return run_import(store, total, items, account, mailbox, batch=batch, progress=progress)
