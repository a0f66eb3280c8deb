"""Payload stores: files on disk, HBase's payload table, and an in-memory fake; each keeps a
payload under a random address and links its content to it while it holds it (ADR 0099).

May import: ``domain`` (the ``PayloadStore`` port); never ``streaming``, ``cli``
or ``devtools``.
"""

from typing import Protocol, runtime_checkable


@runtime_checkable
class ClosingPayloads(Protocol):
    """A payload store that holds threads or connections until ``close`` (the file store's
    put threads, HBase's pool): closed with the store that opened it."""

    def close(self) -> None: ...


@runtime_checkable
class SweepingPayloads(Protocol):
    """A payload store that leaves files behind when a process dies mid-write or mid-delete
    (the file store's temporary writes, its content links left alone): swept by the
    ``payloads`` job."""

    def discard_stale_writes(self, older_than: float) -> int: ...


__all__ = ["ClosingPayloads", "SweepingPayloads"]
