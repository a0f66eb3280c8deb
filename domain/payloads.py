"""Payloads: content-addressed by SHA-256, cut into fixed-size chunks (pure values)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from domain.errors import InvalidCommand

INLINE_LIMIT = 10 * 1024
"""A payload at most this large travels inline in its event; a larger one is stored."""

CHUNK_SIZE = 128 * 1024
"""Stored payloads are cut into chunks of this size (the last one may be shorter)."""

_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class PayloadRef:
    sha256: str
    size: int
    chunk_count: int


def chunk_count(size: int, chunk_size: int = CHUNK_SIZE) -> int:
    return -(-size // chunk_size)


def is_sha256(text: str) -> bool:
    return isinstance(text, str) and _SHA256.fullmatch(text) is not None


def check_sha256(sha256: str) -> str:
    """The address itself, if it is 64 lowercase hex digits; InvalidCommand otherwise."""
    if not is_sha256(sha256):
        raise InvalidCommand(f"sha256 must be 64 lowercase hex digits, got {sha256!r:.80}")
    return sha256


def check_range(start: int, end: int) -> None:
    if start < 0 or end < start:
        raise InvalidCommand(f"invalid byte range [{start}, {end}): need 0 <= start <= end")


def rechunk(pieces: Iterable[bytes], chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
    """Pieces of any size as chunks of exactly ``chunk_size`` bytes (the last may be shorter)."""
    buffer = bytearray()
    for piece in pieces:
        if not isinstance(piece, bytes | bytearray | memoryview):
            raise InvalidCommand(f"payload chunks must be bytes, got {type(piece).__name__}")
        view = memoryview(piece).cast("B")
        if buffer:
            take = chunk_size - len(buffer)
            buffer += view[:take]
            view = view[take:]
            if len(buffer) < chunk_size:
                continue
            yield bytes(buffer)
            buffer.clear()
        while len(view) >= chunk_size:
            yield bytes(view[:chunk_size])
            view = view[chunk_size:]
        buffer += view
    if buffer:
        yield bytes(buffer)
