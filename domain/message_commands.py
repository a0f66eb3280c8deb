"""The Message aggregate's commands but extraction: uploads, flags, labels, moves, soft
delete and restore, expunge, expiry, purge (mixed into ``domain.message.Message``; its
events stay nested there)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from domain.arrival import Arrival, with_sealed_digest
from domain.errors import InvalidCommand
from domain.message_fields import LISTED_STATES, MessageFields
from domain.values import MessageState

__all__ = ["MessageCommands"]


class MessageCommands(MessageFields):
    """What a message can be told to do (each triggers one of ``Message``'s events)."""

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
