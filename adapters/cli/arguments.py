"""What a person types on a command line, read or refused with one line (``fail``): message
ids, date-times (with a timezone), days, deadlines, ``--as-of`` (a log position or a date),
sizes, and a message's extraction policy (``--extract-limit``, ``--extract-until``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated
from uuid import UUID

import typer

from adapters.cli.common import fail

UntilOption = Annotated[str | None, typer.Option(
    "--extract-until", metavar="ISO8601",
    help="extractable until this date-time (with a timezone, in the future)")]
LimitOption = Annotated[int | None, typer.Option(
    "--extract-limit", metavar="N", min=1, help="how many times it may be extracted")]


def parse_uuid(value: str, what: str = "MESSAGE_ID") -> UUID:
    try:
        return UUID(value)
    except ValueError:
        fail(f"{what}: {value!r} is not a message id (a UUID)")


def parse_time(value: str | None, what: str) -> datetime | None:
    if value is None:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        fail(f"{what}: {value!r} is not an ISO 8601 date-time")
    if t.tzinfo is None:
        fail(f"{what}: {value!r} needs a timezone (e.g. +00:00)")
    return t


def parse_future(value: str | None, what: str) -> datetime | None:
    """An ISO 8601 date-time that has not passed yet (an extraction deadline)."""
    t = parse_time(value, what)
    if t is not None and t <= datetime.now(UTC):
        fail(f"{what}: {value!r} is in the past (a message would be expired at once)")
    return t


def parse_day(value: str | None, what: str) -> datetime | None:
    """A date (``2026-03-01``, midnight UTC) or a date-time with a timezone."""
    if value is None:
        return None
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        try:
            return datetime.fromisoformat(value).replace(tzinfo=UTC)
        except ValueError:
            fail(f"{what}: {value!r} is not a date")
    return parse_time(value, what)


AS_OF_HELP = ("as it was at log position P (a whole number: 5000) or at DATE (2026-03-01: "
              "midnight UTC, or an ISO 8601 date-time with a timezone: the last event "
              "recorded then)")


def parse_as_of(value: str | None, what: str = "--as-of") -> int | datetime | None:
    """``--as-of``, the same on every command: a whole number is a log position, anything
    else must be a date (``2026-03-01``, midnight UTC) or an ISO 8601 date-time with a
    timezone, which the command turns into the position of the last event recorded then
    (``position_at``)."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return int(text)
    if re.fullmatch(r"[+-]?\d+", text):
        fail(f"{what}: {value!r} is not a log position (a whole number, 0 or more)")
    if not re.match(r"\d{4}-\d{2}-\d{2}", text):
        fail(f"{what}: {value!r} is neither a log position (a whole number: 5000) nor a date "
             f"(2026-03-01, or 2026-03-01T12:00:00+00:00)")
    return parse_day(text, what)


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)


def parse_size(value: str | None, what: str) -> int | None:
    """``1500``, ``10k``, ``2.5M``, ``1GiB`` (powers of 1024) as bytes."""
    if value is None:
        return None
    m = _SIZE.match(value)
    if not m:
        fail(f"{what}: {value!r} is not a size (e.g. 1500, 10k, 2.5M)")
    power = " KMGT".index((m.group(2) or " ").upper())
    return int(float(m.group(1)) * 1024**power)
