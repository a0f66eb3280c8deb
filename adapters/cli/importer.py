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
"""

from __future__ import annotations

import hashlib
import mmap
import os
import re
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from email.parser import BytesHeaderParser
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from domain.errors import InvalidCommand, LetterlogError

if TYPE_CHECKING:
    from adapters.face import Store

MAILDIR_FLAGS = {"S": "\\Seen", "R": "\\Answered", "F": "\\Flagged", "T": "\\Deleted",
                 "D": "\\Draft", "P": "$Forwarded"}
MBOX_FLAGS = {"R": "\\Seen", "A": "\\Answered", "F": "\\Flagged", "D": "\\Deleted",
              "T": "\\Draft"}
_HEADERS = BytesHeaderParser()
FOLDER_ROLES = {"sent": "sent", "sent items": "sent", "sent messages": "sent",
                "sent mail": "sent", "drafts": "drafts", "trash": "trash",
                "deleted items": "trash", "deleted messages": "trash", "junk": "junk",
                "junk e-mail": "junk", "spam": "junk", "archive": "archive",
                "archives": "archive"}
_STATUS = re.compile(rb"^(?:X-)?Status:[ \t]*([^\r\n]*)", re.MULTILINE | re.IGNORECASE)


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


def _header_block(raw: bytes) -> bytes:
    """A message's header lines: up to the first empty line (LF or CRLF), all of it if none."""
    ends = [i for i in (raw.find(b"\n\n"), raw.find(b"\r\n\r\n")) if i >= 0]
    return raw[:min(ends)] if ends else raw


def _header_date(raw: bytes) -> datetime | None:
    value = _HEADERS.parsebytes(_header_block(raw)).get("Date")
    try:
        when = parsedate_to_datetime(str(value)) if value else None
    except (TypeError, ValueError, IndexError):
        return None
    if when is not None and when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when


ZONES = {"UT": 0, "UTC": 0, "GMT": 0, "Z": 0, "EST": -5, "EDT": -4, "CST": -6, "CDT": -5,
         "MST": -7, "MDT": -6, "PST": -8, "PDT": -7}
"""Zone names an mbox ``From `` line may carry whose offset is not ambiguous (RFC 5322's
obsolete zones); any other name (``CET``, ``IST``) is read as UTC, with a warning."""
_UNREADABLE = ("no date of the form 'Sun Mar  1 12:34:56 2020 [+0100]': the message's Date: "
               "header gives its date")
_NUMERIC_ZONE = re.compile(r"^([+-])(\d\d)(\d\d)$")


_WEEKDAYS = frozenset(("mon", "tue", "wed", "thu", "fri", "sat", "sun"))
_MONTHS = {m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug",
                                       "sep", "oct", "nov", "dec"), start=1)}


def _fast_date(weekday: str, month: str, day: str, hms: str, year: str) -> datetime | None:
    """``strptime(..., "%a %b %d %H:%M:%S %Y")`` for the form mbox writers use (``Sun Mar
    1 12:34:56 2020``: English names, a day of one or two digits, two-digit time fields, a
    four-digit year), about 20x faster; None for anything else (then strptime decides, so a
    date this reads is one strptime reads the same, and one it does not is left to it). The
    weekday is matched, not checked against the date, as strptime does."""
    number = _MONTHS.get(month.lower())
    if (number is None or weekday.lower() not in _WEEKDAYS or len(year) != 4
            or not 1 <= len(day) <= 2 or len(hms) != 8 or hms[2] != ":" or hms[5] != ":"):
        return None
    digits = day + hms[:2] + hms[3:5] + hms[6:] + year
    if not (digits.isascii() and digits.isdigit()):
        return None
    try:
        return datetime(int(year), number, int(day), int(hms[:2]), int(hms[3:5]),
                        int(hms[6:]))
    except ValueError:  # out of range (Feb 30, 25:00:00, second 60): strptime says why
        return None


def from_line_date(from_line: str) -> tuple[datetime | None, str | None]:
    """The date of an mbox ``From `` line, ``From sender Sun Mar  1 12:34:56 2020``, and
    what made it doubtful (``None``: nothing). A zone may stand before or after the year:
    ``+0100`` or a name in ``ZONES`` gives the offset; no zone is UTC; an unknown zone name
    is read as UTC and said so; an unreadable date is ``(None, why)``."""
    parts = from_line.split()[1:] if from_line.startswith("From ") else from_line.split()
    rest = parts[5:] if len(parts) >= 6 else []
    year = [p for p in rest if p.isdigit()]
    zones = [p for p in rest if not p.isdigit()]
    if len(year) != 1 or len(zones) > 1:
        return None, _UNREADABLE
    when = _fast_date(parts[1], parts[2], parts[3], parts[4], year[0])
    if when is None:  # not the usual form: strptime decides (slow, rare)
        try:
            when = datetime.strptime(" ".join([*parts[1:5], year[0]]), "%a %b %d %H:%M:%S %Y")
        except ValueError:
            return None, _UNREADABLE
    if not zones:
        return when.replace(tzinfo=UTC), None
    zone = zones[0]
    if m := _NUMERIC_ZONE.match(zone):
        minutes = int(m.group(2)) * 60 + int(m.group(3))
        return when.replace(tzinfo=timezone(timedelta(
            minutes=-minutes if m.group(1) == "-" else minutes))), None
    if zone.upper() in ZONES:
        return when.replace(tzinfo=timezone(timedelta(hours=ZONES[zone.upper()]))), None
    return when.replace(tzinfo=UTC), f"time zone {zone!r} is not one letterlog knows: read as UTC"


# -- mbox ---------------------------------------------------------------------------------------
def check_mbox(path: Path) -> None:
    """A readable, non-empty file starting with ``From ``; an InvalidCommand otherwise."""
    if not path.exists():
        raise InvalidCommand(f"{path}: no such file")
    if path.is_dir():
        raise InvalidCommand(f"{path}: is a directory, not an mbox file (import maildir?)")
    try:
        with open(path, "rb") as fh:
            head = fh.read(5)
    except OSError as e:
        raise InvalidCommand(f"{path}: cannot read: {e.strerror or e}") from None
    if not head:
        raise InvalidCommand(f"{path}: is empty (no messages to import)")
    if head != b"From ":
        raise InvalidCommand(f"{path}: is not an mbox file (it does not start with 'From ')")


def mbox_spans(data: bytes | mmap.mmap) -> list[tuple[int, int]]:
    """Where each message of an mbox starts (at its ``From `` line) and stops: every line
    starting with ``From `` starts one; a message stops before the blank line that precedes
    the next ``From `` line (or the end), as Python's ``mailbox.mbox`` reads it, so the
    bytes, and the idempotency keys made from them, are the same. One pass of ``find`` for
    ``"\nFrom "`` over the file (about 7x a multi-line regular expression's pace, which
    tries every position) instead of a ``readline``/``tell`` per line."""
    starts = [0] if data[:5] == b"From " else []
    at = data.find(b"\nFrom ")
    while at != -1:
        starts.append(at + 1)
        at = data.find(b"\nFrom ", at + 1)
    spans = []
    for i, start in enumerate(starts):
        stop = starts[i + 1] if i + 1 < len(starts) else len(data)
        if stop - start >= 2 and data[stop - 2:stop] == b"\n\n":
            stop -= 1  # the last line is exactly "\n": it separates, it is not mail
        spans.append((start, stop))
    return spans


def mbox_flags(raw: bytes) -> tuple[str, ...]:
    """The flags an mbox's ``Status:`` / ``X-Status:`` headers give (see ``MBOX_FLAGS``)."""
    letters = b"".join(_STATUS.findall(_header_block(raw))).decode("latin-1")
    return tuple(sorted({MBOX_FLAGS[c] for c in letters if c in MBOX_FLAGS}))


def mbox_messages(path: Path, warn: Callable[[str], None] | None = None
                  ) -> tuple[int, Iterator[SourceMessage]]:
    """The messages of the mbox at ``path``. ``warn``: told once (the first one, naming the
    message and its line) when a ``From `` line's date is doubtful or unreadable; such a
    message's date is then its ``Date:`` header's (unreadable), or read as UTC (a zone
    letterlog does not know)."""
    check_mbox(path)
    with open(path, "rb") as fh:
        data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    spans = mbox_spans(data)

    def gen() -> Iterator[SourceMessage]:
        first = ""
        warned = warn
        try:
            for n, (start, stop) in enumerate(spans, start=1):
                from_line, _, raw = data[start:stop].partition(b"\n")
                first = first or hashlib.sha256(raw).hexdigest()[:32]
                line = from_line.decode("latin-1").rstrip("\r")
                date, doubt = from_line_date(line)
                if doubt is not None and warned is not None:
                    warned(f"{path}#{n}: From line {line!r}: {doubt} (said for the first "
                           f"such line only)")
                    warned = None
                date = date or _header_date(raw)
                yield SourceMessage(f"{path}#{n}", raw, mbox_flags(raw), date,
                                    key=mbox_key(first, n - 1, raw))
        finally:
            data.close()

    return len(spans), gen()


# -- Maildir ------------------------------------------------------------------------------------
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


def _compacted(store: Store, before: int | None) -> dict[str, int] | None:
    """The embedded read models compacted (ADR 0030) when this import wrote at least half
    of their file: its rows went in newest first, leaving pages about half full, and
    rewriting the file costs at most about twice what the import wrote to it. Into a big
    store, the import leaves that to ``letterlog compact``."""
    if before is None:
        return None
    after = store.read_model_bytes()
    if after is None or after < 2 * before:
        return None
    compacted = store.compact_read_models()
    return None if compacted is None else dict(compacted)


def _deliver_batches(store: Store, items: Iterable[SourceMessage] | CheckingSource,
                     account: str, mailbox: str,
                     batch: int, progress: Callable[[int], None] | None,
                     on_reject: Callable[[str, str], None] | None) -> dict[str, Any]:
    imported = already = 0
    rejected: list[dict[str, str]] = []
    created: set[str] = set()
    # A batch's payload files are written (and fsynced) in a thread while this one checks
    # the next batch and appends the batch before: writing them ahead is only a head start,
    # the delivery writes (touches) them again, so a failure here is left to it to report.
    ahead = ThreadPoolExecutor(1, thread_name_prefix="payloads-ahead")
    pending: tuple[Future[None], list[Any], bool, int] | None = None

    def deliver(waiting: tuple[Future[None], list[Any], bool, int]) -> None:
        nonlocal imported, already
        written, checked, new_keys, count = waiting
        wait([written])  # its payloads are on disk (or left to the delivery to write)
        delivered = store.deliver_checked(checked, new_keys=new_keys)
        duplicates = sum(d.duplicate for d in delivered)
        imported += len(delivered) - duplicates
        already += duplicates
        if progress is not None:
            progress(count)

    def write_ahead(checked: list[Any]) -> None:
        with suppress(Exception):
            store.store_payloads(checked)

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
            written = ahead.submit(write_ahead, checked)
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
