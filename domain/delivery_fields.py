"""What a delivery records about a message: its id (time-ordered), its thread, the facts and
the envelope for the event, and the whole ``Arrival`` of a ``Delivered`` or
``UploadCompleted`` event (``delivery_fields``), personal data in the sealed part only.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

import uuid_utils

from domain.account import Account
from domain.arrival import Arrival
from domain.extraction_policy import ExtractionPolicy
from domain.mailbox import Mailbox
from domain.personal import Personal
from domain.sealed_facts import reduced_media_type, sealed_description
from domain.speedups import uuid_of_int
from domain.values import name_uuid

if TYPE_CHECKING:
    from domain.rfc5322 import MessageFacts

__all__ = ["delivery_fields", "envelope_for_event", "facts_for_event", "new_message_id",
           "thread_id_for"]


def new_message_id() -> UUID:
    """Time-ordered (UUIDv7): label indexes and threads sort by it."""
    return uuid_of_int(uuid_utils.uuid7().int)


def thread_id_for(account_id: UUID, facts: MessageFacts, message_id: UUID) -> UUID:
    """The root of the References chain names the conversation (no read-back needed)."""
    env = facts.envelope
    root = (env.references[0] if env.references else None) or env.in_reply_to or env.message_id
    key = root if root else f"message:{message_id}"
    return name_uuid(f"thread:{account_id}:{key}")


def facts_for_event(facts: MessageFacts) -> dict[str, Any]:
    """What a delivery records about the message's structure (no personal data)."""
    return {
        "content_type": reduced_media_type(facts.content_type),  # the whole one sealed
        "part_count": facts.part_count,
        "depth": facts.depth,
        "has_attachments": facts.has_attachments,
        "defects": list(facts.defects),
        "line_ending": facts.line_ending,
        "header_bytes": facts.header_bytes,
        # only when a limit stopped the parse: the limits hit (their settings' names)
        **({"truncated": list(facts.truncated)} if facts.truncated else {}),
    }


def envelope_for_event(facts: MessageFacts) -> dict[str, Any]:
    """The personal part of the envelope: sealed with the message's key (crypto-shredding)."""
    env = facts.envelope
    return {
        "subject": env.subject,
        "from": env.from_,
        "to": list(env.to),
        "cc": list(env.cc),
        "date": env.date,
        "sent_at": env.sent_at,
        "message_id": env.message_id,
        "in_reply_to": env.in_reply_to,
        "references": list(env.references),
    }


def delivery_fields(
    account: Account,
    mailbox: Mailbox,
    uid: int,
    message_id: UUID,
    raw: bytes | None,
    facts: MessageFacts,
    address: str,
    *,
    labels: Sequence[str],
    flags: Sequence[str],
    policy: ExtractionPolicy,
    internal_date: datetime,
    smtp_envelope: dict[str, Any] | None = None,
) -> Arrival:
    """What a ``Delivered`` (or ``UploadCompleted``) event records about one message.
    ``address``: where the payload store keeps its bytes, ``""`` for a message that travels
    inline. The MTA's envelope, when there is one, goes into the sealed personal part, and
    so do the message's digest (ADR 0081, ADR 0099) and a media type the vocabulary reduced."""
    inline = not address
    return Arrival(
        account_id=account.id,
        mailbox_id=mailbox.id,
        uid=uid,
        uidvalidity=mailbox.uidvalidity,
        size=facts.size,
        sha256="",  # sealed (ADR 0099)
        inline=inline,
        internal_date=internal_date,
        flags=sorted(flags),
        labels=sorted(labels),
        policy=policy.as_dict(),
        thread_id=thread_id_for(account.id, facts, message_id),
        facts=facts_for_event(facts),
        personal=Personal({
            "envelope": envelope_for_event(facts),
            "attachment_names": list(facts.attachment_names),
            "body": raw if inline else None,
            **({"smtp_envelope": smtp_envelope} if smtp_envelope else {}),
            **sealed_description(facts.sha256, facts.content_type),
        }),
        address=address,
    )
