"""The Message aggregate's extraction: counted against its policy, reserved while the bytes
are written, confirmed or released; a new policy (mixed into ``domain.message.Message``;
its events stay nested there)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from domain.errors import ExtractionRefused, InvalidState
from domain.extraction_policy import ExtractionPolicy
from domain.message_fields import MessageFields
from domain.values import MessageState

__all__ = ["MessageExtraction", "reservations_of"]


class MessageExtraction(MessageFields):
    """Extraction under the message's policy."""

    def _held(self, now: datetime, but: UUID | None = None) -> int:
        """Reservations that have not lapsed (other than ``but``)."""
        return sum(1 for r, until in reservations_of(self).items() if until > now and r != but)

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
        if reservation_id is not None and reservation_id not in reservations_of(self):
            raise InvalidState(f"message {self.id}: no extraction reservation "
                               f"{reservation_id} (released or confirmed already)")
        held = self._held(now, but=reservation_id)
        lapsed = reservation_id is not None and reservations_of(self)[reservation_id] <= now
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
        if reservation_id not in reservations_of(self):
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


def reservations_of(aggregate: Any) -> dict[UUID, datetime]:
    """The reservations of a message (an aggregate rebuilt before they existed has none)."""
    found: dict[UUID, datetime] | None = getattr(aggregate, "reservations", None)
    if found is None:
        found = aggregate.reservations = {}
    return found
