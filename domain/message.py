"""The Message aggregate: one message's lifecycle.

delivered (or upload begun → chunks appended → upload completed) → flags / labels / moves →
soft-deleted ↔ restored → expunged; extraction counts against the extraction policy and a
count-limited message expires when its count reaches the limit.

Every event after creation carries where the message is and what it is (account, mailbox,
UID, size, flags, labels, state) so that no projector ever reads back (James' rule).
Personal data (envelope headers, inline body) travels only in the ``personal`` field of
``Delivered`` / ``UploadCompleted``: one clearly separated part of the event that can be sealed
with a per-message key (crypto-shredding).

``Arrival`` (the fields an arrival records) is in ``domain.arrival``; the state and the
commands in ``domain.message_fields``, ``domain.message_commands`` and
``domain.message_extraction``. The events stay nested in the aggregate, in this module: their
topics (``domain.message:Message.Delivered``, ...) are in every stored log forever.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeAlias
from uuid import UUID

from eventsourcing.domain import Aggregate

from domain.aggregate import MailAggregate
from domain.arrival import (
    ARRIVAL_FIELDS,
    Arrival,
    _defects_without_text,
    _delivery_state,
    _media_type_reduced,
    _payload_address,
    with_sealed_digest,
)
from domain.extraction_policy import ExtractionPolicy
from domain.message_commands import MessageCommands
from domain.message_extraction import MessageExtraction, reservations_of
from domain.message_fields import LISTED_STATES
from domain.personal import Personal
from domain.values import MessageState

__all__ = ["ARRIVAL_FIELDS", "LISTED_STATES", "Arrival", "Arrived", "Message", "Placed",
           "Written", "with_sealed_digest"]


class Message(MailAggregate, MessageCommands, MessageExtraction):
    """One message: its state (``MessageFields``), its events (nested here), its commands
    (``MessageCommands``, ``MessageExtraction``)."""

    def __init__(self) -> None:
        """State is set by the creation event's ``apply``."""

    def _copy_containers(self, state: dict[str, Any]) -> None:
        if "upload_chunks" in state:
            state["upload_chunks"] = list(self.upload_chunks)
        if "reservations" in state:
            state["reservations"] = dict(self.reservations)

    class Delivered(Arrival, Aggregate.Created):
        """A complete message arrived (also a copy of another message: ``copied_from``).

        Version 2: ``facts.defects`` hold no text of the message (ADR 0040). Version 3:
        ``facts.content_type`` is of a fixed vocabulary, an inline message's ``sha256`` is
        sealed (ADR 0081). Version 4: every message's ``sha256`` is sealed, a stored one's
        payload named by ``address`` (ADR 0099)."""

        class_version = 4
        upcast_v1_v2 = staticmethod(_defects_without_text)
        upcast_v2_v3 = staticmethod(_media_type_reduced)
        upcast_v3_v4 = staticmethod(_payload_address)

        def apply(self, aggregate: Any) -> None:
            _delivery_state(aggregate, self, self.timestamp)
            aggregate.upload_chunks = []

    class UploadBegun(Aggregate.Created):
        account_id: UUID
        mailbox_id: UUID
        internal_date: datetime
        flags: list[str]
        labels: list[str]
        policy: dict[str, Any]

        def apply(self, aggregate: Any) -> None:
            aggregate.account_id = self.account_id
            aggregate.mailbox_id = self.mailbox_id
            aggregate.uid = 0
            aggregate.uidvalidity = 0
            aggregate.size = 0
            aggregate.sha256 = ""
            aggregate.address = ""
            aggregate.inline = False
            aggregate.internal_date = self.internal_date
            aggregate.flags = frozenset(self.flags)
            aggregate.labels = frozenset(self.labels)
            aggregate.policy = ExtractionPolicy.from_dict(self.policy)
            aggregate.thread_id = self.originator_id
            aggregate.extract_count = 0
            aggregate.extractions_total = 0
            aggregate.last_extracted_at = None
            aggregate.reservations = {}
            aggregate.state = MessageState.INCOMPLETE.value
            aggregate.state_since = self.timestamp
            aggregate.personal = {}
            aggregate.facts = {}
            aggregate.upload_chunks = []

    class UploadChunkAppended(Aggregate.Event):
        index: int
        size: int
        sha256: str  # the chunk's address in the payload store (random since ADR 0099)

        def apply(self, aggregate: Any) -> None:
            aggregate.upload_chunks.append(self.sha256)
            aggregate.size += self.size

    class UploadCompleted(Arrival, Aggregate.Event):
        """The upload is whole: the fields of ``Delivered``; from now on it is a message.

        Version 2: ``facts.defects`` hold no text of the message (ADR 0040). Version 3:
        ``facts.content_type`` is of a fixed vocabulary, an inline message's ``sha256`` is
        sealed (ADR 0081). Version 4: every message's ``sha256`` is sealed, a stored one's
        payload named by ``address`` (ADR 0099)."""

        class_version = 4
        upcast_v1_v2 = staticmethod(_defects_without_text)
        upcast_v2_v3 = staticmethod(_media_type_reduced)
        upcast_v3_v4 = staticmethod(_payload_address)

        def apply(self, aggregate: Any) -> None:
            _delivery_state(aggregate, self, self.timestamp)

    class Changed(Aggregate.Event):
        """Base of every later event: where the message is and what it is, after the change."""

        account_id: UUID
        mailbox_id: UUID
        uid: int
        size: int
        internal_date: datetime
        thread_id: UUID
        flags: list[str]
        labels: list[str]
        state: str

        def apply(self, aggregate: Any) -> None:
            aggregate.flags = frozenset(self.flags)
            aggregate.labels = frozenset(self.labels)
            if aggregate.state != self.state:
                aggregate.state_since = self.timestamp
            aggregate.state = self.state

    class FlagsChanged(Changed):
        old_flags: list[str]

    class LabelsChanged(Changed):
        old_labels: list[str]

    class Moved(Changed):
        """Left ``from_mailbox_id``/``from_uid`` for ``mailbox_id``/``uid`` (a new UID).

        Carries the message's data (and its personal part) so that the projector can write
        the new row without reading the old one back.

        Version 2: ``facts.defects`` hold no text of the message (ADR 0040). Version 3:
        ``facts.content_type`` is of a fixed vocabulary, an inline message's ``sha256`` is
        sealed (ADR 0081). Version 4: every message's ``sha256`` is sealed, a stored one's
        payload named by ``address`` (ADR 0099).
        """

        class_version = 4
        upcast_v1_v2 = staticmethod(_defects_without_text)
        upcast_v2_v3 = staticmethod(_media_type_reduced)
        upcast_v3_v4 = staticmethod(_payload_address)

        from_mailbox_id: UUID
        from_uid: int
        uidvalidity: int
        sha256: str
        inline: bool
        facts: dict[str, Any]
        personal: Mapping[str, Any]
        policy: dict[str, Any]
        extract_count: int
        address: str = ""

        def apply(self, aggregate: Any) -> None:
            aggregate.mailbox_id = self.mailbox_id
            aggregate.uid = self.uid
            aggregate.uidvalidity = self.uidvalidity
            super().apply(aggregate)

    class Deleted(Changed):
        """Soft delete: hidden from the mailbox, restorable until purged after ``purge_after``."""

        purge_after: datetime

    class Restored(Changed):
        pass

    class Expunged(Changed):
        """Removed from its mailbox for good (its UID is retired); purge may follow at once."""

        purge_after: datetime
        old_state: str

    class Extracted(Changed):
        """One extraction counted: its bytes were written (confirming ``reservation_id``;
        None for extractions counted without a reservation). ``at``: when (None in events
        stored before it was recorded: the event's timestamp stands for it).

        Version 2 added ``reservation_id`` and ``at``; ``upcast_v1_v2`` gives a version 1
        event (stored without them) None for both as it is read."""

        count: int
        remaining: int | None
        reservation_id: UUID | None
        at: datetime | None

        class_version = 2

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["reservation_id"] = None
            state["at"] = None

        def apply(self, aggregate: Any) -> None:
            aggregate.extract_count = self.count
            aggregate.extractions_total = getattr(aggregate, "extractions_total", 0) + 1
            aggregate.last_extracted_at = self.at or self.timestamp
            if self.reservation_id is not None:
                reservations_of(aggregate).pop(self.reservation_id, None)
            super().apply(aggregate)

    class ExtractionReserved(Aggregate.Event):
        """An extraction is under way: it holds one of the policy's extractions until it is
        confirmed (``Extracted``), released, or lapses at ``until``."""

        account_id: UUID
        reservation_id: UUID
        until: datetime

        def apply(self, aggregate: Any) -> None:
            reservations_of(aggregate)[self.reservation_id] = self.until

    class ExtractionReleased(Aggregate.Event):
        """An extraction failed before its bytes were written: it does not count."""

        account_id: UUID
        reservation_id: UUID
        reason: str

        def apply(self, aggregate: Any) -> None:
            reservations_of(aggregate).pop(self.reservation_id, None)

    class PolicyChanged(Changed):
        old_policy: dict[str, Any]
        policy: dict[str, Any]
        old_state: str

        def apply(self, aggregate: Any) -> None:
            aggregate.policy = ExtractionPolicy.from_dict(self.policy)
            aggregate.extract_count = 0
            super().apply(aggregate)
            aggregate.state_since = self.timestamp  # a new policy restarts any countdown

    class Expired(Changed):
        """Its extract-until date passed (found by the expiring purge job): no longer
        extractable from ``since`` (the date), when the expired countdown starts."""

        since: datetime
        old_state: str

        def apply(self, aggregate: Any) -> None:
            super().apply(aggregate)
            aggregate.state_since = self.since

    class Purged(Changed):
        """Gone for good: rows dropped, payload references released, its data key destroyed.

        No personal data. ``queue``/``since`` name the purge-queue entry that led here (empty
        for an erasure); ``old_state`` is the state it left; ``payloads`` every payload it
        referred to (its content unless inline, and upload chunks).
        """

        queue: str
        since: datetime | None
        reason: str
        old_state: str
        inline: bool
        payloads: list[str]

        def apply(self, aggregate: Any) -> None:
            super().apply(aggregate)
            # its key is about to be destroyed: a copy of the aggregate already in memory
            # (read before the purge) must not go on showing what a replay can no longer
            # open, yet must still name the key, so that the erasure can destroy it
            personal = aggregate.personal
            aggregate.personal = Personal(key_id=getattr(personal, "key_id", None),
                                          shredded=True)
            if aggregate.address != aggregate.sha256:  # its digest was sealed (ADR 0081,
                aggregate.sha256 = ""  # ADR 0099): gone with the key

    # -- construction -------------------------------------------------------------------
    @classmethod
    def deliver(cls, message_id: UUID, arrival: Arrival) -> Message:
        return cls._create(cls.Delivered, id=message_id, **arrival.event_fields())

    @classmethod
    def begin_upload(cls, message_id: UUID, *, account_id: UUID, mailbox_id: UUID,
                     internal_date: datetime, flags: list[str], labels: list[str],
                     policy: dict[str, Any]) -> Message:
        return cls._create(cls.UploadBegun, id=message_id, account_id=account_id,
                           mailbox_id=mailbox_id, internal_date=internal_date, flags=flags,
                           labels=labels, policy=policy)


Arrived: TypeAlias = Message.Delivered | Message.UploadCompleted
"""A complete message arrived: the two events built from one ``Arrival``."""
Placed: TypeAlias = Arrived | Message.Changed
"""An event that says where a message is and what it is (every event after an arrival)."""
Written: TypeAlias = Arrived | Message.Moved
"""An event that carries a whole message row (its data and its personal part)."""
