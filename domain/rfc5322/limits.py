"""What a message must be to be stored at all, and the limits of its parse.

Only the total size rejects a message (and input that is not a message: empty, blank or
binary). Every other limit caps the parse: the message is stored and extracted byte-exact,
described by what was parsed before the limit, and its facts name the limits hit
(``truncated``; ``windows``), as Dovecot's message-parser limits and mime4j's MimeConfig do.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from domain.errors import InvalidCommand, MessageRejected

KiB = 1024
MiB = 1024 * KiB

BINARY_SHARE = 0.01
BINARY_TOLERANCE = 1
"""More control bytes than this share (or one stray byte) at the start: binary, not mail."""

BINARY_WINDOW = 4 * KiB
"""How much of a message without headers is looked at to tell text from binary."""


@dataclass(frozen=True)
class MessageLimits:
    """``max_size`` rejects; the others stop the parse (each named after its setting)."""

    max_size: int = 50 * MiB
    max_header_bytes: int = 256 * KiB
    max_parts: int = 1000
    max_depth: int = 32
    max_line_length: int = 1 * MiB
    parse_seconds: float = 10.0

    def __post_init__(self) -> None:
        for field in fields(self):
            if getattr(self, field.name) <= 0 or (
                    field.name != "parse_seconds" and getattr(self, field.name) < 1):
                raise InvalidCommand(f"MessageLimits.{field.name} must be at least 1")


def check_input(raw: bytes, limits: MessageLimits) -> None:
    if not isinstance(raw, bytes):
        raise MessageRejected(f"not a message: expected bytes, got {type(raw).__name__}")
    if not raw:
        raise MessageRejected("not a message: empty input (0 bytes)")
    if len(raw) > limits.max_size:
        raise MessageRejected(
            f"message too large: {len(raw)} bytes exceeds max_message_size={limits.max_size}"
        )
    if raw.isspace():  # what bytes.strip() strips, without copying the bytes
        raise MessageRejected(f"not a message: {len(raw)} bytes of whitespace only")


_CONTROL = bytes(b for b in range(256) if b == 0x7F or (b < 0x20 and b not in b"\t\n\v\f\r\x1b"))
_NOT_CONTROL = bytes(b for b in range(256) if b not in _CONTROL)


def reject_binary(raw: bytes, header_bytes: int) -> None:
    window = raw[:header_bytes]
    where = "header block"
    if not window.strip():
        window, where = raw[:BINARY_WINDOW], "first bytes"
    controls = len(window.translate(None, _NOT_CONTROL))
    if controls > max(BINARY_TOLERANCE, BINARY_SHARE * len(window)):
        raise MessageRejected(
            f"not a message: binary data, {controls} NUL/control bytes in the {where} "
            f"({len(window)} bytes, at most {BINARY_SHARE:.0%} allowed)"
        )
