"""The rules' pure parts: filters, which rules apply, and the time bound of an arrival's
evaluation (with the real bounded matcher, and with a clock that a test moves)."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import pytest

from adapters.rules.matching import RegexMatcher
from domain.errors import InvalidCommand
from domain.rules import (
    FAILED,
    PENDING,
    Evaluation,
    FilterTimeout,
    MessageView,
    RuleBook,
    decide,
    parse_filter,
    rule_spec,
)

HOOK = {"kind": "webhook", "url": "http://127.0.0.1:1/h"}
MATCHER = RegexMatcher()
VIEW = MessageView(sender="ada@example.org", subject="Invoice 12", names=("PO-1.pdf",),
                   headers={"x-department": ("Finance",)})


def book(*rules: tuple[str, dict[str, Any]]) -> RuleBook:
    b = RuleBook.start()
    for name, terms in rules:
        b.create(name, uuid4(), rule_spec(name, MATCHER, application=HOOK, **terms),
                 "a-secret-of-16-or-more")
    return b


def evaluation(budget: float = 1.0) -> Evaluation:
    return Evaluation(MATCHER, 0.05, budget)


def test_a_filter_names_its_field_and_defaults_to_the_message_name() -> None:
    assert parse_filter("subject:^Hi") == {"field": "subject", "pattern": "^Hi"}
    assert parse_filter("\\.pdf$") == {"field": "name", "pattern": "\\.pdf$"}
    assert parse_filter("header:X-A:^b:c$") == {"field": "header", "header": "X-A",
                                                "pattern": "^b:c$"}
    with pytest.raises(InvalidCommand):
        parse_filter("header:nocolon")


def test_includes_any_excludes_any_and_disabled_rules_say_nothing() -> None:
    b = book(("a", {"include": [parse_filter("subject:^Lunch"), parse_filter("PO-\\d")]}),
             ("b", {"include": [parse_filter("header:X-Department:^Finance$")],
                    "exclude": [parse_filter("sender:@example\\.org$")]}),
             ("c", {"mailboxes": ["Archive"]}),
             ("d", {"mailbox_pattern": "^IN"}))
    b.enable("d", False)
    assert [v.name for v in decide(b, "INBOX", VIEW, evaluation())] == ["a"]
    assert [v.name for v in decide(b, "Archive", VIEW, evaluation())] == ["a", "c"]
    b.enable("d", True)
    assert [v.name for v in decide(b, "INBOX", VIEW, evaluation())] == ["a", "d"]


def test_a_spent_budget_fails_the_rules_left_without_stalling() -> None:
    now = [0.0]
    b = book(("a", {"include": [parse_filter("subject:x")]}),
             ("b", {"include": [parse_filter("subject:Invoice")]}))
    e = Evaluation(MATCHER, 0.05, 0.5, clock=lambda: now[0])
    now[0] = 1.0  # the arrival's half second is gone
    verdicts = decide(b, "INBOX", VIEW, e)
    assert [(v.name, v.status) for v in verdicts] == [("a", FAILED), ("b", FAILED)]
    assert "budget is spent" in verdicts[0].reason


def test_a_catastrophic_pattern_times_out_in_the_matcher() -> None:
    with pytest.raises(FilterTimeout):
        MATCHER.search("(a|aa)+$", "a" * 40 + "!", 0.05)
    b = book(("evil", {"include": [parse_filter("subject:(a|aa)+$")]}),
             ("fine", {}))
    verdicts = decide(b, "INBOX", MessageView(subject="a" * 40 + "!"), evaluation())
    assert [(v.name, v.status) for v in verdicts] == [("evil", FAILED), ("fine", PENDING)]


def test_with_no_matcher_a_filter_is_not_evaluated_but_said_so() -> None:
    b = book(("a", {"include": [parse_filter("subject:x")]}))
    (v,) = decide(b, "INBOX", VIEW, Evaluation(None, 0.05, 1.0))
    assert v.status == FAILED and "no bounded matcher" in v.reason
