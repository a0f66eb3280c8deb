"""How far a message's parse may go: the window of its bytes the parser reads, cut short
by the limits (``limits.MessageLimits``) on its header block, its lines, its parts and its
nesting; the facts name each limit that cut it (``truncated``).
"""

from __future__ import annotations

from dataclasses import dataclass

from domain.rfc5322.limits import MessageLimits
from domain.rfc5322.scan import first_long_line, last_line_break, structure_cut


@dataclass(frozen=True)
class ParseWindow:
    """The bytes the parser reads (``raw[:end]``) and the limits that cut them short."""

    end: int
    truncated: tuple[str, ...] = ()

    def cut(self, end: int, limit: str) -> ParseWindow:
        if end >= self.end and limit in self.truncated:
            return self
        return ParseWindow(min(end, self.end), (*self.truncated, limit))


def line_window(raw: bytes, header_bytes: int, limits: MessageLimits) -> ParseWindow:
    """The window the header and line-length limits leave: a header block over its limit
    is read up to its last whole line within the limit (no body); a line over its limit
    ends the window where it starts."""
    window = ParseWindow(len(raw))
    if header_bytes > limits.max_header_bytes:
        window = window.cut(last_line_break(raw, limits.max_header_bytes), "max_header_bytes")
    long_line = first_long_line(raw, limits.max_line_length, window.end)
    if long_line is not None:
        window = window.cut(long_line, "max_line_length")
    return window


def structure_window(raw: bytes, window: ParseWindow, limits: MessageLimits) -> ParseWindow:
    """``window`` cut where the parts or nesting of what it holds exceed their limits."""
    cut = structure_cut(raw[:window.end] if window.end < len(raw) else raw,
                        limits.max_parts, limits.max_depth)
    return window if cut is None else window.cut(*cut)
