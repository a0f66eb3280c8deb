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
from typing import Any

MAX_DEFECTS = 100
"""Defects recorded per message; the rest are summed up in one last entry."""

_CLASS = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,75}")
_HEADER = re.compile(r"[A-Za-z0-9-]{1,76}")
_TOO_MANY = re.compile(r"TooManyDefects: [0-9]{1,12} more not recorded")

RECORDED_HEADERS = frozenset({
    "subject", "from", "to", "cc", "bcc", "date", "content-type", "content-disposition",
})
"""The headers the parser names in a defect (the only ones it ever named)."""


def _class(name: str) -> str | None:
    return name if _CLASS.fullmatch(name) else None


def defect_entry(kind: str, header: str | None = None, error: BaseException | None = None) -> str:
    """The recorded form of one defect: its class, the header's name if it is a plain token,
    the class of the exception that stood for the defect; no other text."""
    parts = [_class(kind) or "Defect"]
    if header is not None and _HEADER.fullmatch(header):
        parts.append(header)
    if error is not None:
        name = _class(type(error).__name__)
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


# --- defects recorded before ADR 0040 -------------------------------------------------------

_NESTING_TOO_DEEP = "MIME nesting too deep for the parser"


def without_text(defect: str) -> str:
    """A defect string as recorded before ADR 0040 (``<class>: [<header>: ]<its text>``,
    the text often quoting the header's value) in the form recorded now: the text dropped,
    only the class, a header the parser names and an exception's class kept. Deterministic,
    and a defect recorded now comes back unchanged."""
    kind, *rest = defect.split(": ")
    if _class(kind) is None:
        return "Defect"
    if kind == "TooManyDefects":
        return defect if _TOO_MANY.fullmatch(defect) else kind
    if kind == "ParserFailure":
        if rest and rest[0] == _NESTING_TOO_DEEP:
            return "ParserFailure: RecursionError"
        error = _class(rest[0]) if rest else None
        return f"{kind}: {error}" if error else kind
    kept = [kind]
    if rest and rest[0] in RECORDED_HEADERS:
        kept.append(rest.pop(0))
    if kind == "HeaderDecodeFailure":
        if rest and rest[0] == "attachment" and len(rest) > 1:  # it named no header
            rest.pop(0)
        error = _class(rest[0]) if rest else None
        if error:
            kept.append(error)
    return ": ".join(kept)


def facts_without_text(facts: Any) -> Any:
    """``facts`` of an event (a dict) with each defect ``without_text``; the same object if
    there is nothing to change."""
    if type(facts) is not dict:
        return facts
    defects = facts.get("defects")
    if not defects or not isinstance(defects, list | tuple):
        return facts
    cleaned = [without_text(d) if type(d) is str else "Defect" for d in defects]
    return facts if cleaned == list(defects) else {**facts, "defects": cleaned}
