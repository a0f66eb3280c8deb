"""Ports: what the domain needs from infrastructure, as Protocols (adapters implement them)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

from domain.payloads import PayloadRef


class PayloadStore(Protocol):
    """Chunked payloads, each kept under an address and written once however often it is
    put (ADR 0099): a new payload gets a random address, and the store maps its content's
    SHA-256 to that address for as long as it holds the bytes, so that putting the same
    content again returns the same address. Payloads stored before ADR 0099 are addressed
    by their SHA-256 and keep it. Once a payload is deleted, nothing the store keeps links
    its address to its content.

    Absent payloads raise PayloadMissing naming the address; malformed addresses and
    ranges raise InvalidCommand.
    """

    chunk_size: int

    def put(self, data: bytes) -> PayloadRef:
        """Store ``data`` (idempotent: the address of the same content stored already, its
        written_at refreshed); the ref names the address and the content's SHA-256."""
        ...

    def put_many(self, payloads: Sequence[bytes]) -> list[PayloadRef]:
        """``put`` of each, in order; a store may write them concurrently. All are stored
        when it returns; if one fails, it raises (the others may be stored: orphans that
        the unreferenced-payload purge collects)."""
        ...

    def put_stream(self, chunks: Iterable[bytes], *, address: str | None = None) -> PayloadRef:
        """Store an upload of any chunking, hashed while written, committed atomically.
        ``address``: keep it under this address (a copy of another store's payload: a
        backup, a restore, a migration), not under a new or the content's known one."""
        ...

    def exists(self, sha256: str) -> bool:
        """Whether a payload is stored at this address."""
        ...

    def touch(self, sha256: str) -> bool:
        """Set the payload's written_at to now (as a put of its content does), so no purge
        takes it within its grace period; False if it is not stored."""
        ...

    def open(self, sha256: str) -> Iterator[bytes]:
        """The payload at this address chunk by chunk, never whole; PayloadMissing at once
        if absent."""
        ...

    def read_range(self, sha256: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` (``end`` capped at the size), reading only their chunks."""
        ...

    def size(self, sha256: str) -> int: ...

    def delete(self, sha256: str) -> bool:
        """Remove the payload at this address, and the store's link from its content to
        it; False if it was not there."""
        ...

    def list(self) -> Iterator[tuple[str, int, float]]:
        """Every stored payload as (address, size, written_at), for orphan collection."""
        ...
