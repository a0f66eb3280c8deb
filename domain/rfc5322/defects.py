"""Parser and header defects, recorded as data (never raised), at most MAX_DEFECTS.

A recorded defect names its class and, where known, the header it was found in, and never
holds text of the message (the facts it goes into are not sealed; issue 27, ADR 0040):

* ``<DefectClass>`` or ``<DefectClass>: <header>``: a defect the stdlib parser found
  (``email.errors``; its own text, which often quotes the header's value, is not kept);
* ``HeaderTruncated: <header>``: the header was decoded from its first bytes only;
* ``HeaderDecodeFailure[: <header>]: <ExceptionClass>``: decoding the header raised;
* ``ParserFailure: <ExceptionClass>`` (``RecursionError``: MIME nesting too deep);
* ``TooManyDefects: <n> more not recorded``.

A class is a Python identifier, a header a token ``[A-Za-z0-9-]{1,76}``; anything else is
left out (a class that is not an identifier is recorded as ``Defect``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_DEFECTS = 100
"""Defects recorded per message; the rest are summed up in one last entry."""

_CLASS = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,75}")
_HEADER = re.compile(r"[A-Za-z0-9-]{1,76}")

RECORDED_HEADERS = frozenset({
    "subject", "from", "to", "cc", "bcc", "date", "content-type", "content-disposition",
})
"""The headers the parser names in a defect (the only ones it ever named)."""


def defect_class(name: str) -> str | None:
    """``name`` if it may name a defect's class (a Python identifier), else ``None``."""
    return name if _CLASS.fullmatch(name) else None


def defect_entry(kind: str, header: str | None = None, error: BaseException | None = None) -> str:
    """The recorded form of one defect: its class, the header's name if it is a plain token,
    the class of the exception that stood for the defect; no other text."""
    parts = [defect_class(kind) or "Defect"]
    if header is not None and _HEADER.fullmatch(header):
        parts.append(header)
    if error is not None:
        name = defect_class(type(error).__name__)
        if name is not None:
            parts.append(name)
    return ": ".join(parts)


class Defects:
    def __init__(self) -> None:
        self._items: list[str] = []
        self._dropped = 0

    def add(self, kind: str, header: str | None = None,
            error: BaseException | None = None) -> None:
        if len(self._items) >= MAX_DEFECTS:
            self._dropped += 1
            return
        self._items.append(defect_entry(kind, header, error))

    def add_all(self, defects: Iterable[Exception], header: str | None = None) -> None:
        for defect in defects:
            self.add(type(defect).__name__, header)

    def recorded(self) -> tuple[str, ...]:
        if self._dropped:
            return (*self._items, f"TooManyDefects: {self._dropped} more not recorded")
        return tuple(self._items)
