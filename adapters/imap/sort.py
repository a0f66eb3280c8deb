"""SORT (RFC 5256), its DISPLAYFROM / DISPLAYTO keys (RFC 5957) and the base subject that
SORT and THREAD compare."""

from __future__ import annotations

import contextlib
import re
from datetime import UTC, datetime
from email.header import decode_header, make_header
from email.utils import parsedate_to_datetime
from typing import Any

from adapters.imap import mime
from adapters.imap.mailbox import Entry

KEYS = ("ARRIVAL", "CC", "DATE", "FROM", "SIZE", "SUBJECT", "TO", "DISPLAYFROM", "DISPLAYTO")
_HEADER_KEYS = frozenset({"CC", "DATE", "FROM", "SUBJECT", "TO", "DISPLAYFROM", "DISPLAYTO"})


class SortError(ValueError):
    pass


def parse_criteria(words: list[str]) -> list[tuple[str, bool]]:
    """``(REVERSE FROM DATE)`` as [(key, reverse)]."""
    out: list[tuple[str, bool]] = []
    reverse = False
    for word in (w.upper() for w in words):
        if word == "REVERSE":
            if reverse:
                raise SortError("REVERSE twice")
            reverse = True
            continue
        if word not in KEYS:
            raise SortError(f"unknown sort key {word}")
        out.append((word, reverse))
        reverse = False
    if reverse or not out:
        raise SortError("a sort criterion is missing")
    return out


def needs_message(criteria: list[tuple[str, bool]]) -> bool:
    return any(key in _HEADER_KEYS for key, _ in criteria)


def decoded(value: bytes | str | None) -> str:
    """A header value with its encoded words decoded and its white space collapsed."""
    if value is None:
        return ""
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    with contextlib.suppress(ValueError, LookupError, UnicodeError):
        text = str(make_header(decode_header(text)))
    return " ".join(text.split())


_TRAILER = re.compile(r"(\s*\(fwd\)\s*|\s+)$", re.I)
_BLOB = r"\[[^\[\]]*\]\s*"
_REFWD = re.compile(rf"^(?:re|fwd?)\s*(?:{_BLOB})?:\s*", re.I)
_LEADING_BLOB = re.compile(rf"^{_BLOB}")


def base_subject(value: bytes | str | None) -> str:
    """RFC 5256 section 2.1: the subject without reply and forward markers, blobs and
    trailers, upper-cased for i;ascii-casemap comparison."""
    subject = decoded(value)
    while True:
        before = subject
        while True:  # (2) trailers
            stripped = _TRAILER.sub("", subject)
            if stripped == subject:
                break
            subject = stripped
        while True:  # (3) leaders: a reply/forward marker, or a blob before more subject
            m = _REFWD.match(subject)
            if m:
                subject = subject[m.end():]
                continue
            m = _LEADING_BLOB.match(subject)
            if m and subject[m.end():]:
                subject = subject[m.end():]
                continue
            break
        if subject == before:  # (5) [fwd: ...]
            if subject.lower().startswith("[fwd:") and subject.endswith("]"):
                subject = subject[5:-1].strip()
                continue
            return subject.upper()


def _first_address(msg: mime.Part, header: str) -> str:
    found = mime.parse_addresses(msg.get(header))
    return (found[0][2] or "").upper() if found else ""


def _display(msg: mime.Part, header: str) -> str:
    found = mime.parse_addresses(msg.get(header))
    if not found:
        return ""
    name, _adl, mailbox, host = found[0]
    if name:
        return decoded(name.encode("utf-8", "surrogateescape")).upper()
    return (f"{mailbox}@{host}" if host else mailbox or "").upper()


def _sent(msg: mime.Part, e: Entry) -> datetime:
    value = msg.get("date")
    if value:
        try:
            when = parsedate_to_datetime(value.decode("latin-1"))
            return when if when.tzinfo else when.replace(tzinfo=UTC)
        except (ValueError, TypeError, IndexError):
            pass
    return e.internal_date if e.internal_date.tzinfo else e.internal_date.replace(tzinfo=UTC)


def key_of(key: str, seq: int, e: Entry, msg: mime.Part | None) -> Any:
    if key == "ARRIVAL":
        when = e.internal_date if e.internal_date.tzinfo else e.internal_date.replace(
            tzinfo=UTC)
        return when.timestamp()
    if key == "SIZE":
        return e.size
    if msg is None:
        return ""
    if key == "DATE":
        return _sent(msg, e).timestamp()
    if key == "SUBJECT":
        return base_subject(msg.get("subject"))
    if key in ("FROM", "TO", "CC"):
        return _first_address(msg, key.lower())
    return _display(msg, key[7:].lower())  # DISPLAYFROM / DISPLAYTO


class _Reversed:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _Reversed) -> bool:
        return bool(other.value < self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reversed) and other.value == self.value

    __hash__ = None  # type: ignore[assignment]


def sort_key(criteria: list[tuple[str, bool]], seq: int, e: Entry,
             msg: mime.Part | None) -> tuple[Any, ...]:
    """The key to sort a message by: each criterion (reversed where asked), then its
    sequence number (RFC 5256: ties keep the mailbox's order)."""
    parts: list[Any] = []
    for key, reverse in criteria:
        value = key_of(key, seq, e, msg)
        parts.append(_Reversed(value) if reverse else value)
    return (*parts, seq)
