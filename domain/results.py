"""What a command returns: a ``Delivery`` (a message placed in a mailbox) or a ``Change``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID


@dataclass(frozen=True)
class Delivery:
    message_id: UUID
    mailbox_id: UUID
    uid: int
    uidvalidity: int
    size: int
    sha256: str
    modseq: int  # the log position of the event: strictly increasing per mailbox


@dataclass(frozen=True)
class Change:
    """What a command did: the log positions it appended (empty when nothing changed)."""

    positions: tuple[int, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.positions)

    @property
    def modseq(self) -> int | None:
        return self.positions[-1] if self.positions else None
