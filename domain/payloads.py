"""Payloads: kept under an address, cut into fixed-size chunks (pure values).

A payload's *address* is the name the payload store keeps it under and events refer to it
by. A payload stored before ADR 0099 is addressed by its content's SHA-256; one stored since
has a random address (``new_address``): the store maps content to address while it holds the
bytes (so equal content is stored once) and forgets the mapping with them, so that an
address the log keeps after an erasure says nothing about the content (ADR 0099).
"""

from __future__ import annotations

import re
import secrets
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
    """A stored payload: its content's SHA-256, its size, its chunks, and the address the
    store keeps it under (``""`` given: the SHA-256, as before ADR 0099)."""

    sha256: str
    size: int
    chunk_count: int
    address: str = ""

    def __post_init__(self) -> None:
        if not self.address:
            object.__setattr__(self, "address", self.sha256)


def new_address() -> str:
    """A fresh payload address: 256 random bits as 64 hex digits (the format of a SHA-256,
    so that every address, old or new, passes ``check_sha256``)."""
    return secrets.token_hex(32)


def chunk_count(size: int, chunk_size: int = CHUNK_SIZE) -> int:
    return -(-size // chunk_size)


def is_sha256(text: str) -> bool:
    return isinstance(text, str) and _SHA256.fullmatch(text) is not None


def check_sha256(sha256: str) -> str:
    """The address itself, if it is 64 lowercase hex digits; InvalidCommand otherwise."""
    if not is_sha256(sha256):
        raise InvalidCommand(f"a payload address (a sha256) must be 64 lowercase hex digits, "
                             f"got {sha256!r:.80}")
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
