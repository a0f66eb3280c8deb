"""A message's parts as ranges of offsets into its stored bytes: the header's fields, the
content type and its parameters, a multipart's children found by their boundary."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_BLANK = re.compile(rb"\r?\n\r?\n")
_FIELD_START = re.compile(rb"^[^\s:]+:", re.M)
_MAX_DEPTH = 32


@dataclass
class Part:
    raw: bytes
    start: int       # the header's first byte
    body_start: int  # the body's first byte (after the blank line)
    end: int         # one past the body's last byte
    fields: list[tuple[str, bytes, bytes]] = field(default_factory=list)  # name, value, raw
    maintype: str = "text"
    subtype: str = "plain"
    params: list[tuple[str, str]] = field(default_factory=list)
    children: list[Part] = field(default_factory=list)
    message: Part | None = None  # the message inside a message/rfc822 part

    @property
    def header(self) -> bytes:
        return self.raw[self.start:self.body_start]

    @property
    def body(self) -> bytes:
        return self.raw[self.body_start:self.end]

    def get(self, name: str) -> bytes | None:
        name = name.lower()
        for n, value, _ in self.fields:
            if n == name:
                return value
        return None


def parse(raw: bytes) -> Part:
    return _part(raw, 0, len(raw), "text/plain", 0)


def _part(raw: bytes, start: int, end: int, default: str, depth: int) -> Part:
    body_start = _header_end(raw, start, end)
    part = Part(raw, start, body_start, end, fields=_fields(raw[start:body_start]))
    ctype = part.get("content-type")
    maintype, subtype, params = _content_type(ctype.decode("latin-1") if ctype else default)
    if ctype is None or not maintype:
        maintype, subtype, params = _content_type(default)
        if ctype is None and default == "text/plain":
            params = [("charset", "us-ascii")]
    part.maintype, part.subtype, part.params = maintype, subtype, params
    if depth >= _MAX_DEPTH:
        return part
    if maintype == "multipart":
        boundary = dict(params).get("boundary")
        if boundary:
            inner = "message/rfc822" if subtype == "digest" else "text/plain"
            part.children = [_part(raw, s, e, inner, depth + 1)
                             for s, e in _split(raw, body_start, end, boundary.encode(
                                 "latin-1", "replace"))]
        if not part.children:  # no boundary, or none found: one empty text part
            part.children = [Part(raw, end, end, end, params=[("charset", "us-ascii")])]
    elif maintype == "message" and subtype == "rfc822":
        part.message = _part(raw, body_start, end, "text/plain", depth + 1)
    return part


def _header_end(raw: bytes, start: int, end: int) -> int:
    """Where the body starts: after the first empty line (CRLF or bare LF), else nothing
    is body. A part that starts with its blank line has an empty header."""
    if raw.startswith(b"\r\n", start) and start + 2 <= end:
        return start + 2
    if raw.startswith(b"\n", start) and start + 1 <= end:
        return start + 1
    m = _BLANK.search(raw, start, end)
    return m.end() if m else end


def _fields(header: bytes) -> list[tuple[str, bytes, bytes]]:
    if header.endswith(b"\r\n\r\n"):  # the blank line that ends the header is no field's
        header = header[:-2]
    elif header.endswith(b"\n\n"):
        header = header[:-1]
    out: list[tuple[str, bytes, bytes]] = []
    starts = [m.start() for m in _FIELD_START.finditer(header)]
    for i, s in enumerate(starts):
        e = starts[i + 1] if i + 1 < len(starts) else len(header)
        chunk = header[s:e]
        if chunk.rstrip(b"\r\n") == b"" or header[s:s + 1] in (b" ", b"\t"):
            continue
        name, _, value = chunk.partition(b":")
        unfolded = re.sub(rb"\r?\n(?=[ \t])", b"", value).strip(b" \t\r\n")
        out.append((name.decode("latin-1").strip().lower(), unfolded, chunk))
    return out


_TOKEN = r"[^\s()<>@,;:\\\"/\[\]?=]+"


def _content_type(value: str) -> tuple[str, str, list[tuple[str, str]]]:
    value = _uncomment(value)
    m = re.match(rf"\s*({_TOKEN})\s*/\s*({_TOKEN})", value)
    if not m:
        return "", "", []
    return m.group(1).lower(), m.group(2).lower(), _params(value[m.end():])


def _params(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for m in re.finditer(rf';\s*({_TOKEN})\s*=\s*("(?:[^"\\]|\\.)*"|[^;\s]*)', text, re.S):
        value = m.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1], flags=re.S)
            value = re.sub(r"\r?\n(?=[ \t])", "", value)
        out.append((m.group(1).lower(), value))
    return out


def _uncomment(value: str) -> str:
    out, depth, quoted, i = [], 0, False, 0
    while i < len(value):
        c = value[i]
        if c == "\\" and (quoted or depth):
            if not depth:
                out.append(value[i:i + 2])
            i += 2
            continue
        if c == '"' and not depth:
            quoted = not quoted
        elif c == "(" and not quoted:
            depth += 1
        elif c == ")" and depth and not quoted:
            depth -= 1
            i += 1
            continue
        if not depth:
            out.append(c)
        i += 1
    return "".join(out)


def _split(raw: bytes, start: int, end: int, boundary: bytes) -> list[tuple[int, int]]:
    """The (start, end) of each body part between ``--boundary`` lines: a part ends before
    the line break that precedes the next delimiter line; the close delimiter
    (``--boundary--``) ends the last one."""
    delim = re.compile(rb"(?:^|(?<=\n))--" + re.escape(boundary) + rb"(--)?[ \t]*(?:\r?\n|$)",
                       re.M)
    parts: list[tuple[int, int]] = []
    current: int | None = None
    for m in delim.finditer(raw, start, end):
        if current is not None:
            stop = m.start()
            if stop > current and raw[stop - 1:stop] == b"\n":
                stop -= 2 if raw[stop - 2:stop] == b"\r\n" and stop - 2 >= current else 1
            parts.append((current, max(stop, current)))
        if m.group(1):
            return parts
        current = m.end()
    if current is not None:
        parts.append((current, end))
    return parts


