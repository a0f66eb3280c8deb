"""BODY[section] (RFC 3501 6.4.5): a part, its header, some of its fields, or its text, as
a slice of the stored bytes."""

from __future__ import annotations

import re

from adapters.imap.mime.parts import Part

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


