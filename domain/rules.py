"""Event rules (Sterling Global Mailbox's event rules) and the rule events they raise.

A rule names the mailboxes it watches (all, a list of names, or a pattern), include and
exclude filters (regular expressions on the sender, the subject, the attachment file names —
the "message name" — or a named header), the processing application (a webhook URL or a
Kafka topic) and properties handed to it. Rules live in one aggregate, the ``RuleBook``:
every change is an event in the log.

When a message is delivered, copied or moved into a mailbox, the command decides, from the
rule book as it stands and from the message's unsealed attributes it holds in memory, which
rules apply, and appends one ``RuleEvent`` per applying rule in the same atomic append as the
message's own event. What was raised is thus in the log (a rule changed later changes
nothing raised before), and the ``rule_events`` read model is a pure function of it; no
personal data of the message is copied into a rule event (ADR 0052).

A filter is evaluated by a ``PatternMatcher`` (a port: the adapter bounds each search in
time); a delivery's whole evaluation has a budget too. A rule whose filter runs out of time
raises its event as ``failed`` with the reason, so the delivery never stalls and an
administrator can see and resend it.

A rule event's status moves pending → processing → complete | failed (and back to pending on
a resend); the dispatcher appends each step as an event.

The aggregates (``RuleBook``, ``RuleEvent``) and their events are here, their topics
unchanged; a rule's definition and the decision which rules apply are in
``domain.rulematching`` (every name importable from here too).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from domain.aggregate import MailAggregate
from domain.errors import InvalidState, RuleExists, RuleNotFound
from domain.rulematching import (
    APPLICATIONS,
    COMPLETE,
    DISCARDED,
    FAILED,
    FIELDS,
    MAX_RULES,
    PENDING,
    PROCESSING,
    RULEBOOK_ID,
    SECRET_MAX,
    SECRET_MIN,
    STATUSES,
    TRIGGERS,
    Evaluation,
    FilterTimeout,
    MessageView,
    PatternMatcher,
    Verdict,
    check_secret,
    decide,
    parse_filter,
    rule_spec,
)
from domain.values import name_uuid

__all__ = ["APPLICATIONS", "COMPLETE", "DISCARDED", "Evaluation", "FAILED", "FIELDS",
           "FilterTimeout", "MAX_RULES", "MessageView", "PENDING", "PROCESSING", "PatternMatcher",
           "RULEBOOK_ID", "RuleBook", "RuleEvent", "SECRET_MAX", "SECRET_MIN", "STATUSES",
           "STATUS_QUEUES", "TRIGGERS", "Verdict", "check_secret", "decide", "parse_filter",
           "rule_event_id", "rule_spec", "status_queue"]

# -- the rule book -----------------------------------------------------------------------------

class RuleBook(MailAggregate):
    """Every rule, by name (one aggregate: a delivery loads it once)."""

    rules: dict[str, dict[str, Any]]  # name -> {"id", "enabled", "version", "spec"}
    secrets: dict[str, str]  # rule id -> HMAC secret (kept after a delete: events outlive it)

    def __init__(self) -> None:
        """State is set by the creation event's ``apply``."""

    def _copy_containers(self, state: dict[str, Any]) -> None:
        state["rules"] = dict(self.rules)
        state["secrets"] = dict(self.secrets)

    class Started(Aggregate.Created):
        def apply(self, aggregate: Any) -> None:
            aggregate.rules = {}
            aggregate.secrets = {}

    class RuleCreated(Aggregate.Event):
        name: str
        rule_id: str
        spec: dict[str, Any]
        secret: str

        def apply(self, aggregate: Any) -> None:
            aggregate.rules[self.name] = {"id": self.rule_id, "enabled": True,
                                          "version": self.originator_version,
                                          "spec": self.spec}
            aggregate.secrets[self.rule_id] = self.secret

    class RuleChanged(Aggregate.Event):
        name: str
        rule_id: str
        spec: dict[str, Any]

        def apply(self, aggregate: Any) -> None:
            rule = aggregate.rules[self.name]
            aggregate.rules[self.name] = {**rule, "spec": self.spec,
                                          "version": self.originator_version}

    class RuleEnabled(Aggregate.Event):
        name: str
        rule_id: str
        enabled: bool

        def apply(self, aggregate: Any) -> None:
            rule = aggregate.rules[self.name]
            aggregate.rules[self.name] = {**rule, "enabled": self.enabled,
                                          "version": self.originator_version}

    class RuleDeleted(Aggregate.Event):
        name: str
        rule_id: str

        def apply(self, aggregate: Any) -> None:
            del aggregate.rules[self.name]

    class SecretRotated(Aggregate.Event):
        """The rule's HMAC secret replaced: every event handed over from now on is signed
        with the new one (those raised before and resent too)."""

        name: str
        rule_id: str
        secret: str

        def apply(self, aggregate: Any) -> None:
            aggregate.secrets[self.rule_id] = self.secret

    @classmethod
    def start(cls) -> RuleBook:
        return cls._create(cls.Started, id=RULEBOOK_ID)

    def rule(self, name: str) -> dict[str, Any]:
        if name not in self.rules:
            raise RuleNotFound(f"rule {name!r} does not exist")
        return self.rules[name]

    def create(self, name: str, rule_id: UUID, spec: dict[str, Any], secret: str) -> None:
        if name in self.rules:
            raise RuleExists(f"rule {name!r} exists already")
        if len(self.rules) >= MAX_RULES:
            raise InvalidState(f"rules: at most {MAX_RULES}")
        self.trigger_event(self.RuleCreated, name=name, rule_id=str(rule_id), spec=spec,
                           secret=check_secret(secret))

    def change(self, name: str, spec: dict[str, Any]) -> bool:
        rule = self.rule(name)
        if rule["spec"] == spec:
            return False
        self.trigger_event(self.RuleChanged, name=name, rule_id=rule["id"], spec=spec)
        return True

    def enable(self, name: str, enabled: bool) -> bool:
        rule = self.rule(name)
        if rule["enabled"] == enabled:
            return False
        self.trigger_event(self.RuleEnabled, name=name, rule_id=rule["id"], enabled=enabled)
        return True

    def delete(self, name: str) -> None:
        rule = self.rule(name)
        self.trigger_event(self.RuleDeleted, name=name, rule_id=rule["id"])

    def rotate_secret(self, name: str, secret: str) -> None:
        rule = self.rule(name)
        self.trigger_event(self.SecretRotated, name=name, rule_id=rule["id"],
                           secret=check_secret(secret))


# -- rule events ---------------------------------------------------------------------------------

def rule_event_id(message_id: UUID, mailbox_id: UUID, uid: int, rule_id: str) -> UUID:
    """One event per rule and arrival (a message and the UID it got in a mailbox)."""
    return name_uuid(f"rule-event:{message_id}:{mailbox_id}:{uid}:{rule_id}")


class RuleEvent(MailAggregate):
    """An event raised by a rule for one arrival of a message, and its processing."""

    account_id: UUID
    message_id: UUID
    rule: str
    rule_id: str
    application: dict[str, Any]
    status: str
    status_since: datetime  # a purge by status counts its TTL from it
    attempts: int
    reason: str

    def __init__(self) -> None:
        """State is set by the creation event's ``apply``."""

    class Raised(Aggregate.Created):
        account_id: UUID
        message_id: UUID
        mailbox_id: UUID
        mailbox: str
        uid: int
        trigger: str
        rule: str
        rule_id: str
        rule_version: int
        application: dict[str, Any]
        properties: dict[str, Any]
        status: str
        reason: str

        def apply(self, aggregate: Any) -> None:
            aggregate.account_id = self.account_id
            aggregate.message_id = self.message_id
            aggregate.rule = self.rule
            aggregate.rule_id = self.rule_id
            aggregate.application = self.application
            aggregate.status = self.status
            aggregate.status_since = self.timestamp
            aggregate.attempts = 0
            aggregate.reason = self.reason

    class StatusChanged(Aggregate.Event):
        """Base of every later event: the status, attempts and reason after it."""

        account_id: UUID
        message_id: UUID
        status: str
        attempts: int
        reason: str
        where: str

        def apply(self, aggregate: Any) -> None:
            aggregate.status = self.status
            aggregate.status_since = self.timestamp
            aggregate.attempts = self.attempts
            aggregate.reason = self.reason

    class Processing(StatusChanged):
        """A dispatcher is handing the event to its application."""

    class Completed(StatusChanged):
        """The application accepted the event."""

    class Failed(StatusChanged):
        """The application refused it or could not be reached (``reason``)."""

    class Resent(StatusChanged):
        """An administrator asked for it to be handed over again: pending."""

    class Discarded(StatusChanged):
        """Purged (its status's TTL passed, or its message was purged): gone from the
        read model. ``reason`` says which; ``queue`` and ``since``: the purge queue entry
        that led to it (none for a message's purge)."""

        queue: str
        since: datetime | None

    @classmethod
    def raise_for(cls, verdict: Verdict, *, account_id: UUID, message_id: UUID,
                  mailbox_id: UUID, mailbox: str, uid: int, trigger: str) -> RuleEvent:
        rule = verdict.rule
        return cls._create(
            cls.Raised, id=rule_event_id(message_id, mailbox_id, uid, rule["id"]),
            account_id=account_id, message_id=message_id, mailbox_id=mailbox_id,
            mailbox=mailbox, uid=uid, trigger=trigger, rule=verdict.name,
            rule_id=rule["id"], rule_version=rule["version"],
            application=dict(rule["spec"]["application"]),
            properties=dict(rule["spec"]["properties"]),
            status=verdict.status, reason=verdict.reason)

    def _step(self, cls: type[RuleEvent.StatusChanged], status: str, attempts: int,
              reason: str = "", where: str = "") -> None:
        self.trigger_event(cls, account_id=self.account_id, message_id=self.message_id,
                           status=status, attempts=attempts, reason=reason, where=where)

    def processing(self, where: str) -> None:
        if self.status not in (PENDING, PROCESSING):
            raise InvalidState(f"rule event {self.id} is {self.status}; not dispatched")
        self._step(self.Processing, PROCESSING, self.attempts, where=where)

    def completed(self, attempts: int, where: str) -> None:
        self._step(self.Completed, COMPLETE, self.attempts + attempts, where=where)

    def failed(self, attempts: int, reason: str, where: str) -> None:
        self._step(self.Failed, FAILED, self.attempts + attempts, reason[:500], where)

    def resend(self) -> bool:
        if self.status == PENDING:
            return False
        self._step(self.Resent, PENDING, self.attempts)
        return True

    def discard(self, reason: str, queue: str = "", since: datetime | None = None) -> bool:
        if self.status == DISCARDED:
            return False
        self.trigger_event(self.Discarded, account_id=self.account_id,
                           message_id=self.message_id, status=DISCARDED,
                           attempts=self.attempts, reason=reason, where="", queue=queue,
                           since=since)
        return True


def status_queue(status: str) -> str:
    """The purge queue of rule events in ``status`` (``rule-complete``...)."""
    return f"rule-{status}"


STATUS_QUEUES = {status_queue(s): s for s in STATUSES}
