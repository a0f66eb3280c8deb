"""``subscriptions``: the mailbox names an account subscribes to (James' SUBSCRIPTIONS).

Row key: the account id (16 bytes). Family ``s``: one column ``s:<mailbox name UTF-8>`` per
subscribed name, value ``b"1"``; unsubscribing deletes the column at the event's position.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain.account import Account
from projections import names as n
from projections.codec import TRUE, put
from projections.keys import RowReader, subscription_column
from projections.tablestore import DeleteColumn, Mutation, TableSpec

T = n.SUBSCRIPTIONS
TABLES = (TableSpec(T, (n.F_SUB,), split_by_salt=False),)


def _subscribed(e: Account.Subscribed, p: int) -> list[Mutation]:
    return [put(T, e.originator_id.bytes, subscription_column(e.name), TRUE, p)]


def _unsubscribed(e: Account.Unsubscribed, p: int) -> list[Mutation]:
    return [DeleteColumn(T, e.originator_id.bytes, subscription_column(e.name), p)]


_HANDLERS: dict[type, Callable[[Any, int], list[Mutation]]] = {
    Account.Subscribed: _subscribed,
    Account.Unsubscribed: _unsubscribed,
}
HANDLED = frozenset(_HANDLERS)


def project(event: object, position: int, read: RowReader) -> list[Mutation]:
    handler = _HANDLERS.get(type(event))
    return [] if handler is None else handler(event, position)
