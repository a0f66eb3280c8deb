"""What a command returns: a ``Delivery`` (a message placed in a mailbox), an ``Upload``
(one begun), a ``Reservation`` (an extraction held) or a ``Change``.

All carry ``position``: wait until a read model (or a stream worker) has applied the log up
to it, and it shows the command's outcome."""

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
    position: int = 0  # the log position of the command's last event (read-your-writes)
    duplicate: bool = False  # an earlier delivery with the same idempotency key answered
    source_uid: int | None = None  # a copy: the UID of the message copied (COPYUID)


@dataclass(frozen=True)
class Change:
    """What a command did: the log positions it appended (empty when nothing changed)."""

    positions: tuple[int, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    head: int = 0  # the log position the command decided on (set when nothing changed)

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


@dataclass(frozen=True)
class Reservation:
    """One extraction held for ``reservation_id`` until it is confirmed or released."""

    message_id: UUID
    reservation_id: UUID
    position: int  # the log position of the reservation
