"""The command side: one method per command. Decide, then record.

``Mailstore`` gathers the command handlers, split by concern around one unit of work:

- ``domain.delivery``: deliver, deliver_many, check, deliver_checked, uploads;
- ``domain.messages``: flag, label, move, copy, delete, restore, expunge, extract, policy;
- ``domain.mailboxes``: create, rename, delete mailboxes; subscriptions;
- ``domain.unit_of_work``: loading aggregates, saving a command's events in one atomic append,
  retrying on a concurrency conflict or a busy store.

Each method validates its command, loads the aggregates it needs, lets them check their rules
(raising a named error before any event exists), writes large payloads to the payload store,
then saves every new event of the command in one atomic append. A concurrency conflict
(another writer saved the same aggregate first) reloads and retries, so several processes can
share one event store without losing or duplicating a delivery.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from uuid import UUID

from eventsourcing.application import Application

from domain.access import AccessCommands
from domain.current import CurrentAggregates
from domain.delivery import (
    CheckedDelivery,
    DeliveryCommands,
    envelope_for_event,
    facts_for_event,
    new_message_id,
    thread_id_for,
)
from domain.mailboxes import MailboxCommands
from domain.messages import MessageCommands
from domain.payloads import INLINE_LIMIT
from domain.ports import PayloadStore
from domain.results import Change, Delivery
from domain.rfc5322 import MessageLimits
from domain.rulecommands import RuleCommands
from domain.unit_of_work import UnitOfWork, utcnow

__all__ = [
    "Change",
    "CheckedDelivery",
    "Delivery",
    "Mailstore",
    "envelope_for_event",
    "facts_for_event",
    "new_message_id",
    "thread_id_for",
    "utcnow",
]


class Mailstore(DeliveryCommands, MessageCommands, MailboxCommands, AccessCommands,
                RuleCommands):
    """The embedded command API over an eventsourcing Application and a payload store."""

    def __init__(
        self,
        app: Application[UUID],
        payloads: PayloadStore,
        *,
        limits: MessageLimits | None = None,
        inline_limit: int = INLINE_LIMIT,
        deleted_retention: timedelta = timedelta(days=30),
        clock: Callable[[], datetime] = utcnow,
        max_retries: int = 50,
        log_head: Callable[[], int | None] | None = None,
        reservation_ttl: timedelta = timedelta(minutes=10),
    ) -> None:
        uow = UnitOfWork(app, max_retries=max_retries, log_head=log_head)
        super().__init__(uow, payloads, limits=limits, inline_limit=inline_limit,
                         deleted_retention=deleted_retention, clock=clock,
                         reservation_ttl=reservation_ttl)

    @property
    def app(self) -> Application[UUID]:
        return self.uow.app

    @property
    def current(self) -> CurrentAggregates:
        return self.uow.current
