"""SEARCH's matching (RFC 3501 6.4.4): the messages of the selected mailbox that match a
``search.Query``. Flags, sizes, dates and UIDs are answered from the session's listing;
header and text keys read the message (its header fields and its leaves' text decoded)."""

from __future__ import annotations

import base64
import contextlib
import quopri
from collections.abc import Awaitable, Callable
from datetime import date
from email.header import decode_header, make_header
from email.utils import parsedate_to_datetime

from adapters.imap import mime
from adapters.imap.mailbox import Entry, Selected
from adapters.imap.search import Key, Query
from adapters.imap.wire import in_set

_CONTENT = {"BCC", "BODY", "CC", "FROM", "SUBJECT", "TEXT", "TO", "HEADER", "SENTBEFORE",
            "SENTON", "SENTSINCE"}


def _needs_message(keys: list[Key]) -> bool:
    for k in keys:
        if k.name in _CONTENT:
            return True
        if k.name in ("AND", "NOT", "OR") and _needs_message(k.args):
            return True
    return False


class Searcher:
    def __init__(self, sel: Selected,
                 message: Callable[[int], Awaitable[mime.Part]]) -> None:
        self.sel = sel
        self.message = message

    async def run(self, query: Query) -> list[int]:
        found = []
        content = _needs_message(query.keys)
        for seq, uid in enumerate(list(self.sel.uids), start=1):
            e = self.sel.entries.get(uid)
            if e is None:
                continue
            msg = None
            if content:
                try:
                    msg = await self.message(uid)
                except Exception:  # noqa: BLE001 - a message the user may not read matches no text
                    msg = None
            if all(self.match(k, seq, e, msg) for k in query.keys):
                found.append(uid)
        return found

    def match(self, k: Key, seq: int, e: Entry, msg: mime.Part | None) -> bool:
        n = k.name
        if n == "ALL":
            return True
        if n == "AND":
            return all(self.match(x, seq, e, msg) for x in k.args)
        if n == "NOT":
            return not self.match(k.args[0], seq, e, msg)
        if n == "OR":
            return self.match(k.args[0], seq, e, msg) or self.match(k.args[1], seq, e, msg)
        if n == "FLAG":
            flag, wanted = k.args
            has = any(f.lower() == flag.lower() for f in self.sel.flags_of(e))
            return has == _bool_arg(wanted)
        if n == "UID":
            return in_set(e.uid, k.args[0])
        if n == "SEQ":
            return in_set(seq, k.args[0])
        if n == "LARGER":
            return e.size > _int_arg(k.args[0])
        if n == "SMALLER":
            return e.size < _int_arg(k.args[0])
        if n == "MODSEQ":
            return e.modseq >= _int_arg(k.args[0])
        if n in ("BEFORE", "ON", "SINCE"):
            return _compare(n, e.internal_date.date(), k.args[0])
        if msg is None:
            return False
        if n in ("SENTBEFORE", "SENTON", "SENTSINCE"):
            sent = _sent(msg)
            return sent is not None and _compare(n[4:], sent, k.args[0])
        needle = k.args[-1].lower()
        if n == "HEADER":
            values = [v for name, v, _ in msg.fields if name == k.args[0].lower()]
            if not values:
                return False
            return any(needle in _decoded(v) for v in values)
        if n == "SUBJECT":
            return any(needle in _decoded(v) for name, v, _ in msg.fields
                       if name == "subject")
        if n in ("FROM", "TO", "CC", "BCC"):
            return any(needle in _decoded(v) or needle in _address_text(v)
                       for name, v, _ in msg.fields if name == n.lower())
        if n == "BODY":
            return needle in _text_of(msg)
        if n == "TEXT":
            return needle in _decoded(msg.header) or needle in _text_of(msg)
        return False


def _address_text(value: bytes) -> str:
    """An address header as names and ``mailbox@host``, comments and routes left out."""
    out = []
    for name, _adl, mailbox, host in mime.parse_addresses(value):
        if name:
            out.append(_decoded(name.encode("utf-8", "surrogateescape")))
        if mailbox is not None:
            out.append(f"{mailbox}@{host}" if host else mailbox)
    return " ".join(out).lower()


def _int_arg(value: object) -> int:
    """A number a key holds (LARGER, SMALLER, MODSEQ), as the parser made it."""
    if not isinstance(value, int):
        raise TypeError(f"a search key's number, not {value!r}")
    return value


def _bool_arg(value: object) -> bool:
    """Whether a FLAG key wants the flag set, as the parser made it."""
    if not isinstance(value, bool):
        raise TypeError(f"a FLAG key's wanted state, not {value!r}")
    return value


def _compare(how: str, day: date, wanted: date) -> bool:
    if how == "BEFORE":
        return day < wanted
    if how == "ON":
        return day == wanted
    return day >= wanted


def _sent(msg: mime.Part) -> date | None:
    value = msg.get("date")
    if not value:
        return None
    try:
        return parsedate_to_datetime(value.decode("latin-1")).date()
    except (ValueError, TypeError, IndexError):
        return None


def _decoded(value: bytes) -> str:
    text = value.decode("utf-8", "replace")
    with contextlib.suppress(ValueError, LookupError, UnicodeError):
        text = str(make_header(decode_header(text)))
    return " ".join(text.split()).lower()


def _text_of(msg: mime.Part) -> str:
    """The text of every leaf part, transfer-decoded and in its charset where it says."""
    out: list[str] = []

    def walk(p: mime.Part) -> None:
        if p.children:
            for c in p.children:
                walk(c)
            return
        if p.message is not None:
            out.append(_decoded(p.message.header))
            walk(p.message)
            return
        body = p.body
        enc = (p.get("content-transfer-encoding") or b"").strip().lower()
        try:
            if enc == b"base64":
                body = base64.b64decode(body, validate=False)
            elif enc == b"quoted-printable":
                body = quopri.decodestring(body)
        except ValueError:
            pass
        charset = dict(p.params).get("charset", "utf-8")
        try:
            out.append(body.decode(charset, "replace"))
        except LookupError:
            out.append(body.decode("utf-8", "replace"))

    walk(msg)
    return " ".join(" ".join(out).split()).lower()

