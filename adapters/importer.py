"""Import mbox files and Maildir folders through the batched delivery path, with progress."""

from __future__ import annotations

import contextlib
import mailbox as stdlib_mailbox
import multiprocessing
import os
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from domain.commands import Deliver, build
from domain.errors import InvalidCommand, LetterlogError
from domain.rfc5322 import MessageFacts, MessageLimits, inspect_message
from domain.service import CheckedDelivery

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


Named = tuple[str, dict[str, Any]]  # a message's name (for reports) and its Deliver fields


def default_workers() -> int:
    """Checking processes beside the delivering one: one per further core."""
    return max(1, (os.cpu_count() or 1) - 1)


def start_checkers(workers: int) -> ProcessPoolExecutor:
    """Worker processes that check messages (``forkserver``: never a fork of this process
    with its open databases and threads)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["domain.rfc5322"])
    return ProcessPoolExecutor(max_workers=workers, mp_context=context)


def _inspect_all(raws: list[bytes], limits: MessageLimits) -> list[MessageFacts | str]:
    """In a worker: each message's facts, or why it is rejected."""
    out: list[MessageFacts | str] = []
    for raw in raws:
        try:
            out.append(inspect_message(raw, limits))
        except LetterlogError as e:
            out.append(str(e))
    return out


def checked_batches(store: Any, batches: Iterable[list[Named]], *,
                    pool: Executor | None = None,
                    ) -> Iterator[tuple[list[CheckedDelivery], list[dict[str, str]]]]:
    """Each batch's messages checked one by one (a bad one is reported, not the batch):
    ``(checked, rejections)`` per batch. With ``pool``, a batch is checked in a worker
    process while the caller delivers the one before (one batch ahead); without, here."""
    limits = store.mail.limits

    def commands(chunk: list[Named]) -> list[tuple[str, Deliver | str]]:
        out: list[tuple[str, Deliver | str]] = []
        for name, fields in chunk:
            try:
                out.append((name, build(Deliver, **fields)))
            except LetterlogError as e:
                out.append((name, str(e)))
        return out

    def split(cmds: list[tuple[str, Deliver | str]], found: list[MessageFacts | str],
              ) -> tuple[list[CheckedDelivery], list[dict[str, str]]]:
        checked: list[CheckedDelivery] = []
        rejected: list[dict[str, str]] = []
        facts = iter(found)
        for name, cmd in cmds:
            if isinstance(cmd, str):
                rejected.append({"message": name, "error": cmd})
                continue
            f = next(facts)
            if isinstance(f, str):
                rejected.append({"message": name, "error": f})
            else:
                checked.append(CheckedDelivery(cmd, f))
        return checked, rejected

    if pool is None:
        for chunk in batches:
            cmds = commands(chunk)
            yield split(cmds, _inspect_all([c.raw for _, c in cmds if not isinstance(c, str)],
                                           limits))
        return
    ahead: deque[tuple[list[tuple[str, Deliver | str]], Future[list[MessageFacts | str]]]]
    ahead = deque()
    for chunk in batches:
        cmds = commands(chunk)
        raws = [c.raw for _, c in cmds if not isinstance(c, str)]
        ahead.append((cmds, pool.submit(_inspect_all, raws, limits)))
        if len(ahead) > 1:
            cmds, future = ahead.popleft()
            yield split(cmds, future.result())
    while ahead:
        cmds, future = ahead.popleft()
        yield split(cmds, future.result())


def run_import(store: Any, total: int, items: Iterable[tuple[str, bytes, list[str]]],
               account: str, mailbox: str, *, batch: int = 100,
               progress: bool = True, workers: int | None = None) -> dict[str, Any]:
    """Batched delivery of ``items``; messages are checked in ``workers`` processes
    (default: one per further core) once there is more than one batch."""
    imported = 0
    rejected: list[dict[str, str]] = []
    batch = max(1, batch)
    workers = default_workers() if workers is None else workers
    named = ((name, {"account": account, "mailbox": mailbox, "raw": raw, "flags": flags})
             for name, raw, flags in items)
    columns = (TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with contextlib.ExitStack() as stack:
        pool = (stack.enter_context(start_checkers(workers))
                if workers > 0 and total > batch else None)
        bar = stack.enter_context(Progress(*columns, disable=not progress, transient=False))
        task = bar.add_task("import", total=total)
        for checked, bad in checked_batches(store, _batches(named, batch), pool=pool):
            rejected += bad
            imported += len(store.mail.deliver_checked(checked))
            bar.advance(task, len(checked) + len(bad))
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
