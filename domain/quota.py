"""Quotas: per-account limits on bytes and messages, and the usage they are checked against.

A limit is the account's own (``Account.QuotaSet``, set by command) or, where the account
has none, the store's default (a setting). ``UNLIMITED`` (0) is no limit; ``DEFAULT`` (-1)
in an account's own value means "the default setting applies".

Usage is what the ``counters`` read model counts: the account's listed messages (active or
expired) and their bytes. A soft-deleted message no longer counts; an expunge, a purge or
an erasure frees its room in the event that records it. The decision is taken on the
command side: ``UsageLedger`` folds the account's events up to the log's head before each
check (``usage_change`` is the fold), never a read model that may lag.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

from domain.errors import QuotaExceeded
from domain.message import LISTED_STATES, Message

UNLIMITED = 0
DEFAULT = -1


@dataclass(frozen=True)
class Limits:
    """Bytes and messages an account may hold (``UNLIMITED``: no limit)."""

    bytes: int = UNLIMITED
    messages: int = UNLIMITED

    @property
    def unlimited(self) -> bool:
        return self.bytes == UNLIMITED and self.messages == UNLIMITED

    def over(self, own: Limits) -> Limits:
        """``own`` (an account's values, ``DEFAULT`` where it has none) over these."""
        return Limits(self.bytes if own.bytes == DEFAULT else own.bytes,
                      self.messages if own.messages == DEFAULT else own.messages)


OWN_DEFAULT = Limits(DEFAULT, DEFAULT)


@dataclass(frozen=True)
class Usage:
    messages: int = 0
    bytes: int = 0

    def plus(self, messages: int, size: int) -> Usage:
        return Usage(self.messages + messages, self.bytes + size)


def usage_change(event: object) -> tuple[int, int]:
    """What ``event`` changes in its account's usage: (messages, bytes). The same rules as
    the counters' mailbox cells: only listed messages count."""
    kind = type(event)
    e: Any = event
    if kind is Message.Delivered or kind is Message.UploadCompleted:
        return 1, e.size
    if kind is Message.Deleted:
        return -1, -e.size
    if kind is Message.Restored:
        return (1, e.size) if e.state in LISTED_STATES else (0, 0)
    if kind is Message.PolicyChanged:
        before, after = e.old_state in LISTED_STATES, e.state in LISTED_STATES
        if before == after:
            return 0, 0
        return (1, e.size) if after else (-1, -e.size)
    if kind is Message.Expunged or kind is Message.Purged:
        return (-1, -e.size) if e.old_state in LISTED_STATES else (0, 0)
    return 0, 0


COUNTED = frozenset({Message.Delivered, Message.UploadCompleted, Message.Deleted,
                     Message.Restored, Message.PolicyChanged, Message.Expunged,
                     Message.Purged})


class UsageSource(Protocol):
    """The log as a quota ledger needs it (adapters provide it)."""

    def snapshot(self, account_id: UUID) -> tuple[int, Usage]:
        """A position and the account's usage up to it (e.g. from the counters read
        model at its tracked position; ``(0, Usage())`` when there is none)."""

    def events(self, start: int, stop: int,
               accounts: Iterable[UUID]) -> Iterable[tuple[int, object]]:
        """The counted events of these accounts at positions ``start..stop``."""


class UsageLedger:
    """Every account's usage this process has asked for, exact up to ``known`` (a log
    position); brought up to the head before each check. Own appends are folded from the
    events just saved (no read back) when nobody appended in between."""

    def __init__(self, source: UsageSource, head: Callable[[], int],
                 max_accounts: int = 10_000) -> None:
        self.source = source
        self._head = head
        self._max = max_accounts  # the least recently checked are forgotten past this
        self._usage: OrderedDict[UUID, Usage] = OrderedDict()
        self._known = 0
        self._lock = threading.Lock()

    def usage(self, account_id: UUID) -> Usage:
        with self._lock:
            head = self._head()
            if account_id not in self._usage:
                self._add(account_id)
                while len(self._usage) > self._max:
                    self._usage.popitem(last=False)
            self._usage.move_to_end(account_id)
            if head > self._known:
                self._fold(self._known + 1, head, self._usage)
                self._known = head
            return self._usage[account_id]

    def _add(self, account_id: UUID) -> None:
        position, usage = self.source.snapshot(account_id)
        mine = {account_id: usage}
        if position < self._known:
            self._fold(position + 1, self._known, mine)
        elif position > self._known:  # the others are behind the snapshot: bring them up
            self._fold(self._known + 1, position, self._usage)
            self._known = position
        self._usage[account_id] = mine[account_id]

    def _fold(self, start: int, stop: int, usage: dict[UUID, Usage]) -> None:
        if not usage or start > stop:
            return
        for _, event in self.source.events(start, stop, list(usage)):
            account = getattr(event, "account_id", None)
            if account in usage:
                messages, size = usage_change(event)
                if messages or size:
                    usage[account] = usage[account].plus(messages, size)

    def saved(self, saved: Sequence[tuple[int, Any]]) -> None:
        """Events this process just appended: folded in if they follow ``known``."""
        if not saved:
            return
        with self._lock:
            if saved[0][0] != self._known + 1 or \
                    saved[-1][0] - saved[0][0] != len(saved) - 1:
                return  # someone else appended in between: the next check reads the log
            if not self._usage:
                self._known = saved[-1][0]
                return
            for _, event in saved:
                account: UUID | None = getattr(event, "account_id", None)
                if account is not None and account in self._usage:
                    messages, size = usage_change(event)
                    if messages or size:
                        self._usage[account] = self._usage[account].plus(messages, size)
            self._known = saved[-1][0]


class Quotas:
    """The rule every delivery, upload and copy into an account obeys: its usage after the
    command stays within its limits, else ``QuotaExceeded`` and nothing is written."""

    def __init__(self, default: Limits, ledger: UsageLedger | None) -> None:
        self.default = default
        self.ledger = ledger

    def limits(self, own: Limits) -> Limits:
        return self.default.over(own)

    def applies(self, account: Any) -> bool:
        """Whether ``account`` has any limit (else a check costs nothing)."""
        return not self.default.over(account_limits(account)).unlimited

    def usage(self, account_id: UUID) -> Usage | None:
        """The account's usage up to the log's head (None without a ledger)."""
        return None if self.ledger is None else self.ledger.usage(account_id)

    def saved(self, saved: Sequence[tuple[int, Any]]) -> None:
        if self.ledger is not None:
            self.ledger.saved(saved)

    def check(self, account: Any, messages: int, size: int) -> None:
        """``account`` (an ``Account``) would take ``messages`` more of ``size`` bytes."""
        limits = self.limits(account_limits(account))
        if limits.unlimited or self.ledger is None:
            return
        used = self.ledger.usage(account.id)
        after = used.plus(messages, size)
        if limits.bytes != UNLIMITED and after.bytes > limits.bytes:
            raise QuotaExceeded(account.address, "bytes", limits.bytes, used.bytes, size)
        if limits.messages != UNLIMITED and after.messages > limits.messages:
            raise QuotaExceeded(account.address, "messages", limits.messages, used.messages,
                                messages)


def account_limits(account: Any) -> Limits:
    """The account's own values (``OWN_DEFAULT`` for an account that never had any)."""
    own = getattr(account, "quota", None)
    return OWN_DEFAULT if own is None else Limits(int(own[0]), int(own[1]))


_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_size(text: str | int) -> int:
    """``1500``, ``10K``, ``2.5M``, ``1G``, ``1GiB`` (powers of 1024) as bytes; ValueError
    naming the text otherwise."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    s = str(text).strip().upper().removesuffix("B").removesuffix("I")
    unit = s[-1:] if s[-1:] in "KMGT" and s[-1:] else ""
    number = s[: len(s) - len(unit)].strip()
    try:
        value = float(number) if "." in number else int(number)
    except ValueError:
        raise ValueError(f"{text!r} is not a size (e.g. 1500, 10M, 1G)") from None
    if value < 0:
        raise ValueError(f"{text!r} is not a size: it is negative")
    return int(value * _UNITS[unit])
