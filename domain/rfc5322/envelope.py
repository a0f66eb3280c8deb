"""The envelope: decoded Subject, From, To, Cc, Bcc, Date and message ids."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from email.message import Message
from email.policy import Policy
from email.utils import getaddresses, parsedate_to_datetime
from typing import Any

from domain.rfc5322.defects import Defects
from domain.rfc5322.headers import Simple, SimpleAddresses, SimpleDate
from domain.rfc5322.limits import KiB
from domain.rfc5322.reader import ReadMessage
from domain.rfc5322.text import as_utc, clean_text, decode_raw, unfold

ENVELOPE_FIELD_LIMIT = 16 * KiB
"""An envelope header longer than this is decoded from its first folded lines only."""


@dataclass(frozen=True)
class Envelope:
    """Decoded envelope headers: "" or () when absent; addresses as ``Name <addr>``."""

    subject: str
    from_: str
    to: tuple[str, ...]
    cc: tuple[str, ...]
    bcc: tuple[str, ...]
    date: str | None
    sent_at: datetime | None
    message_id: str | None
    in_reply_to: str | None
    references: tuple[str, ...]


def read_envelope(message: Message, defects: Defects) -> Envelope:
    raw = _first_raw_values(message)
    headers = _Headers(raw, message.policy, defects)
    date = raw.get("date")
    return Envelope(
        subject=headers.text("subject"),
        from_=headers.text("from"),
        to=headers.addresses("to"),
        cc=headers.addresses("cc"),
        bcc=headers.addresses("bcc"),
        date=clean_text(unfold(date)) if date is not None else None,
        sent_at=headers.sent_at(),
        message_id=next(iter(message_ids(raw.get("message-id"))), None),
        in_reply_to=next(iter(message_ids(raw.get("in-reply-to"))), None),
        references=message_ids(raw.get("references")),
    )


def _first_raw_values(message: Message) -> dict[str, str]:
    if isinstance(message, ReadMessage):
        return {name: value for name, (_, value) in message.first.items()}
    values: dict[str, str] = {}
    for name, value in message.raw_items():
        values.setdefault(name.lower(), str(value))
    return values


class _Headers:
    """Envelope headers decoded by ``policy.default``, or from the raw value if that fails."""

    def __init__(self, raw: dict[str, str], parsing: Policy, defects: Defects) -> None:
        self._raw = raw
        self._policy = parsing
        self._defects = defects

    def text(self, name: str) -> str:
        if name not in self._raw:
            return ""
        header = self._parsed(name)
        if header is not None:
            return clean_text(str(header))
        return decode_raw(self._raw.get(name, ""))

    def addresses(self, name: str) -> tuple[str, ...]:
        if name not in self._raw:
            return ()
        header = self._parsed(name)
        try:
            if header is not None:
                return tuple(clean_text(str(a)) for a in header.addresses)
        except Exception as error:
            self._failed(name, error)
        pairs = getaddresses([decode_raw(self._raw.get(name, ""))])
        return tuple(f"{n} <{a}>" if n and a else n or a for n, a in pairs if n or a)

    def sent_at(self) -> datetime | None:
        header = self._parsed("date")
        when = getattr(header, "datetime", None)
        try:
            if when is None and "date" in self._raw:
                when = parsedate_to_datetime(unfold(self._raw["date"]))
        except (ValueError, TypeError, OverflowError, IndexError):
            return None
        return as_utc(when)

    def _parsed(self, name: str) -> Any:
        value = self._raw.get(name)
        if value is None:
            return None
        if len(value) > ENVELOPE_FIELD_LIMIT:
            cut = value.rfind("\n", 0, ENVELOPE_FIELD_LIMIT)
            value = value[: cut if cut > 0 else ENVELOPE_FIELD_LIMIT]
            self._defects.add("HeaderTruncated", name)
        try:
            header: Any = self._policy.header_fetch_parse(name, utf8_header(value))
        except Exception as error:
            self._failed(name, error)
            return None
        self._defects.add_all(header.defects, header=name)
        return header

    def _failed(self, name: str, error: Exception) -> None:
        self._defects.add("HeaderDecodeFailure", name, error)



_ENVELOPE_FIELDS = ("subject", "from", "to", "cc", "bcc", "date")


def envelope_fast(message: ReadMessage, defects: Defects) -> Envelope:
    """`envelope` of a message whose envelope headers `simple_header` reads without
    defects (the policy still makes each header object); any other by `envelope`."""
    first = message.first
    fetch = message.policy.header_fetch_parse
    found: dict[str, Any] = {}
    for name in _ENVELOPE_FIELDS:
        field = first.get(name)
        if field is None:
            continue
        if len(field[1]) > ENVELOPE_FIELD_LIMIT:
            return read_envelope(message, defects)
        try:
            header = fetch(name, utf8_header(field[1]))
        except Exception:
            return read_envelope(message, defects)
        if not isinstance(header, Simple) or header.defects:
            return read_envelope(message, defects)
        found[name] = header
    addresses: dict[str, tuple[str, ...]] = {}
    for name in ("to", "cc", "bcc"):
        listed = found.get(name)
        if listed is not None:
            if not isinstance(listed, SimpleAddresses):
                return read_envelope(message, defects)
            addresses[name] = listed.clean_addresses
    sent = found.get("date")
    if sent is not None and not (isinstance(sent, SimpleDate) and sent.datetime is not None):
        return read_envelope(message, defects)
    date = first.get("date")
    return Envelope(
        subject=found["subject"].clean if "subject" in found else "",
        from_=found["from"].clean if "from" in found else "",
        to=addresses.get("to", ()),
        cc=addresses.get("cc", ()),
        bcc=addresses.get("bcc", ()),
        date=clean_text(unfold(date[1])) if date is not None else None,
        sent_at=sent.utc if sent is not None else None,
        message_id=_first_id(first.get("message-id")),
        in_reply_to=_first_id(first.get("in-reply-to")),
        references=message_ids(first["references"][1]) if "references" in first else (),
    )


def _first_id(field: tuple[str, str] | None) -> str | None:
    return next(iter(message_ids(field[1])), None) if field is not None else None


def utf8_header(value: str) -> str:
    """Raw 8-bit header bytes that are valid UTF-8 (RFC 6532) as text; others unchanged."""
    if value.isascii():
        return value
    try:
        return value.encode("ascii", "surrogateescape").decode("utf-8")
    except UnicodeError:
        return value



_MESSAGE_ID = re.compile(r"<([^<>]*)>")
_SIMPLE_ID = re.compile(r"[ \t]*<([!-;=?-~]+)>[ \t]*")  # what the general case makes "<id>"


def message_ids(value: str | None) -> tuple[str, ...]:
    """Message ids in order, each as ``<id>``, without duplicates.

    Without any ``<...>``, whitespace-separated tokens containing ``@`` are taken as ids.
    """
    if value is None:
        return ()
    simple = _SIMPLE_ID.fullmatch(value)
    if simple:
        return (f"<{simple[1]}>",)
    text = clean_text(unfold(value))
    found = [m for m in _MESSAGE_ID.findall(text) if m.strip()]
    found = found or [token for token in text.split() if "@" in token]
    ids = ("<" + "".join(m.split()).strip("<>") + ">" for m in found)
    return tuple(dict.fromkeys(i for i in ids if i != "<>"))


def content_type_of(message: Message, defects: Defects) -> str:
    try:
        return message.get_content_type()
    except Exception as error:
        defects.add("HeaderDecodeFailure", "content-type", error)
        return "text/plain"
