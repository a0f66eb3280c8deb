"""zstd at level 1 (about 3x on mail, the cheapest level to write), with one compressor and
one decompressor per thread (a zstd context serves one thread at a time): the events'
personal parts (ADR 0014) and the payload store's chunks (ADR 0023)."""

from __future__ import annotations

import threading

import zstandard

LEVEL = 1
_codecs = threading.local()


def compress(data: bytes) -> bytes:
    c = getattr(_codecs, "c", None)
    if c is None:
        c = _codecs.c = zstandard.ZstdCompressor(level=LEVEL)
    return c.compress(data)


def decompress(data: bytes) -> bytes:
    d = getattr(_codecs, "d", None)
    if d is None:
        d = _codecs.d = zstandard.ZstdDecompressor()
    return d.decompress(data)
