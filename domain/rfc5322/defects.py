"""Parser and header defects, recorded as data (never raised), at most MAX_DEFECTS."""

from __future__ import annotations

from collections.abc import Iterable

from domain.rfc5322.text import clean_text

MAX_DEFECTS = 100
"""Defects recorded per message; the rest are summed up in one last entry."""


class Defects:
    def __init__(self) -> None:
        self._items: list[str] = []
        self._dropped = 0

    def add(self, kind: str, detail: str = "") -> None:
        if len(self._items) >= MAX_DEFECTS:
            self._dropped += 1
            return
        detail = clean_text(detail)[:200]
        self._items.append(f"{kind}: {detail}" if detail else kind)

    def add_all(self, defects: Iterable[Exception], header: str | None = None) -> None:
        for defect in defects:
            detail = ": ".join(filter(None, (header, str(defect))))
            self.add(type(defect).__name__, detail)

    def recorded(self) -> tuple[str, ...]:
        if self._dropped:
            return (*self._items, f"TooManyDefects: {self._dropped} more not recorded")
        return tuple(self._items)
