"""A message's MIME structure read from its stored bytes, for FETCH: ENVELOPE,
BODYSTRUCTURE / BODY and BODY[section] (RFC 3501 sections 6.4.5 and 7.4.2).

Every part is a range of offsets into the stored bytes (its header, its body), so a
section is a slice of the message exactly as it was delivered: nothing is re-serialised.
Header fields are read as bytes; their values are given to the client as they are (an
encoded-word stays encoded, as IMAP wants it).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from adapters.imap.wire import nstring, plist

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


# -- BODYSTRUCTURE ---------------------------------------------------------------------------
def _param_list(params: list[tuple[str, str]]) -> bytes:
    if not params:
        return b"NIL"
    return plist([nstring(k) + b" " + nstring(v) for k, v in params])


def _lines(body: bytes) -> int:
    return body.count(b"\n") + (1 if body and not body.endswith(b"\n") else 0)


def bodystructure(part: Part, extended: bool = True,
                  measure: Callable[[Part], tuple[int, int]] | None = None) -> bytes:
    """``measure``: each part's size and lines in another form of the message than its
    bytes (URLFETCH's BODYPARTSTRUCTURE of BINARY data: ``binary_measure``)."""
    if part.maintype == "multipart":
        out = b"".join(bodystructure(c, extended, measure) for c in part.children)
        out += b" " + nstring(part.subtype.upper())
        if extended:
            out += b" " + _param_list(part.params) + b" " + _extension(part)
        return b"(" + out + b")"
    enc = part.get("content-transfer-encoding")
    fields = [nstring(part.maintype.upper()), nstring(part.subtype.upper()),
              _param_list(part.params), nstring(part.get("content-id")),
              nstring(part.get("content-description")),
              nstring(enc.decode("latin-1").strip().upper() if enc else "7BIT")]
    size, lines = measure(part) if measure else (part.end - part.body_start, _lines(part.body))
    fields.append(str(size).encode())
    if part.message is not None:
        fields += [envelope(part.message), bodystructure(part.message, extended, measure),
                   str(lines).encode()]
    elif part.maintype == "text":
        fields.append(str(lines).encode())
    if extended:
        fields += [nstring(part.get("content-md5")), _extension(part)]
    return plist(fields)


def _extension(part: Part) -> bytes:
    """Disposition, language and location (the extension data after MD5 / parameters)."""
    disposition = part.get("content-disposition")
    if disposition:
        text = _uncomment(disposition.decode("latin-1"))
        kind = text.split(";", 1)[0].strip()
        disp = plist([nstring(kind.upper()), _param_list(_params(text[len(kind):] if ";" in
                                                                  text else ""))])
    else:
        disp = b"NIL"
    language = part.get("content-language")
    if language:
        langs = [x.strip() for x in _uncomment(language.decode("latin-1")).split(",")
                 if x.strip()]
        lang = plist([nstring(x) for x in langs]) if len(langs) > 1 else nstring(langs[0])
    else:
        lang = b"NIL"
    location = part.get("content-location")
    return b" ".join([disp, lang, nstring(location)])


# -- ENVELOPE --------------------------------------------------------------------------------
def envelope(part: Part) -> bytes:
    def value(name: str) -> bytes:
        v = part.get(name)
        return nstring(v) if v else b"NIL"

    from_ = addresses(part.get("from"))
    sender = addresses(part.get("sender")) or from_
    reply_to = addresses(part.get("reply-to")) or from_
    return plist([value("date"), value("subject"), from_ or b"NIL", sender or b"NIL",
                  reply_to or b"NIL", addresses(part.get("to")) or b"NIL",
                  addresses(part.get("cc")) or b"NIL", addresses(part.get("bcc")) or b"NIL",
                  value("in-reply-to"), value("message-id")])


_ADDR_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|\((?:[^()\\]|\\.)*\)|[<>@,;:]|[^\s"<>@,;:()]+',
                          re.S)


Address = tuple[str | None, str | None, str | None, str | None]  # name, adl, mailbox, host


def addresses(value: bytes | None) -> bytes:
    """An address list as IMAP's list of (name adl mailbox host); a group as
    (NIL NIL group NIL) ... (NIL NIL NIL NIL). Empty bytes when there is none."""
    found = parse_addresses(value)
    if not found:
        return b""
    return b"(" + b"".join(plist([nstring(name), nstring(adl),  # RFC 3501: no SP between
                                  b'""' if mailbox == "" else nstring(mailbox), nstring(host)])
                           for name, adl, mailbox, host in found) + b")"


def parse_addresses(value: bytes | None) -> list[Address]:
    """RFC 5322 address lists, groups and obsolete routes included; a comment after an
    address without a display name is its name (as Dovecot reads it)."""
    if not value:
        return []
    all_toks = _ADDR_TOKENS.findall(value)
    out: list[Address] = []
    i = 0
    group_open = False
    toks = [t for t in all_toks if not t.startswith(b"(")]
    comments_after: dict[int, bytes] = {}
    k = -1
    for t in all_toks:
        if t.startswith(b"("):
            comments_after.setdefault(k, t[1:-1])
        else:
            k += 1
    while i < len(toks):
        j = i
        while j < len(toks) and toks[j] not in (b",", b";", b":", b"<"):
            j += 1
        stop = toks[j] if j < len(toks) else b","
        words = toks[i:j]
        if stop == b":" and not group_open:
            out.append((None, None, _phrase(words), None))
            group_open = True
            i = j + 1
            continue
        if stop == b"<":
            end = toks.index(b">", j) if b">" in toks[j:] else len(toks)
            inside = toks[j + 1:end]
            route = None
            if b":" in inside:
                c = inside.index(b":")
                route = b"".join(inside[:c]).decode("latin-1")
                inside = inside[c + 1:]
            out.append(_address(_phrase(words) or None, route, inside))
            j = end + 1
            while j < len(toks) and toks[j] not in (b",", b";"):
                j += 1
            stop = toks[j] if j < len(toks) else b","
        elif words:
            comment = comments_after.get(j - 1)
            name = comment.decode("utf-8", "surrogateescape") if comment else None
            out.append(_address(name, None, words))
        if stop == b";" and group_open:
            out.append((None, None, None, None))
            group_open = False
        i = j + 1
    if group_open:
        out.append((None, None, None, None))
    return out


def _phrase(words: list[bytes]) -> str:
    parts = [w[1:-1].replace(b'\\"', b'"').replace(b"\\\\", b"\\") if w.startswith(b'"')
             else w for w in words]
    return b" ".join(parts).decode("utf-8", "surrogateescape")


def _address(name: str | None, route: str | None, spec: list[bytes]) -> Address:
    if b"@" in spec:
        at = len(spec) - 1 - spec[::-1].index(b"@")
        local, host = spec[:at], spec[at + 1:]
    else:
        local, host = spec, []
    mailbox = b"".join(local).decode("utf-8", "surrogateescape")
    domain = b"".join(host).decode("utf-8", "surrogateescape")
    if mailbox.startswith('"') and mailbox.endswith('"') and len(mailbox) > 1:
        mailbox = mailbox[1:-1]
    return name, route, mailbox, domain or None


# -- BODY[section] --------------------------------------------------------------------------
_SECTION = re.compile(r"^((?:\d+\.)*\d+)?\.?(HEADER\.FIELDS\.NOT|HEADER\.FIELDS|HEADER|TEXT|"
                      r"MIME)?(?:\s*\((.*)\))?$", re.I | re.S)


class SectionError(ValueError):
    pass


def section(part: Part, spec: str) -> bytes | None:
    """The bytes of ``BODY[spec]``; None for a part that does not exist (IMAP answers an
    empty string)."""
    m = _SECTION.match(spec.strip())
    if not m:
        raise SectionError(f"invalid section {spec!r}")
    numbers, text, names = m.group(1), (m.group(2) or "").upper(), m.group(3)
    if text.startswith("HEADER.FIELDS") and names is None:
        raise SectionError("HEADER.FIELDS needs a list of field names")
    if text == "MIME" and not numbers:
        raise SectionError("MIME needs a part number")
    target = part
    if numbers:
        found = _descendant(part, numbers)
        if found is None:
            return None
        target = found
        if text in ("HEADER", "HEADER.FIELDS", "HEADER.FIELDS.NOT", "TEXT"):
            if target.message is None:
                return None
            target = target.message
    if text == "":
        return target.body if numbers else target.raw[target.start:target.end]
    if text == "MIME":
        return target.header
    if text == "TEXT":
        return target.body
    if text == "HEADER":
        return target.header
    wanted = {n.strip('"').lower() for n in (names or "").split()}
    keep = [raw for name, _, raw in target.fields
            if (name in wanted) != (text == "HEADER.FIELDS.NOT")]
    out = b"".join(r if r.endswith(b"\n") else r + b"\r\n" for r in keep)
    return out + b"\r\n"


def part_at(part: Part, numbers: str) -> Part | None:
    """The part a part number (``1.2.3``) names, or None (a number that is not one)."""
    if not re.match(r"^\d+(\.\d+)*$", numbers):
        return None
    return _descendant(part, numbers)


def _descendant(part: Part, numbers: str) -> Part | None:
    """The part a part number (``1.2.3``) names below ``part``, or None when there is none."""
    target: Part | None = part
    for depth, n in enumerate(int(x) for x in numbers.split(".")):
        target = _child(target, n, depth == 0)
        if target is None:
            return None
    return target


def _child(part: Part | None, n: int, top: bool) -> Part | None:
    """Part ``n`` of ``part`` (RFC 3501 6.4.5): a multipart's n-th child; part 1 of the
    top-level message when it is not multipart is the message itself; below a
    message/rfc822 part, the parts of the message it holds (part 1 of a message that is
    not multipart is that message)."""
    if part is None or n < 1:
        return None
    container = part if top or part.message is None else part.message
    if container.maintype == "multipart":
        return container.children[n - 1] if n <= len(container.children) else None
    if top or part.message is not None:
        return container if n == 1 else None
    return None


# -- BINARY (RFC 3516) ----------------------------------------------------------------------
class UnknownEncoding(ValueError):
    """A part whose Content-Transfer-Encoding cannot be decoded (``[UNKNOWN-CTE]``)."""


def binary_section(part: Part, spec: str) -> bytes | None:
    """``BINARY[spec]``: a leaf part's content decoded from its transfer encoding; the
    whole message, a multipart or a message/rfc822 part as it is."""
    if spec and not re.match(r"^\d+(\.\d+)*$", spec):
        raise SectionError(f"BINARY takes a part number, not {spec!r}")
    if not spec:
        return part.raw[part.start:part.end]
    target = _descendant(part, spec)
    if target is None:
        return None
    if target.maintype == "multipart" or target.message is not None:
        return target.body
    return decode_body(target)


def decode_body(part: Part) -> bytes:
    import base64
    import binascii

    enc = (part.get("content-transfer-encoding") or b"7bit").strip().lower()
    if enc in (b"7bit", b"8bit", b"binary"):
        return part.body
    if enc == b"base64":
        try:
            return base64.b64decode(re.sub(rb"[^A-Za-z0-9+/=]", b"", part.body))
        except (binascii.Error, ValueError):
            raise UnknownEncoding("invalid base64") from None
    if enc == b"quoted-printable":
        return _quoted_printable(part.body)
    raise UnknownEncoding(f"unknown transfer encoding {enc.decode('latin-1')!r}")


def binary_form(part: Part) -> bytes:
    """The part (header and body) with every leaf below it decoded from its transfer
    encoding, its Content-Transfer-Encoding then ``binary`` (URLAUTH=BINARY, RFC 5524, as
    Dovecot converts a message/rfc822 part)."""
    header = part.header
    if not part.children and part.message is None:
        enc = (part.get("content-transfer-encoding") or b"").strip().lower()
        if enc in (b"base64", b"quoted-printable"):
            try:
                body = decode_body(part)
            except UnknownEncoding:
                return part.raw[part.start:part.end]
            for name, _, raw in part.fields:
                if name == "content-transfer-encoding":
                    end = b"\r\n" if raw.endswith(b"\r\n") else b"\n"
                    header = header.replace(raw, b"Content-Transfer-Encoding: binary" + end, 1)
            return header + body
    return header + binary_body(part)


def binary_body(part: Part) -> bytes:
    """The body of ``part`` in its binary form (``binary_form``)."""
    if part.message is not None:
        return binary_form(part.message)
    if not part.children or part.maintype != "multipart":
        return part.body
    out = [part.raw[part.body_start:part.children[0].start]]
    for child, following in zip(part.children, [*part.children[1:], None], strict=True):
        out.append(binary_form(child))
        out.append(part.raw[child.end:following.start if following else part.end])
    return b"".join(out)


def binary_measure(part: Part) -> tuple[int, int]:
    """A part's size and lines (line breaks) in its binary form."""
    if part.message is not None:
        data = binary_form(part.message)
    elif part.maintype == "multipart":
        data = binary_body(part)
    else:
        try:
            data = decode_body(part)
        except UnknownEncoding:
            data = part.body
    return len(data), data.count(b"\n")


def _quoted_printable(body: bytes) -> bytes:
    """RFC 2045 6.7: trailing white space of each line dropped, ``=`` at a line's end a
    soft break, ``=XX`` an octet; anything else as it is."""
    out = bytearray()
    lines = re.split(rb"\r?\n", body)
    for i, line in enumerate(lines):
        line = line.rstrip(b" \t")
        soft = line.endswith(b"=")
        if soft:
            line = line[:-1]
        out += re.sub(rb"=([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), line)
        if not soft and i + 1 < len(lines):
            out += b"\r\n"
    return bytes(out)


def binary_parts_as_base64(raw: bytes) -> bytes:
    """A message whose leaf parts of transfer encoding ``binary`` are given as base64
    instead (APPEND of a literal8, RFC 3516 4.2: IMAP4rev1 cannot give binary back)."""
    import base64

    leaves: list[Part] = []

    def walk(p: Part) -> None:
        if p.children:
            for c in p.children:
                walk(c)
        elif p.message is not None:
            walk(p.message)
        elif (p.get("content-transfer-encoding") or b"").strip().lower() == b"binary":
            leaves.append(p)

    walk(parse(raw))
    out = raw
    for p in sorted(leaves, key=lambda p: p.start, reverse=True):
        header = re.sub(rb"(?im)^(content-transfer-encoding:)[ \t]*binary[ \t]*(\r?\n)",
                        rb"\1 base64\2", p.header)
        encoded = base64.encodebytes(p.body).replace(b"\n", b"\r\n")
        out = out[:p.start] + header + encoded + out[p.end:]
    return out
