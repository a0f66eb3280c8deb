"""Scans of a message's bytes that need no parser: line endings, the header block, long
lines, and its MIME structure (parts and nesting) as the stdlib parser will find it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

LineEnding = Literal["CRLF", "LF", "mixed", "none"]


def line_ending(raw: bytes) -> LineEnding:
    """CRLF or LF if all line breaks are, none without any, mixed otherwise. Counted in
    place: no copy of ``raw`` (a 40 MB message made a 40 MB one here)."""
    lf, cr = raw.count(b"\n"), raw.count(b"\r")
    if not lf and not cr:
        return "none"
    if not cr:
        return "LF"
    crlf = raw.count(b"\r\n")
    return "CRLF" if crlf == cr == lf else "mixed"  # no bare CR, no bare LF




NEWLINE = re.compile(rb"\r\n|\r|\n")
HEADER_LINE = re.compile(rb"From |[\041-\071\073-\176]*:|[\t ]")  # = email.feedparser.headerRE


_HEADER_LINES = re.compile(rb"(?:(?:From |[\041-\071\073-\176]*:|[\t ])[^\r\n]*(?:\r\n|\r|\n|\Z))*")
"""Lines that ``email.feedparser.headerRE`` takes for header lines, one after the other."""


def header_block_size(raw: bytes) -> int:
    """Bytes of the header block, blank separator line included, as the parser splits it.

    The block ends at the first blank line or before the first line that is not a header
    (the parser records MissingHeaderBodySeparatorDefect); 0 means no headers at all.
    """
    return header_block(raw)[1]


def header_block(raw: bytes) -> tuple[int, int]:
    """Where the header lines end, and `header_block_size`."""
    lines = header_lines_end(raw, 0)
    blank = NEWLINE.match(raw, lines)
    return lines, blank.end() if blank else lines


def header_lines_end(raw: bytes, pos: int) -> int:
    lines = _HEADER_LINES.match(raw, pos)
    return lines.end() if lines else pos  # it matches "" at least


def header_block_size_by_lines(raw: bytes) -> int:
    """`header_block_size` line by line, as the parser reads the lines."""
    pos = 0
    while pos < len(raw):
        newline = NEWLINE.search(raw, pos)
        end = newline.end() if newline else len(raw)
        blank = newline is not None and newline.start() == pos
        if not blank and not HEADER_LINE.match(raw, pos):
            return pos
        if blank:
            return end
        pos = end
    return pos


def last_line_break(raw: bytes, before: int) -> int:
    """Where the last line that ends before ``before`` ends (0 if none does)."""
    return max(raw.rfind(b"\n", 0, before), raw.rfind(b"\r", 0, before)) + 1


def first_long_line(raw: bytes, limit: int, end: int) -> int | None:
    """Where the first line longer than ``limit`` bytes (line break not counted) starts,
    looking before ``end``; None if there is none.

    Such a line holds a whole window of ``limit // 2`` bytes without a line break, so only
    windows are searched (C speed); a window without one is measured exactly.
    """
    if end <= limit:
        return None
    step = max(limit // 2, 1)
    for window in range(0, end, step):
        stop = min(window + step, end)
        if raw.find(b"\n", window, stop) >= 0 or raw.find(b"\r", window, stop) >= 0:
            continue
        start = last_line_break(raw, window)
        breaks = [i for i in (raw.find(b"\n", stop), raw.find(b"\r", stop)) if i >= 0]
        if min(breaks, default=len(raw)) - start > limit:
            return start
    return None


def _structure_bounds(raw: bytes) -> tuple[int, int]:
    """Upper bounds of (parts, depth) at C speed; only exceeding them costs a line scan.

    A multipart child follows a line starting with ``--``; a nesting level needs a
    ``boundary`` parameter or a ``message/`` type (digest children are message/rfc822 by
    default; delivery-status blocks are separated by blank lines).
    """
    lower = raw.lower()
    dash_lines = raw.count(b"\n--") + raw.count(b"\r--") + raw.startswith(b"--")
    messages = lower.count(b"message/")
    digest = 2 if b"digest" in lower else 1
    blocks = raw.count(b"\n\n") + raw.count(b"\n\r\n") if b"delivery-status" in lower else 0
    return 1 + digest * dash_lines + messages + blocks, digest * lower.count(b"boundary") + messages


def _structure_fits(raw: bytes, max_parts: int, max_depth: int) -> bool:
    """Whether `_structure_bounds` are within the limits, in fewer passes over the bytes.

    Over-estimates of both bounds come first: digest at most doubles, a line starting
    with ``--`` takes two dashes no other one has, and without ``delivery-status`` there
    are no status blocks. Only if they exceed a limit are the bounds themselves needed.
    """
    lower = raw.lower()
    messages = lower.count(b"message/")
    if (
        2 * lower.count(b"boundary") + messages <= max_depth
        and 1 + 2 * (raw.count(b"-") // 2) + messages <= max_parts
        and b"delivery-status" not in lower
    ):
        return True
    parts, depth = _structure_bounds(raw)
    return parts <= max_parts and depth <= max_depth


def prescan_structure(raw: bytes) -> tuple[int, int]:
    """(parts, depth) as the stdlib parser will find them, by a line scan without parsing.

    Body lines can only matter if they start with ``--``, so the scan jumps from one such
    line to the next, and stops when no multipart is open.
    """
    scan, _ = _prescan(raw, None, None)
    return scan.finish()


def structure_cut(raw: bytes, max_parts: int, max_depth: int) -> tuple[int, str] | None:
    """Where the parse must stop so that at most ``max_parts`` parts nested at most
    ``max_depth`` deep are found, and which limit that is; None if the message fits.

    Cheap upper bounds are tried first; only a message exceeding them is scanned.
    """
    if _structure_fits(raw, max_parts, max_depth):
        return None
    scan, stop = _prescan(raw, max_parts, max_depth)
    if stop is None:
        return None
    return stop, "max_parts" if scan.parts > max_parts else "max_depth"


def _prescan(raw: bytes, max_parts: int | None,
             max_depth: int | None) -> tuple[_StructureScan, int | None]:
    """The scan, and the start of the line where it first exceeded a limit (if given)."""
    scan = _StructureScan()
    pos = 0
    while pos < len(raw):
        if scan.in_body():
            pos = scan.next_boundary(raw, pos)
            if pos < 0:
                break
        line = _LINE.match(raw, pos)
        assert line is not None
        scan.feed(line.group())
        if max_parts is not None and max_depth is not None and (
                scan.parts > max_parts or scan.depth > max_depth):
            return scan, pos
        pos = line.end()
    if max_parts is not None and max_depth is not None:
        scan.finish()
        if scan.parts > max_parts or scan.depth > max_depth:
            return scan, len(raw)
    return scan, None


_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_DASH_LINE = re.compile(rb"[\r\n]--")
_CONTENT_TYPE = re.compile(rb"content-type:", re.I)
_BOUNDARY_PARAM = re.compile(
    rb"""boundary\*?[ \t]*=[ \t]*(?:"([^"]*)"|(?:[\w.-]*'[\w.-]*')?([^\s;"]+))""", re.I
)


@dataclass
class _Entity:
    depth: int
    in_digest: bool
    fresh: bool = False  # just opened by a boundary line, nothing read yet
    content_type: bytes = b""
    in_content_type: bool = False

    def header(self, line: bytes) -> None:
        self.fresh = False
        if line[:1] not in (b" ", b"\t"):
            self.in_content_type = not self.content_type and bool(_CONTENT_TYPE.match(line))
        if self.in_content_type:
            self.content_type += line

    def media_type(self) -> tuple[bytes, bytes | None]:
        value = NEWLINE.sub(b"", self.content_type[len(b"content-type:") :])
        media = value.split(b";", 1)[0].strip().lower()
        if media.count(b"/") != 1:
            media = b"message/rfc822" if self.in_digest and not value.strip() else b"text/plain"
        found = _BOUNDARY_PARAM.search(value)
        boundary = (found[1] if found[1] is not None else found[2]).rstrip() if found else None
        return media, boundary


class _StructureScan:
    """The feedparser's state machine, reduced to counting entities and nesting.

    Headers end at a blank or non-header line; any open boundary ends a part; message/*
    holds one message; delivery-status holds header blocks separated by blank lines.
    """

    def __init__(self) -> None:
        self.open: list[tuple[bytes, int, bool]] = []  # boundary, depth, is digest
        self.outermost: dict[bytes, int] = {}  # boundary: its lowest index in self.open
        self.entity: _Entity | None = _Entity(depth=0, in_digest=False)
        self.status_depth: int | None = None
        self.block_pending = False
        self.level = -1  # index in self.open of the multipart the last boundary belonged to
        self.parts = 0
        self.depth = 0

    def feed(self, line: bytes) -> None:
        if line[:2] == b"--" and self.open and self._boundary(line):
            return
        blank = line[:1] in (b"\r", b"\n")
        if self.entity is not None and not blank and HEADER_LINE.match(line):
            self.entity.header(line)
        elif self.entity is not None:
            self._end_headers()
            if not blank:
                self.feed(line)
        elif self.status_depth is not None:
            if self.block_pending:
                self._count(self.status_depth)
            self.block_pending = blank

    def in_body(self) -> bool:
        """Reading a body, where only boundary lines matter."""
        return self.entity is None and self.status_depth is None

    def next_boundary(self, raw: bytes, pos: int) -> int:
        """Where the next line that is an open boundary starts; -1 if there is none."""
        while self.open:
            if not raw.startswith(b"--", pos):
                dashes = _DASH_LINE.search(raw, pos)
                if dashes is None:
                    break
                pos = dashes.start() + 1
            line = _LINE.match(raw, pos)
            assert line is not None
            if self._find(_mark(line.group()))[0] is not None:
                return pos
            pos = line.end()
        return -1

    def finish(self) -> tuple[int, int]:
        while self.entity is not None:
            self._end_headers()
        return self.parts, self.depth

    def _count(self, depth: int) -> None:
        self.parts += 1
        self.depth = max(self.depth, depth)

    def _end_headers(self) -> None:
        assert self.entity is not None
        entity, self.entity = self.entity, None
        self._count(entity.depth)
        media, boundary = entity.media_type()
        if media == b"message/delivery-status":
            self.status_depth, self.block_pending = entity.depth + 1, False
            self._count(entity.depth + 1)
        elif media.startswith(b"message/"):
            self.entity = _Entity(entity.depth + 1, in_digest=False)
        elif media.startswith(b"multipart/") and boundary is not None:
            self._open(boundary, entity.depth, media == b"multipart/digest")

    def _boundary(self, line: bytes) -> bool:
        """An enclosing boundary ends every part inside it, so the outermost match wins."""
        index, closing = self._find(_mark(line))
        if index is None:
            return False
        if self.entity is not None and self.entity.fresh and self.level == index:
            return True  # repeated boundary lines make no empty parts
        while self.entity is not None:
            self._end_headers()
        _, depth, digest = self.open[index]
        self._close(index if closing else index + 1)
        self.status_depth = None
        self.entity = None if closing else _Entity(depth + 1, digest, fresh=True)
        self.level = index
        return True

    def _find(self, mark: bytes) -> tuple[int | None, bool]:
        """The open multipart whose boundary ``mark`` is (outermost first), and if closing."""
        delimiter = self.outermost.get(mark)
        close = self.outermost.get(mark[:-2]) if mark[-2:] == b"--" else None
        if close is not None and (delimiter is None or close < delimiter):
            return close, True
        return delimiter, False

    def _open(self, boundary: bytes, depth: int, digest: bool) -> None:
        self.outermost.setdefault(boundary, len(self.open))
        self.open.append((boundary, depth, digest))

    def _close(self, keep: int) -> None:
        for boundary, _, _ in self.open[keep:]:
            if self.outermost.get(boundary, -1) >= keep:
                del self.outermost[boundary]
        del self.open[keep:]


def _mark(line: bytes) -> bytes:
    """What follows the ``--`` of a boundary line, as the feedparser's boundary regex sees it."""
    return line[2:].rstrip(b"\r\n").rstrip(b" \t")



