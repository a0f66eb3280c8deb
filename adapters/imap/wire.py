"""The IMAP wire format (RFC 3501 section 9): reading a command's tokens, writing strings,
and sequence sets.

A command arrives as lines and literals (``{N}`` / ``{N+}`` at a line's end, then N bytes):
``Command`` holds them in order; ``tokens`` turns them into atoms, strings and lists.
An atom keeps a bracketed section whole (``BODY.PEEK[HEADER.FIELDS (FROM TO)]<0.10>`` is one
atom), so FETCH reads its items from single tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeAlias


class BadCommand(Exception):
    """A command that is not IMAP: answered ``BAD`` with this text."""


class No(Exception):
    """A command that failed: answered ``NO`` (``code``: an RFC 5530 response code)."""

    def __init__(self, text: str, code: str = "") -> None:
        super().__init__(text)
        self.code = code


@dataclass(frozen=True)
class Atom:
    value: str

    def upper(self) -> str:
        return self.value.upper()


@dataclass(frozen=True)
class String:
    """A quoted string or a literal (``literal`` True: sent as one)."""

    value: bytes
    literal: bool = False
    binary: bool = False  # a literal8 (``~{N}``, RFC 3516)

    def text(self) -> str:
        return self.value.decode("utf-8", "surrogateescape")


Token: TypeAlias = "Atom | String | list[Token]"  # a list holds tokens

LITERAL_AT_END = re.compile(rb"~?\{(\d{1,20})(\+?)\}\r?\n?$")
_ATOM_END = frozenset(b" ()\"{\r\n")


def tokens(segments: list[bytes]) -> list[Token]:
    """The tokens of a command's segments: its lines (each but the last ending with a
    literal's ``{N}``) and, between them, the literals' bytes."""
    out: list[Token] = []
    stack: list[list[Token]] = [out]
    for index, segment in enumerate(segments):
        if index % 2:  # a literal's bytes
            binary = segments[index - 1].rstrip(b"\r\n").endswith(b"}") and bool(
                re.search(rb"~\{\d+\+?\}\r?\n?$", segments[index - 1]))
            stack[-1].append(String(segment, literal=True, binary=binary))
            continue
        line = segment
        if index + 1 < len(segments):  # the line ends with the literal's announcement
            m = LITERAL_AT_END.search(line)
            line = line[:m.start()] if m else line
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if c == 0x20:
                i += 1
            elif c == 0x28:  # (
                inner: list[Token] = []
                stack[-1].append(inner)
                stack.append(inner)
                i += 1
            elif c == 0x29:  # )
                if len(stack) == 1:
                    raise BadCommand("unbalanced ')'")
                stack.pop()
                i += 1
            elif c == 0x22:  # "
                i, value = _quoted(line, i + 1)
                stack[-1].append(String(value))
            elif c in (0x0D, 0x0A):
                i += 1
            elif c == 0x7B:  # { not announcing a literal at the line's end
                raise BadCommand("unexpected '{'")
            else:
                i, atom = _atom(line, i)
                stack[-1].append(Atom(atom))
    if len(stack) != 1:
        raise BadCommand("unbalanced '('")
    return out


def _quoted(line: bytes, i: int) -> tuple[int, bytes]:
    value = bytearray()
    while i < len(line):
        c = line[i]
        if c == 0x5C and i + 1 < len(line):  # backslash
            value.append(line[i + 1])
            i += 2
        elif c == 0x22:
            return i + 1, bytes(value)
        elif c in (0x0D, 0x0A):
            break
        else:
            value.append(c)
            i += 1
    raise BadCommand("unterminated quoted string")


def _atom(line: bytes, i: int) -> tuple[int, str]:
    start, depth = i, 0
    while i < len(line):
        c = line[i]
        if c == 0x5B and line.find(b"]", i) > 0:  # [ : a section, kept whole up to its ]
            depth += 1
        elif c == 0x5D and depth:
            depth -= 1
        elif not depth and c in _ATOM_END:
            break
        i += 1
    return i, line[start:i].decode("utf-8", "surrogateescape")


# -- writing -------------------------------------------------------------------------------
_SAFE_QUOTED = re.compile(rb'^[^\x00\r\n"\\\x80-\xff]*$')


def astring_out(value: str | bytes) -> bytes:
    """A string as a quoted string when it can be one, else a literal."""
    raw = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
    if _SAFE_QUOTED.match(raw) and len(raw) < 1024:
        return b'"' + raw + b'"'
    return b"{%d}\r\n" % len(raw) + raw


def nstring(value: str | bytes | None) -> bytes:
    return b"NIL" if value is None else astring_out(value)


def literal(raw: bytes) -> bytes:
    return b"{%d}\r\n" % len(raw) + raw


def plist(items: list[bytes]) -> bytes:
    return b"(" + b" ".join(items) + b")"


# -- sequence sets -------------------------------------------------------------------------
def sequence_set(text: str, largest: int) -> list[tuple[int, int]]:
    """``1:3,5,7:*`` as (low, high) ranges; ``*`` is ``largest`` (the highest number in
    use: the mailbox's last sequence number or UID)."""
    ranges: list[tuple[int, int]] = []
    if not text:
        raise BadCommand("empty sequence set")
    for item in text.split(","):
        low, sep, high = item.partition(":")
        a = _seq_number(low, largest)
        b = _seq_number(high, largest) if sep else a
        ranges.append((min(a, b), max(a, b)))
    return ranges


def _seq_number(text: str, largest: int) -> int:
    if text == "*":
        return largest
    if not text.isdigit() or text.startswith("0") or int(text) > 0xFFFFFFFF:
        raise BadCommand(f"invalid sequence number {text!r}")
    return int(text)


def in_set(number: int, ranges: list[tuple[int, int]]) -> bool:
    return any(low <= number <= high for low, high in ranges)


# -- dates ---------------------------------------------------------------------------------
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def imap_date(when: datetime) -> str:
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    off = int(when.utcoffset().total_seconds() // 60)  # type: ignore[union-attr]
    sign = "+" if off >= 0 else "-"
    return (f"{when.day:02d}-{MONTHS[when.month - 1]}-{when.year:04d} "
            f"{when:%H:%M:%S} {sign}{abs(off) // 60:02d}{abs(off) % 60:02d}")
