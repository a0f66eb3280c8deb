"""The speed tricks, in one place, each beside the plain code it stands for.

Decoding a log builds a few UUIDs per event, a delivery several natural keys, a listing two
per row; ``uuid.UUID``'s argument checks cost about as much as the rest of making one. The
tricks below build the same objects without the checks, for values already known to be in
range. ``PLAIN`` maps each trick to its plain version: ``tests/property/test_speedups.py``
holds every trick to it (equality, hash, bytes, pickling, copying).

Imports nothing but the standard library; any layer may use it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

_new = object.__new__
_set_int = uuid.UUID.__dict__["int"].__set__  # UUID's slots, set as UUID.__init__ sets them
_set_safe = uuid.UUID.__dict__["is_safe"].__set__
_UNKNOWN = uuid.SafeUUID.unknown
_from_bytes = int.from_bytes


def uuid_of_int(value: int) -> uuid.UUID:
    """``uuid.UUID(int=value)`` for ``0 <= value < 2**128``, without the range check."""
    u = _new(uuid.UUID)
    _set_int(u, value)
    _set_safe(u, _UNKNOWN)
    return u


def uuid_of_bytes(data: bytes) -> uuid.UUID:
    """``uuid.UUID(bytes=data)`` for 16 ``bytes``, without the type and length checks."""
    u = _new(uuid.UUID)
    _set_int(u, _from_bytes(data))
    _set_safe(u, _UNKNOWN)
    return u


def uuid_of_hex(digits: str) -> uuid.UUID:
    """``uuid.UUID(hex=digits)`` for 32 hex digits (an SQLite log's stored ids)."""
    return uuid_of_int(int(digits, 16))


PLAIN: dict[Callable[..., Any], Callable[..., Any]] = {
    uuid_of_int: lambda value: uuid.UUID(int=value),
    uuid_of_bytes: lambda data: uuid.UUID(bytes=data),
    uuid_of_hex: lambda digits: uuid.UUID(hex=digits),
}
"""Each trick and the plain code it must equal."""
