"""``rules``: every event rule as it stands (the rule book's events).

Row key: the rule's id (16 bytes; a rule deleted and created again under its name is a new
rule). Family ``r``: ``r:name``, ``r:spec`` (JSON: mailboxes, include, exclude, application,
properties), ``r:enabled`` (``1``/``0``), ``r:version`` (the rule book's version that last
set it). A deleted rule's row is deleted at the event's position. The rule's HMAC secret is
kept by the rule book alone, never in a table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from domain.rules import RuleBook
from projections import names as n
from projections.codec import FALSE, TRUE, encode_int, encode_json, encode_str, put
from projections.keys import RowReader
from projections.tablestore import DeleteRow, Mutation, TableSpec

T = n.RULES
TABLES = (TableSpec(T, (n.F_RULE,), split_by_salt=False),)


def _row(rule_id: str) -> bytes:
    return UUID(rule_id).bytes


def _created(e: RuleBook.RuleCreated, p: int) -> list[Mutation]:
    row = _row(e.rule_id)
    return [put(T, row, n.RU_NAME, encode_str(e.name), p),
            put(T, row, n.RU_SPEC, encode_json(e.spec), p),
            put(T, row, n.RU_ENABLED, TRUE, p),
            put(T, row, n.RU_VERSION, encode_int(e.originator_version), p)]


def _changed(e: RuleBook.RuleChanged, p: int) -> list[Mutation]:
    row = _row(e.rule_id)
    return [put(T, row, n.RU_SPEC, encode_json(e.spec), p),
            put(T, row, n.RU_VERSION, encode_int(e.originator_version), p)]


def _enabled(e: RuleBook.RuleEnabled, p: int) -> list[Mutation]:
    row = _row(e.rule_id)
    return [put(T, row, n.RU_ENABLED, TRUE if e.enabled else FALSE, p),
            put(T, row, n.RU_VERSION, encode_int(e.originator_version), p)]


def _deleted(e: RuleBook.RuleDeleted, p: int) -> list[Mutation]:
    return [DeleteRow(T, _row(e.rule_id), p)]


_HANDLERS: dict[type, Callable[[Any, int], list[Mutation]]] = {
    RuleBook.RuleCreated: _created,
    RuleBook.RuleChanged: _changed,
    RuleBook.RuleEnabled: _enabled,
    RuleBook.RuleDeleted: _deleted,
}
HANDLED = frozenset(_HANDLERS)


def project(event: object, position: int, read: RowReader) -> list[Mutation]:
    handler = _HANDLERS.get(type(event))
    return [] if handler is None else handler(event, position)
