"""``accounts``: an account's address and its labels with their attributes (ElasticInbox).

Row key: the account id (16 bytes). Families: ``a`` (``a:address``; ``a:quota``, the
account's own quota as ``b"<bytes>,<messages>"``, each a limit, 0 for none, -1 for the
default setting, from ``Account.QuotaSet``) and ``l`` (one column
``l:<label UTF-8>`` per defined label, value its attributes as JSON; a removed label's
column is deleted at the event's position).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain.account import Account
from projections import names as n
from projections.codec import encode_json, put
from projections.keys import RowReader, label_column
from projections.tablestore import DeleteColumn, Mutation, TableSpec

T = n.ACCOUNTS
TABLES = (TableSpec(T, (n.F_ACCOUNT, n.F_LABEL), split_by_salt=False),)


def _opened(e: Account.Opened, p: int) -> list[Mutation]:
    return [put(T, e.originator_id.bytes, n.ACC_ADDRESS, e.address.encode(), p)]


def _quota_set(e: Account.QuotaSet, p: int) -> list[Mutation]:
    return [put(T, e.originator_id.bytes, n.ACC_QUOTA, b"%d,%d" % (e.bytes, e.messages), p)]


def _label_defined(e: Account.LabelDefined, p: int) -> list[Mutation]:
    return [put(T, e.originator_id.bytes, label_column(e.label), encode_json(e.attributes), p)]


def _label_removed(e: Account.LabelRemoved, p: int) -> list[Mutation]:
    return [DeleteColumn(T, e.originator_id.bytes, label_column(e.label), p)]


_HANDLERS: dict[type, Callable[[Any, int], list[Mutation]]] = {
    Account.Opened: _opened,
    Account.LabelDefined: _label_defined,
    Account.LabelRemoved: _label_removed,
    Account.QuotaSet: _quota_set,
}
HANDLED = frozenset(_HANDLERS)


def project(event: object, position: int, read: RowReader) -> list[Mutation]:
    handler = _HANDLERS.get(type(event))
    return [] if handler is None else handler(event, position)
