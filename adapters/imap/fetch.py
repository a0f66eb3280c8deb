"""FETCH: the items a client asks for (RFC 3501 section 6.4.5, CONDSTORE's MODSEQ) and one
message's answer line."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from adapters.imap import mime
from adapters.imap.wire import Atom, BadCommand, No, Token, imap_date, literal

if TYPE_CHECKING:
    from adapters.imap.mailbox import Entry, Selected


class FetchingSession(Protocol):
    """What rendering a FETCH asks of the session (``adapters.imap.session``'s ``Session``)."""

    condstore: bool

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...

    def message(self, uid: int) -> mime.Part: ...

    async def set_seen(self, sel: Selected, e: Entry) -> bool: ...

_MACROS = {"ALL": ["FLAGS", "INTERNALDATE", "RFC822.SIZE", "ENVELOPE"],
           "FAST": ["FLAGS", "INTERNALDATE", "RFC822.SIZE"],
           "FULL": ["FLAGS", "INTERNALDATE", "RFC822.SIZE", "ENVELOPE", "BODY"]}
_SIMPLE = {"FLAGS", "UID", "INTERNALDATE", "RFC822.SIZE", "ENVELOPE", "BODYSTRUCTURE", "BODY",
           "RFC822", "RFC822.HEADER", "RFC822.TEXT", "MODSEQ"}
_BODY = re.compile(r"^(BODY|BODY\.PEEK|BINARY|BINARY\.PEEK|BINARY\.SIZE)\[(.*)\]"
                   r"(?:<(\d+)(?:\.(\d+))?>)?$", re.I | re.S)


@dataclass
class Item:
    name: str                 # FLAGS, UID, ..., or BODY for a section
    section: str | None = None
    peek: bool = False
    start: int | None = None
    length: int | None = None


@dataclass
class FetchItems:
    items: list[Item] = field(default_factory=list)
    modseq: bool = False

    @classmethod
    def parse(cls, spec: Token, by_uid: bool) -> FetchItems:
        words = spec if isinstance(spec, list) else [spec]
        if not words:
            raise BadCommand("FETCH needs items")
        out = cls()
        for word in words:
            if not isinstance(word, Atom):
                raise BadCommand("invalid FETCH item")
            upper = word.upper()
            if upper in _MACROS and not isinstance(spec, list):
                out.items += [Item(n) for n in _MACROS[upper]]
                continue
            if upper in _SIMPLE:
                out.items.append(Item(upper))
                out.modseq |= upper == "MODSEQ"
                continue
            m = _BODY.match(word.value)
            if not m:
                raise BadCommand(f"unknown FETCH item {word.value}")
            kind = m.group(1).upper()
            if kind.startswith("BINARY"):
                if not re.match(r"^(\d+(\.\d+)*)?$", m.group(2)):
                    raise BadCommand(f"BINARY takes part numbers: {word.value}")
                if kind == "BINARY.SIZE" and m.group(3) is not None:
                    raise BadCommand("BINARY.SIZE takes no partial")
                out.items.append(Item(kind if kind == "BINARY.SIZE" else "BINARY", m.group(2),
                                      kind == "BINARY.PEEK",
                                      int(m.group(3)) if m.group(3) is not None else None,
                                      int(m.group(4)) if m.group(4) is not None else None))
                continue
            start = int(m.group(3)) if m.group(3) is not None else None
            length = int(m.group(4)) if m.group(4) is not None else None
            if m.group(3) is not None and m.group(4) is None:
                raise BadCommand("a partial fetch needs <start.length>")
            section = m.group(2)
            if not _valid_section(section):
                raise BadCommand(f"invalid section {section!r}")
            out.items.append(Item("BODY", section, m.group(1).upper() == "BODY.PEEK", start,
                                  length))
        if by_uid and not any(i.name == "UID" for i in out.items):
            out.items.insert(0, Item("UID"))
        return out

    async def render(self, session: FetchingSession, sel: Selected, seq: int, e: Entry) -> bytes:
        parts: list[bytes] = []
        need_body = any(i.name in ("ENVELOPE", "BODYSTRUCTURE", "BODY", "RFC822",
                                   "RFC822.HEADER", "RFC822.TEXT", "BINARY", "BINARY.SIZE")
                        for i in self.items)
        msg: mime.Part | None = None
        if need_body:
            msg = await session.call(session.message, e.uid)
        seen = False
        for item in self.items:
            n = item.name
            if n == "FLAGS":
                continue  # after the body items: a fetch of a body may set \Seen
            if n == "UID":
                parts.append(b"UID %d" % e.uid)
            elif n == "INTERNALDATE":
                parts.append(b'INTERNALDATE "' + imap_date(e.internal_date).encode() + b'"')
            elif n == "RFC822.SIZE":
                parts.append(b"RFC822.SIZE %d" % e.size)
            elif n == "MODSEQ":
                pass
            elif n == "ENVELOPE":
                parts.append(b"ENVELOPE " + mime.envelope(msg))  # type: ignore[arg-type]
            elif n == "BODYSTRUCTURE":
                parts.append(b"BODYSTRUCTURE " + mime.bodystructure(msg))  # type: ignore[arg-type]
            elif n == "BODY" and item.section is None:
                parts.append(b"BODY " + mime.bodystructure(msg, extended=False))  # type: ignore[arg-type]
            elif n == "RFC822":
                parts.append(b"RFC822 " + literal(msg.raw))  # type: ignore[union-attr]
                seen = True
            elif n == "RFC822.HEADER":
                parts.append(b"RFC822.HEADER " + literal(msg.header))  # type: ignore[union-attr]
            elif n == "RFC822.TEXT":
                parts.append(b"RFC822.TEXT " + literal(msg.body))  # type: ignore[union-attr]
                seen = True
            elif n in ("BINARY", "BINARY.SIZE"):
                assert msg is not None and item.section is not None
                data = _binary(msg, item.section)
                if n == "BINARY.SIZE":
                    parts.append(f"BINARY.SIZE[{item.section}] {len(data or b'')}".encode())
                    continue
                label = f"BINARY[{item.section}]"
                if item.start is not None:
                    label += f"<{item.start}>"
                    if data is not None:
                        data = data[item.start:item.start + (item.length or 0)]
                value = b"NIL" if data is None else (
                    b"~" + literal(data) if b"\0" in data else literal(data))
                parts.append(label.encode() + b" " + value)
                seen |= not item.peek
            else:
                assert msg is not None and item.section is not None
                data = mime.section(msg, item.section)
                label = f"BODY[{item.section}]"
                if item.start is not None:
                    label += f"<{item.start}>"
                    if data is not None:
                        data = data[item.start:item.start + (item.length or 0)]
                parts.append(label.encode() + b" " + (literal(data) if data is not None
                                                       else b"NIL"))
                seen |= not item.peek
        if seen and await session.set_seen(sel, e) and not any(
                i.name == "FLAGS" for i in self.items):
            parts.append(_flags(sel, e))
        if any(i.name == "FLAGS" for i in self.items):
            parts.insert(0, _flags(sel, e))
        if self.modseq or session.condstore:
            parts.append(b"MODSEQ (%d)" % e.modseq)
        return b"* %d FETCH (" % seq + b" ".join(parts) + b")\r\n"


def _binary(msg: mime.Part, section: str) -> bytes | None:
    try:
        return mime.binary_section(msg, section)
    except mime.UnknownEncoding as e:
        raise No(str(e), "UNKNOWN-CTE") from None


def _flags(sel: Selected, e: Entry) -> bytes:
    return b"FLAGS (" + " ".join(sel.flags_of(e)).encode() + b")"


_SECTION_OK = re.compile(r"^((\d+\.)*\d+(\.(HEADER|TEXT|MIME|HEADER\.FIELDS(\.NOT)?\s*\(.*\)))?|"
                         r"HEADER|TEXT|HEADER\.FIELDS(\.NOT)?\s*\(.*\))?$", re.I | re.S)


def _valid_section(section: str) -> bool:
    return bool(_SECTION_OK.match(section)) and not re.search(r"(^|\.)0(\.|$)", section)

