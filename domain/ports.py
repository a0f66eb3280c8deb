"""Ports: what the domain needs from infrastructure, as Protocols (adapters implement them)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

from domain.payloads import PayloadRef


class PayloadStore(Protocol):
    """Content-addressed, chunked payloads, each written once however often it is put.

    Absent payloads raise PayloadMissing naming the sha256; malformed addresses and
    ranges raise InvalidCommand.
    """

    chunk_size: int

    def put(self, data: bytes) -> PayloadRef:
        """Store ``data`` (idempotent); a repeated put refreshes its written_at."""
        ...

    def put_many(self, payloads: Sequence[bytes]) -> list[PayloadRef]:
        """``put`` of each, in order; a store may write them concurrently. All are stored
        when it returns; if one fails, it raises (the others may be stored: orphans that
        the unreferenced-payload purge collects)."""
        ...

    def put_stream(self, chunks: Iterable[bytes]) -> PayloadRef:
        """Store an upload of any chunking, hashed while written, committed atomically."""
        ...

    def exists(self, sha256: str) -> bool: ...

    def open(self, sha256: str) -> Iterator[bytes]:
        """The payload chunk by chunk, never whole; PayloadMissing at once if absent."""
        ...

    def read_range(self, sha256: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` (``end`` capped at the size), reading only their chunks."""
        ...

    def size(self, sha256: str) -> int: ...

    def delete(self, sha256: str) -> bool:
        """Remove the payload; False if it was not there."""
        ...

    def list(self) -> Iterator[tuple[str, int, float]]:
        """Every stored payload as (sha256, size, written_at), for orphan collection."""
        ...
