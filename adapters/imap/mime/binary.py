"""BINARY (RFC 3516): a part's body decoded from its content transfer encoding, a
message with its leaves decoded, their sizes; and APPEND's binary parts kept as base64."""

from __future__ import annotations

import base64
import binascii
import re

from adapters.imap.mime.parts import Part, parse
from adapters.imap.mime.sections import SectionError, _descendant


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
