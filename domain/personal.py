"""``Personal``: the personal part of a message (envelope headers, attachment names, inline
body), the one part of an event that is sealed with the message's own data key.

It reads like the dict it wraps. The event store seals it on the way in (a key is taken when
the message's personal data is first written; a ``Moved`` event re-seals the same object with
the same key) and opens it on the way out. When the key has been destroyed (the message was
purged or erased) it opens as ``shredded``: empty. Its ``repr`` never shows the data, so a
log line or a traceback cannot leak it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from uuid import UUID


class Personal(Mapping[str, Any]):
    __slots__ = ("data", "key_id", "key", "shredded")

    def __init__(self, data: Mapping[str, Any] | None = None, *, key_id: UUID | None = None,
                 key: bytes | None = None, shredded: bool = False) -> None:
        self.data: dict[str, Any] = dict(data or {})
        self.key_id = key_id  # set once the event store has taken a key for it
        self.key = key
        self.shredded = shredded

    def __getitem__(self, name: str) -> Any:
        return self.data[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Personal):
            return self.data == other.data and self.shredded == other.shredded
        return isinstance(other, Mapping) and not self.shredded and self.data == dict(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        state = "shredded" if self.shredded else f"{len(self.data)} fields"
        return f"Personal(<{state}>, key_id={self.key_id})"

    def copy_for_another_message(self) -> Personal:
        """The same data for a copy: a new message, so a key of its own (unset)."""
        return Personal(self.data)
