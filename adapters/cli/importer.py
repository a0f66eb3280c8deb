"""Read mbox files and Maildir folders into deliveries, keeping what the source knows.

* **Internal date**: the mbox ``From `` line's date (in its zone, ``+0100`` or a name in
  ``ZONES``; UTC if it has none; an unknown zone name is read as UTC, with a warning) or
  the Maildir file's modification time (when it was delivered there); failing that the
  ``Date:`` header; failing that, now.
* **Flags**: mbox ``Status:`` / ``X-Status:`` (``R`` seen, ``A`` answered, ``F`` flagged,
  ``D`` deleted, ``T`` draft); Maildir info ``:2,`` letters (``S R F T D``, ``P`` is
  ``$Forwarded``).
* **Folders**: Maildir++ sub-folders (``.Sent``, ``.Archive.2024``) become mailboxes
  (``Sent``, ``Archive/2024``), created when missing. A top-level folder with a usual
  special-use name (``Sent``, ``Sent Items``, ``Drafts``, ``Trash``, ``Deleted Items``,
  ``Junk``, ``Spam``, ``Archive``; any case) gets that role (RFC 6154), unless the account
  has a mailbox with that role already.

Every source message is named by its real file (``box.mbox#12``: the 12th message;
``Maildir/cur/1700000000.x:2,S``), so a rejection says where to look. A batch of checked
messages is delivered in one append; a message that fails the checks is reported alone.
Reading the sources is ``import_source``'s (Maildir) and ``import_mbox``'s (mbox).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Protocol

from domain.errors import InvalidCommand, LetterlogError

if TYPE_CHECKING:
    from adapters.face import Store

from adapters.cli.import_source import FOLDER_ROLES, SourceMessage, target_key


# -- delivery -----------------------------------------------------------------------------------
def _batches(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for it in items:
        batch.append(it)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _mailbox_for(target: str, folder: str) -> str:
    if not folder:
        return target
    return folder if target == "INBOX" else f"{target}/{folder}"


def folder_role(target: str, folder: str) -> str:
    """The special-use role of a Maildir++ folder imported under ``target`` ("" if none): only
    a top-level folder of an import into INBOX takes one."""
    if target != "INBOX" or "/" in folder:
        return ""
    return FOLDER_ROLES.get(folder.lower(), "")


CheckedBatch = tuple[list[Any], bool, int, int]
"""A batch's checked deliveries, whether their keys are expected new, how many source
messages it held, and how many of those were found landed already (looked up)."""


class CheckingSource(Protocol):
    """A source that checks its own messages (``adapters.cli.mbox_ahead``: in a second
    process) and hands ``run_import`` checked batches instead of ``SourceMessage`` items."""

    def checked_batches(self, store: Store, account: str, mailbox: str, batch: int,
                        rejected: list[dict[str, str]],
                        on_reject: Callable[[str, str], None] | None
                        ) -> Iterator[CheckedBatch]: ...


def reject(rejected: list[dict[str, str]], on_reject: Callable[[str, str], None] | None,
           name: str, problem: str) -> None:
    """A message refused: in the report's ``rejections`` and told to ``on_reject``."""
    rejected.append({"message": name, "error": problem})
    if on_reject is not None:
        on_reject(name, problem)


class ImportInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) during an import: ``report`` holds what landed before it (the
    messages of every batch appended; a batch being appended may have landed too)."""

    def __init__(self, report: dict[str, Any]) -> None:
        super().__init__("import interrupted")
        self.report = report


def run_import(store: Store, total: int, items: Iterable[SourceMessage] | CheckingSource,
               account: str,
               mailbox: str, *, batch: int = 100, progress: Callable[[int], None] | None = None,
               on_reject: Callable[[str, str], None] | None = None) -> dict[str, Any]:
    """Delivers ``items`` through ``store`` (the ``Letterlog`` facade), ``batch`` at a time.
    Each message is checked alone: a bad one is reported (``on_reject(name, problem)`` and
    in the report's ``rejections``), the rest of its batch is delivered. Each message
    carries its source's idempotency key, so running the import again (or resuming one
    that was interrupted) skips what already landed (``already_imported``). Batches land
    in source order, so what landed is a prefix: messages are looked up (and not parsed)
    while they are found delivered, up to the first that is not; from there on the
    deliveries themselves find any key claimed. A ``CheckingSource`` checks its messages
    itself and hands checked batches (``adapters.cli.mbox_ahead``)."""
    # more than one batch: a second process projects while this one appends (ADR 0027)
    pipelined = store.projecting_in_a_second_process() if total > batch else nullcontext()
    before = store.read_model_bytes()
    report: dict[str, Any] | None = None
    try:
        with pipelined:
            report = _deliver_batches(store, items, account, mailbox, batch, progress,
                                      on_reject)
        report["read_models_compacted"] = _compacted(store, before)
    except ImportInterrupted:
        raise
    except KeyboardInterrupt:  # after the last batch: every message landed
        raise ImportInterrupted(report or {"imported": 0, "already_imported": 0,
                                           "rejected": 0, "rejections": []}) from None
    return report


#: the share of the read models' file left empty above which an import compacts it
COMPACT_ABOVE = 0.25


def _compacted(store: Store, before: int | None) -> dict[str, int] | None:
    """The embedded read models compacted (ADR 0030) when this import wrote at least half
    of their file and left more than ``COMPACT_ABOVE`` of it empty (ADR 0111: a batch's
    rows go in in key order and fill their pages, so an import into a fresh store leaves
    about a sixth empty and is not rewritten; rows a delivery at a time, newest first,
    leave pages about half full). Rewriting the file costs at most about twice what the
    import wrote to it. Into a big store, the import leaves that to ``letterlog compact``."""
    if before is None:
        return None
    after = store.read_model_bytes()
    if after is None or after < 2 * before:
        return None
    slack = store.read_model_slack()
    if slack is not None and slack <= COMPACT_ABOVE:
        return None
    compacted = store.compact_read_models()
    return None if compacted is None else dict(compacted)


@contextmanager
def _interrupt_after() -> Iterator[None]:
    """A Ctrl-C inside the block takes effect when it ends: a batch's append and its count
    are one step, so the interrupted line counts every batch that committed (a Ctrl-C in
    the middle of a commit used to leave a landed batch uncounted, or end the import with
    an error). A second Ctrl-C interrupts at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed: list[int] = []

    def later(signum: int, frame: Any) -> None:
        pressed.append(signum)
        if len(pressed) > 1:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, later)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed and callable(previous):
        previous(signal.SIGINT, None)  # Python's own handler: KeyboardInterrupt


def _deliver_batches(store: Store, items: Iterable[SourceMessage] | CheckingSource,
                     account: str, mailbox: str,
                     batch: int, progress: Callable[[int], None] | None,
                     on_reject: Callable[[str, str], None] | None) -> dict[str, Any]:
    imported = already = 0
    rejected: list[dict[str, str]] = []
    created: set[str] = set()
    # A batch's payload files are written (and fsynced) in a thread while this one checks
    # the next batch and appends the batch before: the written items carry their payloads'
    # addresses, which the delivery only touches. A failure here is left to the delivery
    # (it writes what was not written). A source that writes them itself (the mbox's reading
    # process, ADR 0104) hands items carrying their addresses already: nothing is submitted.
    ahead = ThreadPoolExecutor(1, thread_name_prefix="payloads-ahead")
    pending: tuple[Future[list[Any]] | None, list[Any], bool, int] | None = None

    def deliver(waiting: tuple[Future[list[Any]] | None, list[Any], bool, int]) -> None:
        nonlocal imported, already
        written, checked, new_keys, count = waiting
        if written is not None:
            checked = written.result()  # its payloads are on disk (or left to the delivery)
        with _interrupt_after():
            delivered = store.deliver_checked(checked, new_keys=new_keys)
            duplicates = sum(d.duplicate for d in delivered)
            imported += len(delivered) - duplicates
            already += duplicates
        if progress is not None:
            progress(count)

    def write_ahead(checked: list[Any]) -> list[Any]:
        try:
            return store.store_payloads(checked)
        except Exception:  # the delivery writes them (and says why, if it cannot)
            return checked

    def report() -> dict[str, Any]:
        return {"imported": imported, "already_imported": already, "rejected": len(rejected),
                "rejections": rejected}

    source: Iterator[CheckedBatch] = (
        items.checked_batches(store, account, mailbox, batch, rejected, on_reject)
        if hasattr(items, "checked_batches") else
        _checked_batches(store, items, account, mailbox, batch, created, rejected,
                         on_reject))
    try:
        for checked, new_keys, count, landed in source:
            already += landed
            written = (None if getattr(items, "payloads_written", False) or not checked
                       else ahead.submit(write_ahead, checked))
            if pending is not None:
                deliver(pending)
            pending = (written, checked, new_keys, count)
        if pending is not None:
            deliver(pending)
    except KeyboardInterrupt:
        raise ImportInterrupted(report()) from None
    finally:
        close = getattr(source, "close", None)
        if close is not None:  # a source's process or file is let go of
            close()
        ahead.shutdown(wait=True)
    return report()


def _checked_batches(store: Store, items: Iterable[SourceMessage], account: str, mailbox: str,
                     batch: int, created: set[str], rejected: list[dict[str, str]],
                     on_reject: Callable[[str, str], None] | None
                     ) -> Iterator[CheckedBatch]:
    """Each batch's checked deliveries (``CheckedBatch``)."""
    resuming = True
    for chunk in _batches(items, max(1, batch)):
        checked = []
        already = 0
        for m in chunk:
            key = target_key(m.key, mailbox)
            if resuming and key is not None and m.error is None:
                if store.already_delivered(account, key):
                    already += 1
                    continue
                resuming = False
            try:
                if m.error is not None:
                    raise InvalidCommand(m.error)
                target = _mailbox_for(mailbox, m.folder)
                if m.folder and target not in created:
                    store.ensure_mailbox(account, target, folder_role(mailbox, m.folder))
                    created.add(target)
                checked.append(store.check(account=account, mailbox=target, raw=m.raw,
                                           flags=list(m.flags), internal_date=m.internal_date,
                                           idempotency_key=key))
            except LetterlogError as e:
                reject(rejected, on_reject, m.name, str(e))
        yield checked, not resuming, len(chunk), already
