"""An in-memory payload store for tests and demos: same contract, no files."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence

from domain.errors import PayloadMissing
from domain.payloads import CHUNK_SIZE, PayloadRef, check_range, check_sha256, rechunk


class InMemoryPayloadStore:
    def __init__(
        self, chunk_size: int = CHUNK_SIZE, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.chunk_size = chunk_size
        self._clock = clock
        self._chunks: dict[str, tuple[bytes, ...]] = {}
        self._written_at: dict[str, float] = {}

    def put(self, data: bytes) -> PayloadRef:
        return self.put_stream([data])

    def put_many(self, payloads: Sequence[bytes]) -> list[PayloadRef]:
        return [self.put(data) for data in payloads]

    def put_stream(self, chunks: Iterable[bytes]) -> PayloadRef:
        stored = tuple(rechunk(chunks, self.chunk_size))
        sha256 = hashlib.sha256(b"".join(stored)).hexdigest()
        self._chunks.setdefault(sha256, stored)
        self._written_at[sha256] = self._clock()
        return self._ref(sha256)

    def exists(self, sha256: str) -> bool:
        return check_sha256(sha256) in self._chunks

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
        return self._chunks.pop(sha256, None) is not None

    def list(self) -> Iterator[tuple[str, int, float]]:
        for sha256 in list(self._chunks):
            yield sha256, self.size(sha256), self._written_at[sha256]

    def _stored(self, sha256: str) -> tuple[bytes, ...]:
        try:
            return self._chunks[check_sha256(sha256)]
        except KeyError:
            raise PayloadMissing(f"payload {sha256} is not in the payload store") from None

    def _ref(self, sha256: str) -> PayloadRef:
        return PayloadRef(sha256, self.size(sha256), len(self._chunks[sha256]))
