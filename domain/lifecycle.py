"""The data lifecycle's rules: when a queued message is due, and what its purge job does.

Purge queues (Sterling Global Mailbox) hold *hints*: a message id under the time from which
a TTL counts (``since``). A job takes the entries of its queue whose ``since`` is at least
its TTL old (the *horizon*), then checks each against the message's current state
(``verdict``), because the state may have changed since the entry was written: a restored
message, a relaxed policy, a new countdown. Only the verdict acts.

=============  ==========================================  ==================================
queue          the entry's ``since``                       verdict ``purge`` / ``expire`` if
=============  ==========================================  ==================================
expiring       the policy's until date                     still active, until still passed
                                                           -> ``expire``
expired        when it became unextractable                still expired since before the
                                                           horizon
deleted        the soft delete or expunge                  still deleted / expunged since
                                                           before the horizon
incomplete     the upload's start                          still incomplete since before the
                                                           horizon
=============  ==========================================  ==================================

Payloads are not queued by message: a payload is reclaimed when nothing refers to it and it
was neither written, re-used, nor released for its grace period (see ``adapters/lifecycle``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from domain.values import MessageState

if TYPE_CHECKING:
    from domain.message import Message

QUEUE_DELETED = "deleted"
QUEUE_EXPIRED = "expired"
QUEUE_EXPIRING = "expiring"
QUEUE_INCOMPLETE = "incomplete"
QUEUE_PAYLOADS = "payloads"
MESSAGE_QUEUES = (QUEUE_EXPIRING, QUEUE_EXPIRED, QUEUE_DELETED, QUEUE_INCOMPLETE)
ALL_QUEUES = (*MESSAGE_QUEUES, QUEUE_PAYLOADS)

Verdict = Literal["purge", "expire", "keep"]

_STATES: dict[str, frozenset[str]] = {
    QUEUE_EXPIRED: frozenset({MessageState.EXPIRED.value}),
    QUEUE_DELETED: frozenset({MessageState.DELETED.value, MessageState.EXPUNGED.value}),
    QUEUE_INCOMPLETE: frozenset({MessageState.INCOMPLETE.value}),
}


@dataclass(frozen=True)
class Retention:
    """Each queue's TTL (how long after ``since`` an entry is due) and the peek-back window."""

    expired: timedelta = timedelta(days=30)
    deleted: timedelta = timedelta(days=30)
    incomplete: timedelta = timedelta(days=2)
    payloads: timedelta = timedelta(hours=12)
    peek_back: timedelta = timedelta(hours=1)

    def ttl(self, queue: str) -> timedelta:
        if queue == QUEUE_EXPIRING:
            return timedelta(0)
        if queue not in ALL_QUEUES:
            raise ValueError(f"queue: {queue!r} is not one of {', '.join(ALL_QUEUES)}")
        ttl: timedelta = getattr(self, queue)
        return ttl

    def horizon(self, queue: str, now: datetime) -> datetime:
        """Entries whose ``since`` is at or before this are due at ``now``."""
        return now - self.ttl(queue)


def verdict(message: Message, queue: str, now: datetime, retention: Retention) -> Verdict:
    """What the ``queue`` job does with ``message`` at ``now``: the double check."""
    if message.state == MessageState.PURGED.value:
        return "keep"
    if queue == QUEUE_EXPIRING:
        p = message.policy
        due = (message.state == MessageState.ACTIVE.value and p.kind == "until"
               and p.until is not None and p.until <= now)
        return "expire" if due else "keep"
    states = _STATES.get(queue)
    if states is None:
        raise ValueError(f"queue: {queue!r} holds no messages")
    if message.state in states and message.state_since <= retention.horizon(queue, now):
        return "purge"
    return "keep"
