"""The fast reader: the stdlib parser's message tree for well-formed mail, or None."""

from __future__ import annotations

import math
import re
import time
from email.errors import MissingHeaderBodySeparatorDefect
from email.message import EmailMessage
from email.utils import unquote
from typing import Any, TypeVar, overload

from domain.rfc5322.headers import FAST_POLICY, SimpleMime
from domain.rfc5322.limits import MessageLimits
from domain.rfc5322.scan import HEADER_LINE, NEWLINE, header_lines_end

_T = TypeVar("_T")


# --- the fast reader ------------------------------------------------------------------------
#
# Reading a typical message with the stdlib parser and policy.default's header classes costs
# milliseconds, nearly all of it in machinery whose result the facts do not need (payloads,
# parse trees of plain values). The reader below builds the same message tree as the
# feedparser for well-formed input and gives up (None) on anything the parser would treat
# specially; the header factory decodes plain values directly and remembers what it made.
# Both are checked against `inspect_message_reference` (tests/unit/test_rfc5322.py: the
# corpus, generated mail, random structures and header values).


class _Unusual(Exception):
    """Something only the stdlib parser can say exactly what to make of."""


_MAX_FAST_LEVEL = 64
"""Nesting the fast reader follows; deeper messages are left to the parser and its limits."""


def read_fast(raw: bytes, limits: MessageLimits, header_lines: int,
              deadline: float = math.inf) -> EmailMessage | None:
    """The message tree the stdlib parser builds for ``raw``, or None if unsure.

    Mirrors ``email.feedparser`` for well-formed input: headers stored as its
    ``_parse_headers`` stores them, multipart bodies split at boundary lines (a line that
    is any open boundary ends a part), message/* holding one message. Payloads are not
    kept (the facts never read them). Whatever the parser would record a defect for or
    treat specially (no boundary, repeated or missing boundary lines, multipart/digest,
    message/delivery-status, misplaced From lines, ...) returns None, and so does a
    message with more parts or deeper nesting than ``limits`` allow. ``header_lines`` is
    where the header lines of the message end (`_header_block`).
    """
    try:
        return _Reader(raw, limits, header_lines, deadline).entity(0, (), 0)[0]
    except (_Unusual, RecursionError):
        return None
    except Exception:  # a header the stdlib chokes on: the parser decides what that means
        return None


class ReadMessage(EmailMessage):
    """A message made with its raw header fields (stored as the feedparser stores them),
    which finds the first header of a name in a dict and fetches it from the policy once."""

    def __init__(self, fields: list[tuple[str, str]]) -> None:
        super().__init__(FAST_POLICY)
        self._headers = fields  # what set_raw appends to, field by field
        self.first = {name.lower(): (name, value) for name, value in reversed(fields)}
        self._fetched: dict[str, Any] = {}
        self._media: str | None = None

    def set_raw(self, name: str, value: Any) -> None:
        super().set_raw(name, value)
        self.first.setdefault(name.lower(), (name, value))
        self._fetched.pop(name.lower(), None)
        self._media = None

    def get_content_type(self) -> str:
        if self._media is None:
            self._media = super().get_content_type()
        return self._media

    def get_boundary(self, failobj: Any = None) -> Any:
        """``Message.get_boundary``; from the parameters of a `SimpleMime` Content-Type.

        Its text is ``type; name="value"; ...`` (names unique, values without quotes or
        backslashes), which ``get_param`` reads back as the value itself.
        """
        header = self.get("content-type")
        if not isinstance(header, SimpleMime):
            return super().get_boundary(failobj)
        for name, value in header.parameters:
            if name.lower() == "boundary":
                return unquote(value).rstrip()  # as collapse_rfc2231_value unquotes it
        return failobj

    @overload
    def get(self, name: str, failobj: None = None) -> Any | None: ...
    @overload
    def get(self, name: str, failobj: _T) -> Any | _T: ...
    def get(self, name: str, failobj: object = None) -> object:
        key = name.lower()
        header = self._fetched.get(key)
        if header is None:
            first = self.first.get(key)
            if first is None:
                return failobj
            header = self._fetched[key] = self.policy.header_fetch_parse(*first)
        return header


class _Reader:
    def __init__(self, raw: bytes, limits: MessageLimits, header_lines: int,
                 deadline: float) -> None:
        self.deadline = deadline  # time.monotonic() after which the parser takes over
        self.raw = raw
        self.top_header_end = header_lines
        self.parts_left = limits.max_parts
        self.max_level = min(limits.max_depth, _MAX_FAST_LEVEL)

    def entity(self, pos: int, bounds: tuple[bytes, ...], level: int) -> tuple[ReadMessage, int]:
        """The entity at ``pos``, and where its body ends: at a line of ``bounds`` or EOF."""
        self.parts_left -= 1
        if level > self.max_level or self.parts_left < 0 or time.monotonic() > self.deadline:
            raise _Unusual
        message, pos = self.headers(pos, bounds) or self.header_lines(pos, bounds)
        media = message.get_content_type()
        if media in ("message/delivery-status", "multipart/digest"):
            raise _Unusual
        maintype = media.split("/")[0]
        if maintype == "message":
            inner, end = self.entity(pos, bounds, level + 1)
            message.attach(inner)
            return message, end
        if maintype == "multipart":
            return message, self.multipart(message, pos, bounds, level)
        return message, self.next_bound(pos, bounds)

    def headers(self, pos: int, bounds: tuple[bytes, ...]) -> tuple[ReadMessage, int] | None:
        """The entity with its header fields at ``pos``, and where its body starts.

        None if a line needs `header_lines`: a From line, a continuation line first, a
        field without a name, or a line starting with ``--`` (it may be a boundary).
        """
        raw = self.raw
        end = self.top_header_end if pos == 0 else header_lines_end(raw, pos)
        fields = _fields(raw[pos:end].decode("ascii", "surrogateescape"))
        if fields is None:
            return None
        missing_separator = False
        if end == len(raw):
            body = end
        elif raw[end] in b"\r\n":
            body = self.line_end(end)  # after the blank line
        elif self.is_bound(end, bounds):
            body = end  # the parser's false EOF: a part with headers only
        else:
            body, missing_separator = end, True
        message = ReadMessage(fields)
        if missing_separator:
            message.defects.append(MissingHeaderBodySeparatorDefect())
        return message, body

    def header_lines(self, pos: int, bounds: tuple[bytes, ...]) -> tuple[ReadMessage, int]:
        """`headers` line by line, as the feedparser reads them."""
        raw = self.raw
        missing_separator = False
        lines: list[bytes] = []
        while pos < len(raw):
            end = self.line_end(pos)
            if self.is_bound(pos, bounds):
                break  # the parser's false EOF: a part with headers only
            if not HEADER_LINE.match(raw, pos):
                if raw[pos] in b"\r\n":
                    pos = end
                else:
                    missing_separator = True
                break
            lines.append(raw[pos:end])
            pos = end
        unixfrom, fields = _header_fields(lines)
        message = ReadMessage(fields)
        if unixfrom is not None:
            message.set_unixfrom(unixfrom)
        if missing_separator:
            message.defects.append(MissingHeaderBodySeparatorDefect())
        return message, pos

    def multipart(
        self, message: ReadMessage, pos: int, bounds: tuple[bytes, ...], level: int
    ) -> int:
        """Reads the parts of ``message``; where its epilogue ends."""
        boundary = message.get_boundary()
        if not boundary or not boundary.isascii():
            raise _Unusual
        encoding = str(message.get("content-transfer-encoding", "8bit")).lower()
        if encoding not in ("7bit", "8bit", "binary"):
            raise _Unusual
        mark = boundary.encode("ascii")
        inner = (*bounds, mark)
        pos = self.next_bound(pos, inner)
        while True:
            if pos == len(self.raw) or self.is_bound(pos, bounds):
                raise _Unusual  # StartBoundaryNotFound or CloseBoundaryNotFound
            end = self.line_end(pos)
            if _bound_mark(self.raw[pos:end]) != mark:  # the close delimiter
                break
            pos = end
            if pos == len(self.raw) or self.is_bound(pos, inner):
                raise _Unusual  # repeated boundary lines, or an empty last part
            part, pos = self.entity(pos, inner, level + 1)
            message.attach(part)
        if not message.is_multipart():
            raise _Unusual  # the close delimiter before the first part
        return self.next_bound(end, bounds)

    def line_end(self, pos: int) -> int:
        newline = NEWLINE.search(self.raw, pos)
        return newline.end() if newline else len(self.raw)

    def is_bound(self, pos: int, bounds: tuple[bytes, ...]) -> bool:
        """Whether the line at ``pos`` is a delimiter or close delimiter of ``bounds``."""
        if not bounds or not self.raw.startswith(b"--", pos):
            return False
        mark = _bound_mark(self.raw[pos : self.line_end(pos)])
        return mark in bounds or (mark[-2:] == b"--" and mark[:-2] in bounds)

    def next_bound(self, pos: int, bounds: tuple[bytes, ...]) -> int:
        """Where the next line that is one of ``bounds`` starts; the length if none.

        Such a line starts with ``--`` and one of the boundaries: searching for each of
        them skips through a body much faster than looking at every ``--``.
        """
        raw = self.raw
        first = len(raw)
        for bound in bounds:
            start = pos
            while (found := raw.find(b"--" + bound, start, first)) >= 0:
                if (found == 0 or raw[found - 1] in b"\r\n") and self.is_bound(found, bounds):
                    first = found
                    break
                start = found + 1
        return first


_FIELD = re.compile(
    r"([\041-\071\073-\176]+):[ \t]*([^\r\n]*(?:(?:\r\n|\r|\n)[ \t][^\r\n]*)*)(?:\r\n|\r|\n)?"
)
"""A header field and its continuation lines: its name, and its value as
``policy.header_source_parse`` takes it (leading blanks and the last line break off)."""
_FIELDS = re.compile(
    r"(?:[\041-\071\073-\176]+:[^\r\n]*(?:\r\n|\r|\n|\Z)(?:[ \t][^\r\n]*(?:\r\n|\r|\n|\Z))*)*"
)
"""Header lines that are all fields with a name: first lines and continuation lines."""


def _fields(lines: str) -> list[tuple[str, str]] | None:
    """Header lines (headerRE's) as ``policy.header_source_parse`` makes fields of them:
    (name, value) with the value's leading blanks and last line break off.

    None if one needs `_header_fields`: a From line, a line starting with a colon or with
    ``--`` (it may be a boundary), or a continuation line first.
    """
    if "\r" not in lines:
        eol = "\n"
    elif lines.count("\r\n") == lines.count("\r") == lines.count("\n"):
        eol = "\r\n"
    else:  # mixed line breaks
        dashes = lines.startswith("--") or "\n--" in lines or "\r--" in lines
        return _FIELD.findall(lines) if _FIELDS.fullmatch(lines) and not dashes else None
    fields: list[tuple[str, str]] = []
    for line in lines.split(eol):
        if line[:1] in (" ", "\t"):
            if not fields:
                return None
            name, value = fields[-1]
            fields[-1] = (name, value + eol + line)
        elif line.startswith(("From ", ":", "--")):
            return None
        elif line:  # not the end of the last line
            name, _, value = line.partition(":")
            fields.append((name, value.lstrip(" \t")))
    return fields


def _bound_mark(line: bytes) -> bytes:
    """What a ``--`` line says after its dashes, as the feedparser's boundary regex reads it."""
    return line[2:].rstrip(b"\r\n").rstrip(b" \t")


def _header_fields(lines: list[bytes]) -> tuple[str | None, list[tuple[str, str]]]:
    """``FeedParser._parse_headers`` for header blocks without defects: the From line at
    the start, and the fields as ``policy.header_source_parse`` splits them."""
    unixfrom = None
    fields: list[tuple[str, str]] = []
    field: list[bytes] = []
    for number, line in enumerate(lines):
        if line[:1] in (b" ", b"\t"):
            if not field:
                raise _Unusual  # FirstHeaderLineIsContinuationDefect
            field.append(line)
            continue
        if field:
            fields.append(_source_field(field))
            field = []
        if line.startswith(b"From "):
            if number:
                raise _Unusual  # MisplacedEnvelopeHeaderDefect, or the body's first line
            unixfrom = _decode(line.rstrip(b"\r\n"))
            continue
        if line[:1] == b":":
            raise _Unusual  # InvalidHeaderDefect: Missing header name
        field = [line]
    if field:
        fields.append(_source_field(field))
    return unixfrom, fields


def _source_field(lines: list[bytes]) -> tuple[str, str]:
    """One field from its lines, as ``policy.header_source_parse`` splits it."""
    name, _, value = lines[0].partition(b":")
    value = value.lstrip(b" \t") + b"".join(lines[1:])
    return _decode(name), _decode(value.rstrip(b"\r\n"))


def _decode(data: bytes) -> str:
    return data.decode("ascii", "surrogateescape")
