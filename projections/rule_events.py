"""``rule_events``: the events raised by event rules, and where each stands.

Row key: the rule event's id (16 bytes; ``domain.rules.rule_event_id``: one per rule and
arrival of a message in a mailbox). Family ``e``: what was raised (``e:rule``, ``e:rule_id``,
``e:rule_version``, ``e:message``, ``e:account``, ``e:mailbox_id`` (16 bytes each),
``e:mailbox``, ``e:uid``, ``e:trigger``, ``e:application`` and ``e:properties`` (JSON),
``e:raised_at``) written by ``Raised``; its status (``e:status``, ``e:attempts``,
``e:reason``, ``e:where``, ``e:updated_at``) written by ``Raised`` and by every later step
(processing, complete, failed, resent). ``Discarded`` (a purge by status, or the message's
purge) deletes the row at its position.

``rule_event_queue``: the purge queues by status, in ``purge_queue``'s layout (row key
``rule-<status> + 0x00 + shard + minute bucket of since + event id``; ``q:since``): every
event above puts the rule event in the queue of its new status, from the event's time. An
entry is a hint: the purge job double-checks the status and its age against the log;
``Discarded`` deletes the entry that led to it, and entries of earlier statuses stay (a run
past the peek-back window never reads them again), as in ``purge_queue``.

No cell holds personal data of the message: the rule decided on the command side, and only
ids, the mailbox's name and the rule's own definition are in the event (ADR 0052).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain.rules import RuleEvent, status_queue
from projections import names as n
from projections.codec import encode_datetime, encode_int, encode_json, encode_str, put
from projections.keys import RowReader, purge_row
from projections.tablestore import DeleteRow, Mutation, TableSpec

T = n.RULE_EVENTS
Q = n.RULE_EVENT_QUEUE
TABLES = (TableSpec(T, (n.F_RULE_EVENT,), split_by_salt=False),
          TableSpec(Q, (n.F_QUEUE,), split_by_salt=False))


def _status(e: Any, row: bytes, p: int, attempts: int, where: str) -> list[Mutation]:
    entry = purge_row(status_queue(e.status), e.originator_id, e.timestamp)
    return [put(Q, entry, n.PQ_SINCE, encode_datetime(e.timestamp), p),
            put(T, row, n.RE_STATUS, encode_str(e.status), p),
            put(T, row, n.RE_ATTEMPTS, encode_int(attempts), p),
            put(T, row, n.RE_REASON, encode_str(e.reason), p),
            put(T, row, n.RE_WHERE, encode_str(where), p),
            put(T, row, n.RE_UPDATED_AT, encode_datetime(e.timestamp), p)]


def _raised(e: RuleEvent.Raised, p: int) -> list[Mutation]:
    row = e.originator_id.bytes
    return [
        put(T, row, n.RE_RULE, encode_str(e.rule), p),
        put(T, row, n.RE_RULE_ID, encode_str(e.rule_id), p),
        put(T, row, n.RE_RULE_VERSION, encode_int(e.rule_version), p),
        put(T, row, n.RE_MESSAGE, e.message_id.bytes, p),
        put(T, row, n.RE_ACCOUNT, e.account_id.bytes, p),
        put(T, row, n.RE_MAILBOX_ID, e.mailbox_id.bytes, p),
        put(T, row, n.RE_MAILBOX, encode_str(e.mailbox), p),
        put(T, row, n.RE_UID, encode_int(e.uid), p),
        put(T, row, n.RE_TRIGGER, encode_str(e.trigger), p),
        put(T, row, n.RE_APPLICATION, encode_json(e.application), p),
        put(T, row, n.RE_PROPERTIES, encode_json(e.properties), p),
        put(T, row, n.RE_RAISED_AT, encode_datetime(e.timestamp), p),
        *_status(e, row, p, 0, ""),
    ]


def _step(e: RuleEvent.StatusChanged, p: int) -> list[Mutation]:
    return _status(e, e.originator_id.bytes, p, e.attempts, e.where)


def _discarded(e: RuleEvent.Discarded, p: int) -> list[Mutation]:
    done: list[Mutation] = [DeleteRow(T, e.originator_id.bytes, p)]
    if e.queue and e.since is not None:
        done.append(DeleteRow(Q, purge_row(e.queue, e.originator_id, e.since), p))
    return done


_HANDLERS: dict[type, Callable[[Any, int], list[Mutation]]] = {
    RuleEvent.Raised: _raised,
    RuleEvent.Processing: _step,
    RuleEvent.Completed: _step,
    RuleEvent.Failed: _step,
    RuleEvent.Resent: _step,
    RuleEvent.Discarded: _discarded,
}
HANDLED = frozenset(_HANDLERS)


def project(event: object, position: int, read: RowReader) -> list[Mutation]:
    handler = _HANDLERS.get(type(event))
    return [] if handler is None else handler(event, position)
