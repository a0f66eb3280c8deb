"""What a complete message records when it arrives (``Arrival``: the field group the
``Message`` aggregate's ``Delivered`` and ``UploadCompleted`` share), how an arrival sets
the aggregate's state, and the upcasters of the events that carry its ``facts``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any
from uuid import UUID

from domain.extraction_policy import ExtractionPolicy
from domain.personal import Personal
from domain.rfc5322.defect_upcasting import facts_without_text
from domain.sealed_facts import digest, reduce_facts
from domain.values import MessageState

__all__ = ["ARRIVAL_FIELDS", "Arrival", "with_sealed_digest"]


@dataclass(frozen=True)
class Arrival:
    """What a complete message records when it arrives: the fields ``Delivered`` and
    ``UploadCompleted`` share (both events are built from it and declare no field of their
    own, so the two cannot drift apart). ``copied_from`` is the source of a copy."""

    account_id: UUID
    mailbox_id: UUID
    uid: int
    uidvalidity: int
    size: int
    sha256: str
    inline: bool
    internal_date: datetime
    flags: list[str]
    labels: list[str]
    policy: dict[str, Any]
    thread_id: UUID
    facts: dict[str, Any]
    personal: Mapping[str, Any]
    copied_from: UUID | None = None
    address: str = ""  # where the payload store keeps a stored message ("": inline; ADR 0099)

    def event_fields(self) -> dict[str, Any]:
        """The fields as keyword arguments of ``Delivered`` / ``UploadCompleted`` (shallow:
        the values are shared, not copied)."""
        return {name: getattr(self, name) for name in ARRIVAL_FIELDS}


ARRIVAL_FIELDS = tuple(f.name for f in fields(Arrival))


def _defects_without_text(state: dict[str, Any]) -> None:
    """``upcast_v1_v2`` of the events that carry ``facts``: version 1 recorded defects with
    text the parser quoted (often a header's value: a file name, a display name), outside
    the seal; as such an event is read its defects keep only their class and header (ADR
    0040). The log keeps the old text: it is immutable."""
    if "facts" in state:
        state["facts"] = facts_without_text(state["facts"])


def _media_type_reduced(state: dict[str, Any]) -> None:
    """``upcast_v2_v3`` of the events that carry ``facts``: version 2 kept the message's own
    media type outside the seal; as such an event is read its ``content_type`` is reduced to
    the fixed vocabulary (ADR 0081). The log keeps the old text: it is immutable."""
    if "facts" in state and isinstance(state["facts"], dict):
        state["facts"] = reduce_facts(state["facts"])


def _payload_address(state: dict[str, Any]) -> None:
    """``upcast_v3_v4`` of the events that carry a message's data: version 3 named a stored
    message's payload by its content's SHA-256, in ``sha256``; version 4 names it by
    ``address`` (random since ADR 0099) and seals the digest. An old event's address is its
    SHA-256 (where its payload is kept); its plain ``sha256`` stays as the log has it."""
    state["address"] = "" if state.get("inline", True) else state.get("sha256", "")


def with_sealed_digest(personal: Mapping[str, Any], sha256: str) -> Personal:
    """``personal`` holding the message's digest (one delivered before ADR 0081, or a stored
    one before ADR 0099, had it outside the seal only), the same key kept: what a move or a
    copy seals."""
    p = personal if isinstance(personal, Personal) else Personal(personal)
    if not sha256 or p.get("sha256") == sha256 or p.shredded:
        return p
    return Personal({**p.data, "sha256": sha256}, key_id=p.key_id, key=p.key)


def _delivery_state(aggregate: Any, e: Arrival, timestamp: datetime) -> None:
    aggregate.account_id = e.account_id
    aggregate.mailbox_id = e.mailbox_id
    aggregate.uid = e.uid
    aggregate.uidvalidity = e.uidvalidity
    aggregate.size = e.size
    aggregate.sha256 = digest(e.sha256, e.personal)
    aggregate.address = e.address
    aggregate.inline = e.inline
    aggregate.internal_date = e.internal_date
    aggregate.flags = frozenset(e.flags)
    aggregate.labels = frozenset(e.labels)
    aggregate.policy = ExtractionPolicy.from_dict(e.policy)
    aggregate.thread_id = e.thread_id
    aggregate.extract_count = 0
    aggregate.extractions_total = 0
    aggregate.last_extracted_at = None
    aggregate.reservations = {}
    aggregate.state = MessageState.ACTIVE.value
    aggregate.state_since = timestamp
    aggregate.personal = e.personal
    aggregate.facts = e.facts
