"""What a command returns: a ``Delivery`` (a message placed in a mailbox), an ``Upload``
(one begun), a ``Reservation`` (an extraction held) or a ``Change``.

All carry ``position``: wait until a read model (or a stream worker) has applied the log up
to it, and it shows the command's outcome. All carry ``saved`` too: the events the command
appended, with their log positions (``Recorded``, what ``UnitOfWork.save`` returns, as the
eventsourcing library's ``Application.save`` returns its recordings): the embedded facade
projects them without reading them back from the log. Neither compared nor shown."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

Saved = tuple[tuple[int, Any], ...]
"""Events one append recorded, each with its log position."""


@dataclass(frozen=True)
class Recorded:
    """What one append recorded: its events with their log positions."""

    events: Saved = ()

    @property
    def positions(self) -> tuple[int, ...]:
        return tuple(position for position, _ in self.events)


def _saved() -> Any:
    return field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class Delivery:
    message_id: UUID
    mailbox_id: UUID
    uid: int
    uidvalidity: int
    size: int
    sha256: str
    modseq: int  # the log position of the event: strictly increasing per mailbox
    position: int = 0  # the log position of the command's last event (read-your-writes)
    duplicate: bool = False  # an earlier delivery with the same idempotency key answered
    source_uid: int | None = None  # a copy: the UID of the message copied (COPYUID)
    saved: Saved = _saved()  # the events of the append that placed it


@dataclass(frozen=True)
class Change:
    """What a command did: the log positions it appended (empty when nothing changed)."""

    positions: tuple[int, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    head: int = 0  # the log position the command decided on (set when nothing changed)
    saved: Saved = _saved()  # the events it appended

    @classmethod
    def of(cls, recorded: Recorded, extra: dict[str, Any] | None = None) -> Change:
        """The change one append made."""
        return cls(recorded.positions, extra if extra is not None else {},
                   saved=recorded.events)

    @property
    def changed(self) -> bool:
        return bool(self.positions)

    @property
    def modseq(self) -> int | None:
        return self.positions[-1] if self.positions else None

    @property
    def position(self) -> int:
        """The log position of the command's last event, or, when it appended nothing, the
        position its decision was based on: a reader that has caught up to it sees the
        command's outcome."""
        return self.positions[-1] if self.positions else self.head


@dataclass(frozen=True)
class Upload:
    """An upload begun: send its chunks to ``message_id`` (``append_chunk``), then
    ``complete_upload``."""

    message_id: UUID
    mailbox_id: UUID
    position: int  # the log position of the upload's first event
    saved: Saved = _saved()


@dataclass(frozen=True)
class Reservation:
    """One extraction held for ``reservation_id`` until it is confirmed or released."""

    message_id: UUID
    reservation_id: UUID
    position: int  # the log position of the reservation
    saved: Saved = _saved()
