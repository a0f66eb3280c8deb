"""The DeliveryKey aggregate: an idempotency key, claimed by the delivery that used it first.

Its id is derived from the account and the key (`delivery_key_id`), so every delivery with
the same key for the same account tries to create the same aggregate, in the same atomic
append as the message. The log accepts one version 1 per aggregate id, so only the first
commits, whichever process or thread sends it, now or after a restart; a later one finds the
claim and answers with the first delivery's result (ADR 0015). The message keeps its own
time-ordered id (label indexes and threads sort by it).
"""

from __future__ import annotations

import hashlib
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from domain.aggregate import MailAggregate
from domain.values import name_uuid


def delivery_key_id(account_id: UUID, key: str) -> UUID:
    return name_uuid(f"delivery-key:{account_id}:{key}")


class DeliveryKey(MailAggregate):
    account_id: UUID
    message_id: UUID

    def __init__(self) -> None:
        """State is set by the creation event's ``apply``."""

    class Claimed(Aggregate.Created):
        """``key``: the idempotency key's SHA-256 (``sha256:<hex>``), never the key itself:
        a caller's key may hold personal data and the log keeps it for good (claims recorded
        before held the key as given)."""

        account_id: UUID
        key: str
        message_id: UUID

        def apply(self, aggregate: Any) -> None:
            aggregate.account_id = self.account_id
            aggregate.message_id = self.message_id

    @classmethod
    def claim(cls, account_id: UUID, key: str, message_id: UUID, *,
              key_id: UUID | None = None) -> DeliveryKey:
        """``key_id``: ``delivery_key_id(account_id, key)`` when the caller has it already
        (a delivery computes it to read the claim first)."""
        return cls._create(cls.Claimed, id=key_id or delivery_key_id(account_id, key),
                           account_id=account_id, key=key_digest(key), message_id=message_id)


def key_digest(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
