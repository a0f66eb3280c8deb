"""Header text made safe to record: unfolded, decoded, one line, valid UTF-8."""

from __future__ import annotations

import contextlib
import re
from datetime import UTC, datetime
from email.header import decode_header, make_header


def as_utc(when: object) -> datetime | None:
    try:
        if not isinstance(when, datetime):
            return None
        return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    except (ValueError, TypeError, OverflowError, IndexError):
        return None



def unfold(value: str) -> str:
    if "\n" not in value and "\r" not in value:
        return value
    return _UNFOLD.sub("", value)


_UNFOLD = re.compile(r"\r\n|\r|\n")


def decode_raw(value: str) -> str:
    text = unfold(value)
    with contextlib.suppress(Exception):  # undecodable encoded words: keep the raw text
        text = str(make_header(decode_header(text)))
    return clean_text(text)


_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]+")


def clean_text(text: str) -> str:
    """JSON-safe single-line text: raw 8-bit bytes decoded as UTF-8, controls become spaces."""
    if text.isascii():
        if text.isprintable():  # no control characters
            return text.strip()
    else:
        text = repair_surrogates(text)
    return _CONTROL_CHARS.sub(" ", text).strip()


def repair_surrogates(text: str) -> str:
    """Raw bytes the parser smuggled in as surrogates, decoded as UTF-8 (U+FFFD if not)."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
