"""What an event rule is and which rules apply (``domain.rules`` holds the rule book and
the rule events, the aggregates): the constants, a rule's definition checked
(``parse_filter``, ``rule_spec``, ``check_secret``), the message as a filter sees it
(``MessageView``), the bounded matcher port (``PatternMatcher``) and the decision
(``Evaluation``, ``decide``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from domain.errors import InvalidCommand
from domain.values import name_uuid

__all__ = ["APPLICATIONS", "COMPLETE", "DISCARDED", "Evaluation", "FAILED", "FIELDS",
           "FilterTimeout", "MAX_RULES", "MessageView", "PENDING", "PROCESSING", "PatternMatcher",
           "RULEBOOK_ID", "SECRET_MAX", "SECRET_MIN", "STATUSES", "TRIGGERS", "Verdict",
           "check_secret", "decide", "parse_filter", "rule_spec"]

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


class Rules(Protocol):
    """What ``decide`` reads of a rule book (``domain.rules.RuleBook``): its rules by name."""

    @property
    def rules(self) -> Mapping[str, Mapping[str, Any]]: ...


def decide(book: Rules | None, mailbox: str, view: MessageView,
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
