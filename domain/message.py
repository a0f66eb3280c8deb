"""The Message aggregate: one message's lifecycle.

delivered (or upload begun → chunks appended → upload completed) → flags / labels / moves →
soft-deleted ↔ restored → expunged; extraction counts against the extraction policy and a
count-limited message expires when its count reaches the limit.

Every event after creation carries where the message is and what it is (account, mailbox,
UID, size, flags, labels, state) so that no projector ever reads back (James' rule).
Personal data (envelope headers, inline body) travels only in the ``personal`` field of
``Delivered`` / ``UploadCompleted``: one clearly separated part of the event that can be sealed
with a per-message key (crypto-shredding).

``Arrival`` (the fields an arrival records) is in ``domain.arrival``. The events stay nested
in the aggregate, in this module, whatever its length: their topics
(``domain.message:Message.Delivered``, ...) are in every stored log forever.
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
from domain.errors import ExtractionRefused, InvalidCommand, InvalidState
from domain.personal import Personal
from domain.values import ExtractionPolicy, MessageState

__all__ = ["ARRIVAL_FIELDS", "LISTED_STATES", "Arrival", "Arrived", "Message", "Placed",
           "Written", "with_sealed_digest"]

LISTED_STATES = frozenset({MessageState.ACTIVE.value, MessageState.EXPIRED.value})


class Message(MailAggregate):
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
                _reservations(aggregate).pop(self.reservation_id, None)
            super().apply(aggregate)

    class ExtractionReserved(Aggregate.Event):
        """An extraction is under way: it holds one of the policy's extractions until it is
        confirmed (``Extracted``), released, or lapses at ``until``."""

        account_id: UUID
        reservation_id: UUID
        until: datetime

        def apply(self, aggregate: Any) -> None:
            _reservations(aggregate)[self.reservation_id] = self.until

    class ExtractionReleased(Aggregate.Event):
        """An extraction failed before its bytes were written: it does not count."""

        account_id: UUID
        reservation_id: UUID
        reason: str

        def apply(self, aggregate: Any) -> None:
            _reservations(aggregate).pop(self.reservation_id, None)

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

    # -- helpers --------------------------------------------------------------------------
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

    # -- commands -----------------------------------------------------------------------
    def append_chunk(self, index: int, size: int, sha256: str) -> None:
        self._require(MessageState.INCOMPLETE)
        if index != len(self.upload_chunks):
            raise InvalidCommand(f"index: expected chunk {len(self.upload_chunks)}, got {index}")
        self.trigger_event(self.UploadChunkAppended, index=index, size=size, sha256=sha256)

    def complete_upload(self, arrival: Arrival) -> None:
        self._require(MessageState.INCOMPLETE)
        self.trigger_event(self.UploadCompleted, **arrival.event_fields())

    def change_flags(self, new: frozenset[str]) -> bool:
        self._require(MessageState.ACTIVE, MessageState.EXPIRED)
        if new == self.flags:
            return False
        self.trigger_event(
            self.FlagsChanged, old_flags=sorted(self.flags), **self._where(flags=new)
        )
        return True

    def change_labels(self, new: frozenset[str]) -> bool:
        self._require(MessageState.ACTIVE, MessageState.EXPIRED)
        if new == self.labels:
            return False
        self.trigger_event(
            self.LabelsChanged, old_labels=sorted(self.labels), **self._where(labels=new)
        )
        return True

    def move(self, to_mailbox_id: UUID, to_uid: int, to_uidvalidity: int) -> None:
        self._require(MessageState.ACTIVE, MessageState.EXPIRED)
        self.trigger_event(
            self.Moved,
            from_mailbox_id=self.mailbox_id,
            from_uid=self.uid,
            uidvalidity=to_uidvalidity,
            sha256="",  # sealed (ADR 0081, ADR 0099)
            address=self.address,
            inline=self.inline,
            facts=self.facts,
            personal=with_sealed_digest(self.personal, self.sha256),
            policy=self.policy.as_dict(),
            extract_count=self.extract_count,
            **self._where(mailbox_id=to_mailbox_id, uid=to_uid),
        )

    def soft_delete(self, purge_after: datetime) -> bool:
        if self.state == MessageState.DELETED.value:
            return False
        self._require(MessageState.ACTIVE, MessageState.EXPIRED)
        self.trigger_event(
            self.Deleted, purge_after=purge_after, **self._where(state=MessageState.DELETED.value)
        )
        return True

    def restore(self, now: datetime) -> bool:
        if self.state in LISTED_STATES:
            return False
        self._require(MessageState.DELETED)
        state = MessageState.EXPIRED if self._policy_exhausted(now) else MessageState.ACTIVE
        self.trigger_event(self.Restored, **self._where(state=state.value))
        return True

    def expunge(self, purge_after: datetime) -> bool:
        if self.state == MessageState.EXPUNGED.value:
            return False
        self._require(MessageState.ACTIVE, MessageState.EXPIRED, MessageState.DELETED)
        self.trigger_event(
            self.Expunged,
            purge_after=purge_after,
            old_state=self.state,
            **self._where(state=MessageState.EXPUNGED.value),
        )
        return True

    def expire(self, now: datetime) -> bool:
        """The extract-until date has passed: state expired from that date on."""
        p = self.policy
        if self.state != MessageState.ACTIVE.value or p.kind != "until" or p.until is None \
                or p.until > now:
            return False
        self.trigger_event(self.Expired, since=p.until, old_state=self.state,
                           **self._where(state=MessageState.EXPIRED.value))
        return True

    def payloads_referred(self) -> list[str]:
        """Every payload this message refers to: its content unless inline, upload chunks."""
        payloads = list(dict.fromkeys(self.upload_chunks))
        if self.address and not self.inline and self.address not in payloads:
            payloads.insert(0, self.address)
        return payloads

    def purge(self, reason: str, queue: str = "", since: datetime | None = None) -> bool:
        """Purged now (the caller decided it is due); False if it was purged already."""
        if self.state == MessageState.PURGED.value:
            return False
        payloads = self.payloads_referred()
        self.trigger_event(
            self.Purged, queue=queue, since=since, reason=reason, old_state=self.state,
            inline=self.inline, payloads=payloads,
            **self._where(state=MessageState.PURGED.value),
        )
        return True

    def _policy_exhausted(self, now: datetime, count: int | None = None) -> bool:
        p = self.policy
        n = self.extract_count if count is None else count
        if p.kind == "count":
            return p.limit is not None and n >= p.limit
        if p.kind == "until":
            return p.until is not None and now > p.until
        return False

    def _held(self, now: datetime, but: UUID | None = None) -> int:
        """Reservations that have not lapsed (other than ``but``)."""
        return sum(1 for r, until in _reservations(self).items() if until > now and r != but)

    def _refuse_unless_extractable(self, now: datetime, held: int) -> None:
        if self.state == MessageState.EXPIRED.value or (
            self.state == MessageState.ACTIVE.value
            and self._policy_exhausted(now, self.extract_count + held)
        ):
            raise ExtractionRefused(f"message {self.id}: extraction refused: {self._refusal(now)}")
        self._require(MessageState.ACTIVE)

    def extract(self, now: datetime, reservation_id: UUID | None = None) -> None:
        """Counts one extraction against the policy, or refuses with the reason. With
        ``reservation_id`` it confirms that reservation (the bytes were written): a
        reservation that has not lapsed always fits, one that lapsed only if the policy
        still allows one more beside the others under way."""
        if reservation_id is not None and reservation_id not in _reservations(self):
            raise InvalidState(f"message {self.id}: no extraction reservation "
                               f"{reservation_id} (released or confirmed already)")
        held = self._held(now, but=reservation_id)
        lapsed = reservation_id is not None and _reservations(self)[reservation_id] <= now
        if reservation_id is None or lapsed:
            self._refuse_unless_extractable(now, held)
        count = self.extract_count + 1
        p = self.policy
        remaining = None if p.kind != "count" or p.limit is None else p.limit - count
        state = MessageState.EXPIRED if remaining == 0 else MessageState.ACTIVE
        self.trigger_event(
            self.Extracted, count=count, remaining=remaining, reservation_id=reservation_id,
            at=now, **self._where(state=state.value)
        )

    def check_extractable(self, now: datetime) -> None:
        """Refuses (``ExtractionRefused``, ``InvalidState``) exactly as an extraction at
        ``now`` would, and counts nothing: the rule for a read of the content that is not an
        extraction (``Letterlog.body``)."""
        self._refuse_unless_extractable(now, self._held(now))

    def reserve_extraction(self, reservation_id: UUID, now: datetime, until: datetime) -> None:
        """Holds one extraction for ``reservation_id`` until ``until``, or refuses: never
        more reservations and counted extractions together than the policy allows."""
        self._refuse_unless_extractable(now, self._held(now))
        self.trigger_event(self.ExtractionReserved, account_id=self.account_id,
                           reservation_id=reservation_id, until=until)

    def release_extraction(self, reservation_id: UUID, reason: str) -> bool:
        """Gives a reservation back (nothing was extracted); False if it is not held."""
        if reservation_id not in _reservations(self):
            return False
        self.trigger_event(self.ExtractionReleased, account_id=self.account_id,
                           reservation_id=reservation_id, reason=reason[:500])
        return True

    def _refusal(self, now: datetime) -> str:
        p = self.policy
        if p.kind == "count":
            return f"extraction limit of {p.limit} reached"
        if p.kind == "until" and p.until is not None:
            return f"extractable until {p.until.isoformat()} (now {now.isoformat()})"
        return "message expired"

    def set_policy(self, policy: ExtractionPolicy, now: datetime) -> bool:
        self._require(MessageState.ACTIVE, MessageState.EXPIRED)
        if policy == self.policy and self.state != MessageState.EXPIRED.value:
            return False
        expired_now = (policy.kind == "until" and policy.until is not None and now > policy.until)
        state = MessageState.EXPIRED if expired_now else MessageState.ACTIVE
        self.trigger_event(
            self.PolicyChanged,
            old_policy=self.policy.as_dict(),
            policy=policy.as_dict(),
            old_state=self.state,
            **self._where(state=state.value),
        )
        return True


def _reservations(aggregate: Any) -> dict[UUID, datetime]:
    """The reservations of a message (an aggregate rebuilt before they existed has none)."""
    found: dict[UUID, datetime] | None = getattr(aggregate, "reservations", None)
    if found is None:
        found = aggregate.reservations = {}
    return found


Arrived: TypeAlias = Message.Delivered | Message.UploadCompleted
"""A complete message arrived: the two events built from one ``Arrival``."""
Placed: TypeAlias = Arrived | Message.Changed
"""An event that says where a message is and what it is (every event after an arrival)."""
Written: TypeAlias = Arrived | Message.Moved
"""An event that carries a whole message row (its data and its personal part)."""
