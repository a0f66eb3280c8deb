"""An in-memory payload store for tests and demos: same contract, no files.

As every store does since ADR 0099, a new payload gets a random address and the store maps
its content's SHA-256 to that address while it holds it (so equal content is stored once);
deleting the payload forgets the mapping.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence

from domain.errors import InvalidCommand, PayloadMissing
from domain.payloads import (
    CHUNK_SIZE,
    PayloadRef,
    check_range,
    check_sha256,
    new_address,
    rechunk,
)


class InMemoryPayloadStore:
    def __init__(
        self, chunk_size: int = CHUNK_SIZE, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.chunk_size = chunk_size
        self._clock = clock
        self._chunks: dict[str, tuple[bytes, ...]] = {}  # address -> chunks
        self._written_at: dict[str, float] = {}
        self._digest: dict[str, str] = {}  # address -> content SHA-256
        self._address: dict[str, str] = {}  # content SHA-256 -> address (while stored)

    def put(self, data: bytes) -> PayloadRef:
        return self.put_stream([data])

    def put_many(self, payloads: Sequence[bytes]) -> list[PayloadRef]:
        return [self.put(data) for data in payloads]

    def put_stream(self, chunks: Iterable[bytes], *, address: str | None = None) -> PayloadRef:
        stored = tuple(rechunk(chunks, self.chunk_size))
        sha256 = hashlib.sha256(b"".join(stored)).hexdigest()
        if address is None:
            address = self._address.get(sha256) or new_address()
        elif address in self._chunks and self._digest[address] != sha256:
            raise InvalidCommand(f"payload {address} is stored already with other content")
        self._chunks.setdefault(check_sha256(address), stored)
        self._digest[address] = sha256
        self._address.setdefault(sha256, address)
        self._written_at[address] = self._clock()
        return self._ref(address)

    def exists(self, sha256: str) -> bool:
        return check_sha256(sha256) in self._chunks

    def touch(self, sha256: str) -> bool:
        if check_sha256(sha256) not in self._chunks:
            return False
        self._written_at[sha256] = self._clock()
        return True

    def open(self, sha256: str) -> Iterator[bytes]:
        return iter(self._stored(sha256))

    def read_range(self, sha256: str, start: int, end: int) -> bytes:
        check_range(start, end)
        chunks = self._stored(sha256)
        first, last = start // self.chunk_size, -(-end // self.chunk_size)
        offset = start - first * self.chunk_size
        return b"".join(chunks[first:last])[offset : offset + end - start]

    def size(self, sha256: str) -> int:
        return sum(len(chunk) for chunk in self._stored(sha256))

    def delete(self, sha256: str) -> bool:
        self._written_at.pop(check_sha256(sha256), None)
        digest = self._digest.pop(sha256, None)
        if digest is not None and self._address.get(digest) == sha256:
            del self._address[digest]
        return self._chunks.pop(sha256, None) is not None

    def list(self) -> Iterator[tuple[str, int, float]]:
        for address in list(self._chunks):
            yield address, self.size(address), self._written_at[address]

    def _stored(self, sha256: str) -> tuple[bytes, ...]:
        try:
            return self._chunks[check_sha256(sha256)]
        except KeyError:
            raise PayloadMissing(f"payload {sha256} is not in the payload store") from None

    def _ref(self, address: str) -> PayloadRef:
        return PayloadRef(self._digest[address], self.size(address), len(self._chunks[address]),
                          address)
