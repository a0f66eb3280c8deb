"""Every projection, the tables it owns, and the event classes letterlog knows.

A ``Projection`` is a name (its tracking row), the tables it writes (it owns them: no other
projection writes them), the pure function ``project(event, position, read) -> mutations``,
the tables it reads through ``read`` (only ``counters`` reads, its own rows) and the event
classes it handles (the runner sends it only those; empty: every event).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from domain.account import Account
from domain.delivery_key import DeliveryKey
from domain.mailbox import Mailbox
from domain.message import Message
from domain.roots import VirtualRoot
from domain.rules import RuleBook, RuleEvent
from projections import (
    accounts,
    acl,
    counters,
    label_index,
    mailbox_names,
    mailboxes,
    messages,
    payload_refs,
    purge_queue,
    roots,
    rule_events,
    rules,
    subscriptions,
    threads,
    visible_mailboxes,
)
from projections import names as n
from projections.keys import RowReader
from projections.mutationfold import RowPut
from projections.tablestore import Mutation, TableSpec

Projector = Callable[[Any, int, RowReader], list[Mutation]]
RowProjector = Callable[[Any, int, RowReader], Sequence[Mutation | RowPut]]


class Folder(Protocol):
    """A projection's own fold (``ProjectionRunner.apply_events(fold=True)``): ``project``
    keeps its effect in memory and returns nothing; ``drain`` returns the mutations a fold of
    the plain projector's output since the last drain would hold, and forgets them."""

    def project(self, event: Any, position: int, read: RowReader) -> list[Mutation]: ...

    def drain(self) -> list[Mutation]: ...


@dataclass(frozen=True)
class Projection:
    name: str
    tables: tuple[TableSpec, ...]
    project: Projector
    reads: tuple[str, ...] = ()
    handles: frozenset[type] = frozenset()
    folder: Callable[[], Folder] | None = None
    """For a fold (a rebuild): a cheaper stateful ``project`` giving the same tables."""

    @property
    def table_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tables)


ALL: tuple[Projection, ...] = (
    Projection("mailboxes", mailboxes.TABLES, mailboxes.project, (), mailboxes.HANDLED,
               mailboxes.MailboxFold),
    Projection("mailbox_names", mailbox_names.TABLES, mailbox_names.project, (),
               mailbox_names.HANDLED),
    Projection("messages", messages.TABLES, messages.project, (), messages.HANDLED),
    Projection("label_index", label_index.TABLES, label_index.project, (), label_index.HANDLED),
    Projection("counters", counters.TABLES, counters.project, counters.READS, counters.HANDLED,
               counters.CounterFold),
    Projection("threads", threads.TABLES, threads.project, (), threads.HANDLED),
    Projection("subscriptions", subscriptions.TABLES, subscriptions.project, (),
               subscriptions.HANDLED),
    Projection("accounts", accounts.TABLES, accounts.project, (), accounts.HANDLED),
    Projection("payload_refs", payload_refs.TABLES, payload_refs.project, (),
               payload_refs.HANDLED),
    Projection("purge_queue", purge_queue.TABLES, purge_queue.project, (), purge_queue.HANDLED),
    Projection("acl", acl.TABLES, acl.project, (), acl.HANDLED),
    Projection("visible_mailboxes", visible_mailboxes.TABLES, visible_mailboxes.project, (),
               visible_mailboxes.HANDLED),
    Projection("roots", roots.TABLES, roots.project, (), roots.HANDLED),
    Projection("rules", rules.TABLES, rules.project, (), rules.HANDLED),
    Projection("rule_events", rule_events.TABLES, rule_events.project, (),
               rule_events.HANDLED),
)

BY_NAME: dict[str, Projection] = {p.name: p for p in ALL}

FOLD_FORMS: dict[Projector, RowProjector] = {messages.project: messages.fold_project}
"""A projector's fold form, which a fold (``ProjectionRunner.apply_events(fold=True)``) calls
instead of a projection's ``project`` without a ``folder``: the same cells, those it writes
to one row at one version given as one ``RowPut`` (no ``Put`` per cell; ADR 0106). Keyed by
the projector itself: a ``Projection`` given another ``project`` (a test's failing one) is
folded through that one."""

TRACKING_SPEC = TableSpec(n.TRACKING, (n.F_TRACK,), split_by_salt=False)

TABLE_SPECS: tuple[TableSpec, ...] = (
    *(spec for p in ALL for spec in p.tables),
    TRACKING_SPEC,
)


def _event_classes(*aggregates: type) -> frozenset[type]:
    found: set[type] = set()
    for aggregate in aggregates:
        for value in vars(aggregate).values():
            fields = getattr(value, "__dataclass_fields__", None)
            if isinstance(value, type) and fields is not None and "originator_version" in fields:
                found.add(value)
    return frozenset(found)


DOMAIN_EVENTS: frozenset[type] = _event_classes(Account, Mailbox, Message, DeliveryKey,
                                                VirtualRoot, RuleBook, RuleEvent)
"""Every event class of letterlog's aggregates; anything else in the log is corrupt."""


def select(names: list[str] | tuple[str, ...]) -> tuple[Projection, ...]:
    """The named projections (``KeyError`` naming an unknown one)."""
    unknown = [name for name in names if name not in BY_NAME]
    if unknown:
        raise KeyError(f"projections: unknown {unknown!r}; known {sorted(BY_NAME)!r}")
    return tuple(BY_NAME[name] for name in names)
