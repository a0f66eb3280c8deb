"""Payload stores: content-addressed files on disk and an in-memory fake.

May import: ``domain`` (the ``PayloadStore`` port); never ``streaming``, ``cli``
or ``devtools``.
"""

from typing import Protocol, runtime_checkable


@runtime_checkable
class ClosingPayloads(Protocol):
    """A payload store that holds threads or connections until ``close`` (the file store's
    put threads, HBase's pool): closed with the store that opened it."""

    def close(self) -> None: ...


__all__ = ["ClosingPayloads"]
