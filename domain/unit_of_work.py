"""One command's unit of work: load the aggregates, decide, save every new event in one append.

What a command saved (events with their log positions) is in what it returns: ``save``
returns a ``Recorded`` (as eventsourcing's ``Application.save`` returns its recordings),
which the command puts in its result (``saved``); the embedded facade hands it to the read
models as an explicit step after each command; the domain never calls back up.

``UnitOfWork.run`` runs a command's attempt; a concurrency conflict (another writer saved one
of its aggregates first) or a busy event store (another process holds the write lock) means
nothing was written, so the attempt is run again on fresh aggregates (tenacity: after a short
random wait that grows with each try, ``conflict_wait``; at most ``max_retries`` tries).
Aggregates come from the current-aggregate cache when the log has not moved
(``domain.current``), else from the log.

``Commands`` is what every group of command handlers shares (``domain.delivery``,
``domain.messages``, ``domain.mailboxes``): the unit of work, the payload store, the clock and
the limits.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import IntegrityError
from tenacity import (
    RetryCallState,
    RetryError,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
)

from domain.account import Account
from domain.current import CurrentAggregates
from domain.delivery_key import DeliveryKey
from domain.errors import (
    AccountNotFound,
    InvalidState,
    MailboxNotFound,
    MessageNotFound,
    StoreBusy,
)
from domain.mailbox import Mailbox
from domain.message import Message
from domain.payloads import INLINE_LIMIT
from domain.ports import PayloadStore
from domain.quota import Limits, Quotas
from domain.results import Change, Recorded
from domain.rfc5322 import MessageLimits
from domain.values import Role, account_id_for

T = TypeVar("T")

Saved = Sequence[tuple[int, Any]]  # events just appended, with their log positions


def conflict_wait(state: RetryCallState) -> float:
    """Seconds to wait after the ``n``-th failed try of a command: random below n × 2 ms
    after a concurrency conflict, below n × 10 ms while another process holds the store's
    write lock (``StoreBusy``), so writers that collided do not try again in step."""
    error = state.outcome.exception() if state.outcome is not None else None
    step = 0.01 if isinstance(error, StoreBusy) else 0.002
    return random.uniform(0, step * state.attempt_number)


def _after_first(state: RetryCallState) -> float:
    """``conflict_wait`` for the tries after the first (``UnitOfWork.run`` made the first
    outside the retrying machinery): the ``n``-th of these is the command's ``n + 1``-th."""
    error = state.outcome.exception() if state.outcome is not None else None
    step = 0.01 if isinstance(error, StoreBusy) else 0.002
    return random.uniform(0, step * (state.attempt_number + 1))


def utcnow() -> datetime:
    return datetime.now(UTC)


class UnitOfWork:
    """Loads aggregates and saves a command's events atomically, retrying on conflicts."""

    def __init__(
        self,
        app: Application[UUID],
        *,
        max_retries: int = 50,
        log_head: Callable[[], int | None] | None = None,
    ) -> None:
        self.app = app
        self.max_retries = max_retries
        self._head = log_head or app.recorder.max_notification_id
        self.current = CurrentAggregates(self._head)
        # Around every append: a delivery agent's deadline (``adapters.mta``) refuses to start
        # an append once it has passed, and waits for one in progress to finish.
        self.append_guard: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext
        # After every append, with what it saved: the quota ledger folds it (domain.quota).
        self.after_save: Callable[[Saved], None] | None = None

    def allocated_to(self, mailbox_id: UUID) -> list[UUID]:
        """Every message ever given a UID in the mailbox, read from the mailbox's own events
        in the log (never a read model, which may lag): a superset of what it holds now, so
        a caller checks each message's aggregate."""
        found: dict[UUID, None] = {}
        to_event = self.app.mapper.to_domain_event
        for stored in self.app.recorder.select_events(mailbox_id):
            event = to_event(stored)
            if isinstance(event, Mailbox.UidsAllocated):
                found.update(dict.fromkeys(event.message_ids))
        return list(found)

    def read(self, fn: Callable[[], T]) -> T:
        """``fn``'s reads of aggregates through the current-aggregate cache (one query of
        the log's head), as a command's attempt reads them; nothing is saved."""
        with self.current.reading():
            return fn()

    def head(self) -> int:
        """The log's last position."""
        return int(self._head() or 0)

    def position_of(self, aggregate_id: UUID, version: int) -> int | None:
        """The log position of one event of an aggregate (None if the store cannot say)."""
        find = getattr(self.app, "position_of", None)
        return None if find is None else find(aggregate_id, version)

    def run(self, attempt: Callable[[], T]) -> T:
        """Runs ``attempt`` (load, decide, save) until it saves without a conflict (module
        docstring); ``InvalidState`` after ``max_retries`` tries that all met one. Any other
        error is raised as it is, at once.

        The first try runs on its own (nearly every command saves on it): the retrying
        machinery is only built once a try met a conflict, and it counts that try."""
        try:
            return self._try(attempt)
        except (IntegrityError, StoreBusy) as first:
            if self.max_retries <= 1:
                raise InvalidState(f"gave up after {self.max_retries} concurrency conflicts"
                                   ) from first
            time.sleep(random.uniform(0, 0.01 if isinstance(first, StoreBusy) else 0.002))
        retrying = Retrying(stop=stop_after_attempt(self.max_retries - 1), wait=_after_first,
                            retry=retry_if_exception_type((IntegrityError, StoreBusy)),
                            sleep=time.sleep)
        try:
            result: T = retrying(self._try, attempt)
        except RetryError as gave_up:
            raise InvalidState(f"gave up after {self.max_retries} concurrency conflicts"
                               ) from gave_up.last_attempt.exception()
        return result

    def _try(self, attempt: Callable[[], T]) -> T:
        """One try of a command, on the current aggregates."""
        self.current.begin()
        try:
            result = attempt()
            if isinstance(result, Change) and not result.positions:
                result = replace(result, head=self.head())
            return result
        except IntegrityError:
            # Someone else appended to one of our aggregates first: reload and decide again.
            self.current.drop()
            raise
        finally:
            self.current.end()

    def save(self, *aggregates: Any) -> Recorded:
        """One atomic append of the aggregates' new events; what it recorded."""
        try:
            with self.append_guard():
                recordings = self.app.save(*aggregates)
        except BaseException:
            self.current.drop()
            raise
        recorded = Recorded(tuple((r.notification.id, r.domain_event) for r in recordings))
        self.current.saved(aggregates, list(recorded.positions))
        if self.after_save is not None:
            self.after_save(recorded.events)
        return recorded

    def get(self, cls: type[T], aggregate_id: UUID, error: type[Exception], what: str) -> T:
        agg: Any = self.current.get(aggregate_id)
        if agg is not None:
            if not isinstance(agg, cls):
                raise error(f"{what} does not exist")
            return agg
        if self.current.absent(aggregate_id):
            raise error(f"{what} does not exist")
        try:
            agg = self.app.repository.get(aggregate_id)
        except AggregateNotFoundError:
            self.current.missing(aggregate_id)
            raise error(f"{what} does not exist") from None
        if not isinstance(agg, cls):
            raise error(f"{what} does not exist")
        return agg

    def message(self, message_id: UUID) -> Message:
        return self.get(Message, message_id, MessageNotFound, f"message {message_id}")

    def account(self, address: str) -> Account:
        acc_id = account_id_for(address)
        return self.get(Account, acc_id, AccountNotFound, f"account {address!r}")

    def account_by_id(self, account_id: UUID) -> Account:
        return self.get(Account, account_id, AccountNotFound, "account")

    def mailbox(self, mailbox_id: UUID) -> Mailbox:
        return self.get(Mailbox, mailbox_id, MailboxNotFound, f"mailbox {mailbox_id}")

    def claim_of(self, key_id: UUID) -> DeliveryKey | None:
        """The claim of an idempotency key, if a delivery has made it."""
        try:
            return self.get(DeliveryKey, key_id, KeyError, "delivery key")
        except KeyError:
            return None

    def first_version(self, message_id: UUID) -> Message:
        """A message as its first event left it (what its delivery reported)."""
        agg: Any = self.app.repository.get(message_id, version=1)
        if not isinstance(agg, Message):
            raise MessageNotFound(f"message {message_id} does not exist")
        return agg

    def account_or_open(self, address: str) -> tuple[Account, list[Any]]:
        """The account, opened with its INBOX on first use; and any new aggregates to save."""
        try:
            return self.account(address), []
        except AccountNotFound:
            account = Account.open(address)
            mailbox_id, uidvalidity = account.register_mailbox("INBOX", Role.INBOX)
            inbox = Mailbox.create(mailbox_id, account.id, "INBOX", Role.INBOX.value, uidvalidity)
            return account, [inbox]

    def mailbox_named(self, account: Account, name: str, fresh: list[Any]) -> Mailbox:
        mailbox_id, _, _ = account.mailbox(name)
        for agg in fresh:
            if isinstance(agg, Mailbox) and agg.id == mailbox_id:
                return agg
        return self.mailbox(mailbox_id)


class Commands:
    """What the command handlers share: the unit of work, payloads, limits and the clock."""

    # event rules (domain.rules): the bounded pattern matcher, set by the composition root,
    # and the time one filter search and one arrival's whole evaluation may take
    rule_matcher: Any = None
    rule_search_seconds: float = 0.05
    rule_budget_seconds: float = 0.5

    def __init__(
        self,
        uow: UnitOfWork,
        payloads: PayloadStore,
        *,
        limits: MessageLimits | None = None,
        inline_limit: int = INLINE_LIMIT,
        deleted_retention: timedelta = timedelta(days=30),
        clock: Callable[[], datetime] = utcnow,
        reservation_ttl: timedelta = timedelta(minutes=10),
    ) -> None:
        self.uow = uow
        self.reservation_ttl = reservation_ttl  # an extraction reservation lapses after it
        self.payloads = payloads
        self.limits = limits or MessageLimits()
        self.inline_limit = inline_limit
        self.deleted_retention = deleted_retention
        self.clock = clock
        self.quotas = Quotas(Limits(), None)  # bootstrap gives the default and a ledger

    # the aggregates a caller may look at (the command side's own views)
    def message(self, message_id: UUID) -> Message:
        return self.uow.message(message_id)

    def account(self, address: str) -> Account:
        return self.uow.account(address)

    def mailbox(self, mailbox_id: UUID) -> Mailbox:
        return self.uow.mailbox(mailbox_id)
