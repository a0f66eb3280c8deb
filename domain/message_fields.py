"""The Message aggregate's state, as its events set it, and what its command mixins may
call on it (``domain.message`` defines the aggregate and its nested events; the commands
are in ``domain.message_commands`` and ``domain.message_extraction``, mixed into it).

A mixin names the events it triggers, nested in ``Message``, by the class attributes
declared here for the type checker: the events stay in ``domain.message`` whatever its
length, since their topics (``domain.message:Message.Delivered``, ...) are in every stored
log forever.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar
from uuid import UUID

from domain.errors import InvalidState
from domain.extraction_policy import ExtractionPolicy
from domain.values import MessageState

__all__ = ["LISTED_STATES", "MessageFields"]

LISTED_STATES = frozenset({MessageState.ACTIVE.value, MessageState.EXPIRED.value})


class MessageFields:
    """The state of a message (set by ``Message``'s events)."""

    account_id: UUID
    mailbox_id: UUID | None
    uid: int
    uidvalidity: int
    size: int
    sha256: str  # the content's digest ("" once an erasure destroyed the key that sealed it)
    address: str  # where the payload store keeps a stored message ("": inline; ADR 0099)
    inline: bool
    internal_date: datetime
    flags: frozenset[str]
    labels: frozenset[str]
    policy: ExtractionPolicy
    thread_id: UUID
    extract_count: int  # extractions counted against the current policy
    extractions_total: int  # extractions to date (a new policy does not reset it)
    last_extracted_at: datetime | None
    reservations: dict[UUID, datetime]  # extractions under way -> when each lapses
    state: str
    state_since: datetime  # when the message entered its state (a purge TTL counts from it)
    personal: Mapping[str, Any]
    facts: dict[str, Any]
    upload_chunks: list[str]

    if TYPE_CHECKING:  # Message's, for the mixins
        UploadChunkAppended: ClassVar[type[Any]]
        UploadCompleted: ClassVar[type[Any]]
        FlagsChanged: ClassVar[type[Any]]
        LabelsChanged: ClassVar[type[Any]]
        Moved: ClassVar[type[Any]]
        Deleted: ClassVar[type[Any]]
        Restored: ClassVar[type[Any]]
        Expunged: ClassVar[type[Any]]
        Extracted: ClassVar[type[Any]]
        ExtractionReserved: ClassVar[type[Any]]
        ExtractionReleased: ClassVar[type[Any]]
        PolicyChanged: ClassVar[type[Any]]
        Expired: ClassVar[type[Any]]
        Purged: ClassVar[type[Any]]

        @property
        def id(self) -> UUID: ...

        def trigger_event(self, event_class: Any, **kwargs: Any) -> None: ...

    def _where(self, *, mailbox_id: UUID | None = None, uid: int | None = None,
               flags: frozenset[str] | None = None, labels: frozenset[str] | None = None,
               state: str | None = None) -> dict[str, Any]:
        """The fields every ``Changed`` event carries, as they are after the change."""
        return {
            "account_id": self.account_id,
            "mailbox_id": self.mailbox_id if mailbox_id is None else mailbox_id,
            "uid": self.uid if uid is None else uid,
            "size": self.size,
            "internal_date": self.internal_date,
            "thread_id": self.thread_id,
            "flags": sorted(self.flags if flags is None else flags),
            "labels": sorted(self.labels if labels is None else labels),
            "state": self.state if state is None else state,
        }

    def _require(self, *states: MessageState) -> None:
        if self.state not in {s.value for s in states}:
            needs = "/".join(s.value for s in states)
            raise InvalidState(f"message {self.id} is {self.state}; needs {needs}")

    @property
    def is_listed(self) -> bool:
        return self.state in LISTED_STATES

    def _policy_exhausted(self, now: datetime, count: int | None = None) -> bool:
        p = self.policy
        n = self.extract_count if count is None else count
        if p.kind == "count":
            return p.limit is not None and n >= p.limit
        if p.kind == "until":
            return p.until is not None and now > p.until
        return False
