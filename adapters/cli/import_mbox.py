"""mbox files read into ``SourceMessage`` items: the messages' spans, the ``From `` line's
date (the usual form read without ``strptime``), the ``Status:`` flags (``importer``'s
docstring says what is kept)."""

from __future__ import annotations

import hashlib
import mmap
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from domain.errors import InvalidCommand

if TYPE_CHECKING:
    pass

from adapters.cli.import_source import SourceMessage, header_block, header_date, mbox_key

MBOX_FLAGS = {"R": "\\Seen", "A": "\\Answered", "F": "\\Flagged", "D": "\\Deleted",
              "T": "\\Draft"}
_STATUS = re.compile(rb"^(?:X-)?Status:[ \t]*([^\r\n]*)", re.MULTILINE | re.IGNORECASE)

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
    letters = b"".join(_STATUS.findall(header_block(raw))).decode("latin-1")
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
                date = date or header_date(raw)
                yield SourceMessage(f"{path}#{n}", raw, mbox_flags(raw), date,
                                    key=mbox_key(first, n - 1, raw))
        finally:
            data.close()

    return len(spans), gen()


# -- Maildir ------------------------------------------------------------------------------------
