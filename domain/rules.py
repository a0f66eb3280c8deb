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
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from eventsourcing.domain import Aggregate

from domain.aggregate import MailAggregate
from domain.errors import InvalidCommand, InvalidState, RuleExists, RuleNotFound
from domain.values import name_uuid

RULEBOOK_ID = name_uuid("letterlog:rulebook")
FIELDS = ("sender", "subject", "name", "header")
"""What a filter looks at: the sender, the subject, each attachment file name, a header."""
APPLICATIONS = ("webhook", "kafka")
PENDING, PROCESSING, COMPLETE, FAILED = "pending", "processing", "complete", "failed"
STATUSES = (PENDING, PROCESSING, COMPLETE, FAILED)
DISCARDED = "discarded"  # purged: no longer in the read model
TRIGGERS = ("delivered", "copied", "moved")
MAX_RULES = 1000


class FilterTimeout(Exception):
    """A filter's search ran out of time (raised by a ``PatternMatcher``)."""


class PatternMatcher(Protocol):
    """Regular expressions evaluated with a time bound (an adapter: the ``regex`` package)."""

    def invalid(self, pattern: str) -> str | None:
        """Why ``pattern`` is not a valid expression, or None."""

    def search(self, pattern: str, text: str, timeout: float) -> bool:
        """Whether ``pattern`` matches somewhere in ``text``; ``FilterTimeout`` past
        ``timeout`` seconds."""


@dataclass(frozen=True)
class MessageView:
    """What a filter may look at: held in memory by the command, never copied to an event."""

    sender: str = ""
    subject: str = ""
    names: tuple[str, ...] = ()  # attachment file names
    headers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # lower-case name

    def texts(self, f: Mapping[str, str]) -> Sequence[str]:
        kind = f["field"]
        if kind == "sender":
            return (self.sender,)
        if kind == "subject":
            return (self.subject,)
        if kind == "name":
            return self.names
        return self.headers.get(f.get("header", "").lower(), ())


# -- a rule's definition -----------------------------------------------------------------------

def parse_filter(text: str) -> dict[str, str]:
    """``[sender:|subject:|name:|header:NAME:]REGEX`` as a filter (no prefix: the message
    name, i.e. the attachment file names)."""
    for kind in ("sender", "subject", "name"):
        if text.startswith(kind + ":"):
            return {"field": kind, "pattern": text[len(kind) + 1:]}
    if text.startswith("header:"):
        header, sep, pattern = text[len("header:"):].partition(":")
        if not sep or not header.strip():
            raise InvalidCommand(f"filter {text!r}: write header:NAME:REGEX")
        return {"field": "header", "header": header.strip(), "pattern": pattern}
    return {"field": "name", "pattern": text}


def rule_spec(
    name: str,
    matcher: PatternMatcher,
    *,
    mailboxes: Iterable[str] = (),
    mailbox_pattern: str | None = None,
    include: Iterable[Mapping[str, str]] = (),
    exclude: Iterable[Mapping[str, str]] = (),
    application: Mapping[str, str],
    properties: Mapping[str, str] | None = None,
    run_as: str | None = None,
) -> dict[str, Any]:
    """A rule's definition, checked (``InvalidCommand`` naming the field). ``run_as``: a
    user; the rule then raises only for mailboxes that user may read (``r``, RFC 4314)."""
    if not name or len(name) > 200 or not name.isprintable() or name != name.strip():
        raise InvalidCommand(f"rule name {name!r}: 1 to 200 printable characters, no "
                             "leading or trailing space")
    names = sorted(set(mailboxes))
    if names and mailbox_pattern is not None:
        raise InvalidCommand("mailboxes: give names or a pattern, not both")
    if mailbox_pattern is not None:
        selection: dict[str, Any] = {"kind": "pattern", "pattern": mailbox_pattern}
        _check_pattern(matcher, "mailbox pattern", mailbox_pattern)
    elif names:
        selection = {"kind": "list", "names": names}
    else:
        selection = {"kind": "all"}
    filters = {"include": [dict(f) for f in include], "exclude": [dict(f) for f in exclude]}
    for side, items in filters.items():
        for f in items:
            if f.get("field") not in FIELDS:
                raise InvalidCommand(f"{side}: field {f.get('field')!r}; one of {FIELDS}")
            if f["field"] == "header" and not f.get("header"):
                raise InvalidCommand(f"{side}: a header filter names its header")
            _check_pattern(matcher, side, f.get("pattern", ""))
    app = dict(application)
    if app.get("kind") not in APPLICATIONS:
        raise InvalidCommand(f"application: {app.get('kind')!r}; one of {APPLICATIONS}")
    if app["kind"] == "webhook" and not str(app.get("url", "")).startswith(
            ("http://", "https://")):
        raise InvalidCommand(f"webhook: {app.get('url')!r} is not an http:// or https:// URL")
    if app["kind"] == "kafka" and not app.get("topic"):
        raise InvalidCommand("kafka: the application names its topic")
    props = dict(properties or {})
    for k, v in props.items():
        if not isinstance(k, str) or not isinstance(v, str) or not k:
            raise InvalidCommand(f"property {k!r}: names and values are strings")
    spec = {"mailboxes": selection, **filters, "application": app, "properties": props}
    if run_as is not None:
        user = run_as.strip()
        if not user or user[0] in "-$" or user in ("anyone", "authenticated") \
                or not user.isprintable() or " " in user:
            raise InvalidCommand(f"run as: {run_as!r} is not a user")
        spec["run_as"] = user
    return spec


def _check_pattern(matcher: PatternMatcher, what: str, pattern: str) -> None:
    problem = matcher.invalid(pattern)
    if problem is not None:
        raise InvalidCommand(f"{what}: {pattern!r} is not a regular expression: {problem}")


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


SECRET_MIN, SECRET_MAX = 16, 512


def check_secret(secret: str) -> str:
    """A rule's HMAC secret as given (``--secret-file``): 16 to 512 printable characters,
    no white space (a receiver keeps it in a file or a setting, where a stray space or line
    end would be a different key)."""
    if not SECRET_MIN <= len(secret) <= SECRET_MAX:
        raise InvalidCommand(f"secret: {len(secret)} characters; a rule's secret has "
                             f"{SECRET_MIN} to {SECRET_MAX}")
    if not secret.isprintable() or any(ch.isspace() for ch in secret):
        raise InvalidCommand("secret: only printable characters, no spaces or line ends")
    return secret


# -- deciding which rules apply ------------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    name: str
    rule: Mapping[str, Any]
    status: str  # pending, or failed when a filter ran out of time
    reason: str = ""


class Evaluation:
    """One arrival's evaluation: every search bounded by ``per_search`` seconds and all of
    them together by ``budget`` seconds."""

    def __init__(self, matcher: PatternMatcher | None, per_search: float, budget: float,
                 clock: Any = time.monotonic) -> None:
        self.matcher = matcher
        self.per_search = per_search
        self.clock = clock
        self.deadline = clock() + budget

    def search(self, pattern: str, text: str) -> bool:
        if self.matcher is None:
            raise FilterTimeout("no bounded matcher is configured")
        left = self.deadline - self.clock()
        if left <= 0:
            raise FilterTimeout("this arrival's filter time budget is spent")
        return self.matcher.search(pattern, text, min(self.per_search, left))

    def any_match(self, filters: Sequence[Mapping[str, str]], view: MessageView) -> bool:
        for f in filters:
            for text in view.texts(f):
                try:
                    if self.search(f["pattern"], text):
                        return True
                except FilterTimeout as e:
                    raise FilterTimeout(f"{f['field']} filter {f['pattern']!r}: {e}") from None
        return False

    def selects(self, selection: Mapping[str, Any], mailbox: str) -> bool:
        kind = selection["kind"]
        if kind == "all":
            return True
        if kind == "list":
            return mailbox in selection["names"]
        try:
            return self.search(selection["pattern"], mailbox)
        except FilterTimeout as e:
            raise FilterTimeout(f"mailbox pattern {selection['pattern']!r}: {e}") from None


def decide(book: RuleBook | None, mailbox: str, view: MessageView,
           evaluation: Evaluation,
           may_read: Callable[[str], bool] = lambda user: True) -> list[Verdict]:
    """The rules that apply to a message arriving in ``mailbox`` (enabled rules only, in
    name order): included by a filter (or no include filter) and excluded by none; a rule
    that runs as a user only where ``may_read(user)``."""
    if book is None:
        return []
    out: list[Verdict] = []
    for name in sorted(book.rules):
        rule = book.rules[name]
        if not rule["enabled"]:
            continue
        spec = rule["spec"]
        if "run_as" in spec and not may_read(spec["run_as"]):
            continue
        try:
            if not evaluation.selects(spec["mailboxes"], mailbox):
                continue
            if spec["include"] and not evaluation.any_match(spec["include"], view):
                continue
            if evaluation.any_match(spec["exclude"], view):
                continue
        except FilterTimeout as e:
            out.append(Verdict(name, rule, FAILED, f"not evaluated: {e}"))
            continue
        out.append(Verdict(name, rule, PENDING))
    return out


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
