"""Event rules on the embedded store: rules as events, rule events raised by arrivals, the
dispatcher against a real HTTP endpoint (failures, a timeout, resend), rebuild and verify."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from adapters.embedded import Letterlog
from domain.errors import InvalidCommand, RuleExists, RuleNotFound
from tests.factories import make_mail
from tests.webhook_endpoint import Endpoint

ACCOUNT = "grace@example.org"


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with Letterlog.open(tmp_path / "data", dispatch_timeout_seconds=0.5,
                        dispatch_backoff_seconds=0.01, dispatch_attempts=5) as s:
        yield s


def invoice(n: int, **kw: Any) -> bytes:
    kw.setdefault("message_id", f"<inv{n}@example.org>")
    return make_mail(f"Invoice {n}", **kw)


def test_an_arrival_raises_one_event_per_applying_rule(store: Any) -> None:
    store.create_rule("invoices", mailboxes=["INBOX"], include=["subject:(?i)^invoice"],
                      exclude=["sender:@spam\\.example$"], webhook="http://127.0.0.1:1/h",
                      properties={"team": "ap"})
    store.create_rule("everything", webhook="http://127.0.0.1:1/h")
    a = store.deliver(account=ACCOUNT, raw=invoice(1))
    store.deliver(account=ACCOUNT, raw=make_mail("Lunch?", message_id="<l@x>"))
    store.deliver(account=ACCOUNT, raw=invoice(2, sender="bot@spam.example"))
    events = store.rule_events(rule="invoices")
    assert [(e["message_id"], e["mailbox"], e["trigger"], e["status"], e["properties"])
            for e in events] == [(str(a.message_id), "INBOX", "delivered", "pending",
                                  {"team": "ap"})]
    assert len(store.rule_events(rule="everything")) == 3


def test_copy_and_move_raise_for_the_target_mailbox(store: Any) -> None:
    store.create_mailbox(ACCOUNT, "Archive", create_account=True)
    store.create_rule("archive", mailbox_pattern="^Arch", webhook="http://127.0.0.1:1/h")
    d = store.deliver(account=ACCOUNT, raw=invoice(1))
    assert store.rule_events() == []
    c = store.copy(d.message_id, "Archive")
    store.move(d.message_id, "Archive")
    got = sorted((e["trigger"], e["message_id"], e["uid"]) for e in store.rule_events())
    assert got == sorted([("copied", str(c.message_id), c.uid),
                          ("moved", str(d.message_id), c.uid + 1)])


def test_attachment_names_and_named_headers_are_filtered(store: Any) -> None:
    raw = (b"From: ada@example.org\r\nSubject: scan\r\nX-Department: Finance\r\n"
           b"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n"
           b"Content-Type: text/plain\r\n\r\nsee attached\r\n--b\r\n"
           b"Content-Type: application/pdf\r\n"
           b"Content-Disposition: attachment; filename=\"PO-4711.pdf\"\r\n\r\n"
           b"JVBERi0=\r\n--b--\r\n")
    store.create_rule("po", include=["^PO-\\d+\\.pdf$"], webhook="http://127.0.0.1:1/h")
    store.create_rule("finance", include=["header:X-Department:^Finance$"],
                      webhook="http://127.0.0.1:1/h")
    store.create_rule("csv", include=["name:\\.csv$"], webhook="http://127.0.0.1:1/h")
    store.deliver(account=ACCOUNT, raw=raw)
    assert sorted(e["rule"] for e in store.rule_events()) == ["finance", "po"]


def test_a_rule_changed_between_two_deliveries_keeps_what_it_raised(store: Any) -> None:
    store.create_rule("r", include=["subject:^Invoice 1$"], webhook="http://127.0.0.1:1/h")
    first = store.deliver(account=ACCOUNT, raw=invoice(1))
    store.change_rule("r", include=["subject:^Invoice 2$"], webhook="http://127.0.0.1:2/h")
    second = store.deliver(account=ACCOUNT, raw=invoice(2))
    store.deliver(account=ACCOUNT, raw=invoice(1, message_id="<again@x>"))
    events = store.rule_events()
    assert [(e["message_id"], e["application"]["url"], e["rule_version"]) for e in events] == [
        (str(first.message_id), "http://127.0.0.1:1/h", 2),
        (str(second.message_id), "http://127.0.0.1:2/h", 3)]
    store.rebuild()
    assert store.rule_events() == events
    assert all(not r.differences for r in store.verify())


def test_a_disabled_rule_raises_nothing_until_enabled(store: Any) -> None:
    store.create_rule("r", webhook="http://127.0.0.1:1/h")
    store.disable_rule("r")
    assert store.rule("r")["enabled"] is False
    store.deliver(account=ACCOUNT, raw=invoice(1))
    assert store.rule_events() == []
    store.enable_rule("r")
    store.deliver(account=ACCOUNT, raw=invoice(2))
    assert len(store.rule_events()) == 1
    store.delete_rule("r")
    with pytest.raises(RuleNotFound):
        store.rule("r")
    assert len(store.rule_events()) == 1  # what it raised stays


def test_bad_rules_are_refused_naming_the_field_and_nothing_is_written(store: Any) -> None:
    head = store.max_position()
    for bad in ({"include": ["subject:("]}, {"webhook": "ftp://x"}, {},
                {"mailboxes": ["INBOX"], "mailbox_pattern": "x"},
                {"include": ["header::x"]}):
        terms = {"webhook": "http://127.0.0.1:1/h", **bad} if "webhook" not in bad else bad
        if bad == {}:
            terms = {}
        with pytest.raises(InvalidCommand):
            store.create_rule("r", **terms)
    assert store.max_position() == head
    store.create_rule("r", webhook="http://127.0.0.1:1/h")
    with pytest.raises(RuleExists):
        store.create_rule("r", webhook="http://127.0.0.1:1/h")


@pytest.mark.wallclock  # bounds a wait in wall-clock time: make test, not test-fast
def test_a_catastrophic_pattern_is_bounded_and_the_delivery_goes_on(tmp_path: Path) -> None:
    # (a|aa)+$ on 40 a's and a '!' backtracks ~fib(40) times: hours in the stdlib ``re``
    with Letterlog.open(tmp_path / "d", rule_search_seconds=0.05,
                        rule_budget_seconds=0.2) as store:
        store.create_rule("hostile", include=["subject:(a|aa)+$"],
                          webhook="http://127.0.0.1:1/h")
        store.create_rule("fine", include=["subject:^a"], webhook="http://127.0.0.1:1/h")
        started = time.monotonic()
        d = store.deliver(account=ACCOUNT, raw=make_mail("a" * 40 + "!"))
        took = time.monotonic() - started
        assert took < 2.0
        assert store.extract(d.message_id).startswith(b"From:")
        events = {e["rule"]: e for e in store.rule_events()}
        assert events["fine"]["status"] == "pending"
        assert events["hostile"]["status"] == "failed"
        assert "not evaluated" in events["hostile"]["reason"]


def test_every_event_ends_complete_through_failures_and_a_timeout(store: Any) -> None:
    with Endpoint(fail_first=2, stall_once=1, stall_seconds=1.5) as hook:
        store.create_rule("all", webhook=hook.url, secret="s3cret-of-the-receiver")
        hook.secret = "s3cret-of-the-receiver"
        ids = [store.deliver(account=ACCOUNT, raw=invoice(i)).message_id for i in range(4)]
        counts = store.dispatch_pending()
        assert counts == {"dispatched": 4, "complete": 4, "failed": 0}
        events = store.rule_events()
        assert {e["status"] for e in events} == {"complete"}
        assert sorted(e["message_id"] for e in events) == sorted(map(str, ids))
        assert sorted(hook.accepted) == sorted(e["id"] for e in events)
        assert all(c["signature_ok"] for c in hook.calls)
        assert events[0]["attempts"] == 4  # 2 × 500, a timeout, then 200
        assert {c["key"] for c in hook.calls} == set(hook.accepted)
        head = store.max_position()
        assert store.dispatch_pending() == {"dispatched": 0, "complete": 0, "failed": 0}
        assert store.max_position() == head
        store.rebuild()
        assert store.rule_events() == events
        assert store.dispatch_pending()["dispatched"] == 0  # a rebuild dispatches nothing


def test_failed_events_are_resent(tmp_path: Path) -> None:
    with Letterlog.open(tmp_path / "d", dispatch_attempts=2,
                        dispatch_backoff_seconds=0.01) as store, \
            Endpoint(fail_first=4) as hook:
        store.create_rule("all", webhook=hook.url)
        store.deliver(account=ACCOUNT, raw=invoice(1))
        store.deliver(account=ACCOUNT, raw=invoice(2))
        assert store.dispatch_pending() == {"dispatched": 2, "complete": 0, "failed": 2}
        failed = store.rule_events(status="failed")
        assert [(e["attempts"], e["reason"]) for e in failed] == [
            (2, f"{hook.url} answered 500")] * 2
        assert store.rule_event_counts()["failed"] == 2
        resent = store.resend(status="failed")
        assert sorted(resent) == sorted(e["id"] for e in failed)
        assert store.dispatch_pending() == {"dispatched": 2, "complete": 2, "failed": 0}
        assert [e["attempts"] for e in store.rule_events()] == [3, 3]
        assert store.rule_event_counts() == {"pending": 0, "processing": 0, "complete": 2,
                                             "failed": 0}


def test_rule_events_are_purged_by_status_after_their_ttls(tmp_path: Path) -> None:
    with Letterlog.open(tmp_path / "d", dispatch_attempts=1,
                        rule_event_complete_ttl_days=7, rule_event_failed_ttl_days=30,
                        rule_event_pending_ttl_days=20) as store, Endpoint() as hook:
        store.create_rule("ok", webhook=hook.url)
        store.create_rule("down", webhook="http://127.0.0.1:1/unreachable")
        for i in range(2):
            store.deliver(account=ACCOUNT, raw=invoice(i))
        store.dispatch_pending()
        store.disable_rule("down")
        store.deliver(account=ACCOUNT, raw=invoice(9))  # pending
        assert store.rule_event_counts() == {"pending": 1, "processing": 0, "complete": 2,
                                             "failed": 2}
        now = datetime.now(UTC)
        head = store.max_position()
        dry = store.purge_rule_events(now + timedelta(days=8), dry_run=True)
        assert dry["purged"] == 2 and store.max_position() == head
        assert store.purge_rule_events(now + timedelta(days=1))["purged"] == 0
        assert store.purge_rule_events(now + timedelta(days=8))["purged"] == 2
        assert store.rule_event_counts() == {"pending": 1, "processing": 0, "complete": 0,
                                             "failed": 2}
        assert store.purge_rule_events(now + timedelta(days=8))["purged"] == 0  # once
        store.purge_rule_events(now + timedelta(days=21))
        assert store.rule_event_counts()["pending"] == 0
        store.purge_rule_events(now + timedelta(days=31))
        assert store.rule_events() == []
        assert all(not r.differences for r in store.verify())


def test_a_dry_run_counts_what_the_run_purges(tmp_path: Path) -> None:
    """Each event once: one resent (two entries in the complete queue) and one whose
    message was erased (due by its status, and its message gone)."""
    with Letterlog.open(tmp_path / "d", dispatch_attempts=1,
                        rule_event_complete_ttl_days=7) as store, Endpoint() as hook:
        store.create_rule("ok", webhook=hook.url)
        ids = [store.deliver(account=ACCOUNT, raw=invoice(i)).message_id for i in range(3)]
        store.dispatch_pending()
        resent = next(e for e in store.rule_events() if e["message_id"] == str(ids[0]))
        store.resend([UUID(resent["id"])])
        store.dispatch_pending()
        store.erase_message(ids[1])
        when = datetime.now(UTC) + timedelta(days=8)
        head = store.max_position()
        dry = store.purge_rule_events(when, dry_run=True)
        assert store.max_position() == head
        run = store.purge_rule_events(when)
        assert (dry["purged"], run["purged"]) == (3, 3)
        assert store.rule_events() == []


def test_a_resent_event_counts_its_ttl_from_its_new_status(tmp_path: Path) -> None:
    with Letterlog.open(tmp_path / "d", dispatch_attempts=1) as store:
        store.create_rule("down", webhook="http://127.0.0.1:1/unreachable")
        store.deliver(account=ACCOUNT, raw=invoice(1))
        store.dispatch_pending()
        store.resend(status="failed")
        # the failed queue's entry is stale now: the double check keeps the event
        report = store.purge_rule_events(datetime.now(UTC) + timedelta(days=31))
        by_queue = {q["queue"]: q for q in report["queues"]}
        assert by_queue["rule-failed"]["kept"] == 1
        assert by_queue["rule-pending"]["purged"] == 1


def test_the_events_of_an_erased_message_go_with_it(store: Any) -> None:
    store.create_rule("r", webhook="http://127.0.0.1:1/h")
    gone = store.deliver(account=ACCOUNT, raw=invoice(1))
    kept = store.deliver(account=ACCOUNT, raw=invoice(2))
    store.erase_message(gone.message_id)
    report = store.purge_rule_events()
    assert report["message_gone"] == 1
    assert [e["message_id"] for e in store.rule_events()] == [str(kept.message_id)]
    assert all(not r.differences for r in store.verify())


def test_a_rule_run_as_a_user_raises_nothing_outside_that_users_virtual_root(
        store: Any) -> None:
    """bob may read all of Team and Team/Inner and his own INBOX, but his root is Team/Inner:
    he cannot name Team, so a rule run as him raises nothing there (as his view refuses
    it), and his own INBOX, outside the root's account, is still his."""
    for name in ("Team", "Team/Inner"):
        store.create_mailbox(ACCOUNT, name, create_account=True)
        store.acl_set(ACCOUNT, name, "bob@example.org", "lr")
    store.set_root("bob@example.org", f"{ACCOUNT}/Team/Inner")
    store.create_rule("bob's", run_as="bob@example.org", webhook="http://127.0.0.1:1/h")
    store.deliver(account=ACCOUNT, raw=invoice(1), mailbox="Team")
    inner = store.deliver(account=ACCOUNT, raw=invoice(2), mailbox="Team/Inner")
    own = store.deliver(account="bob@example.org", raw=invoice(3))
    raised = sorted((e["mailbox"], e["message_id"]) for e in store.rule_events())
    assert raised == sorted([("Team/Inner", str(inner.message_id)),
                             ("INBOX", str(own.message_id))])
    store.delete_root("bob@example.org")
    store.deliver(account=ACCOUNT, raw=invoice(4), mailbox="Team")  # his to read again
    assert "Team" in {e["mailbox"] for e in store.rule_events()}


def test_a_rule_made_without_a_secret_shows_its_random_one_once_and_signs_with_it(
        store: Any) -> None:
    with Endpoint() as hook:
        made = store.create_rule("all", webhook=hook.url).extra["secret"]
        assert len(made) == 64 and made not in repr(store.rule("all"))
        store.deliver(account=ACCOUNT, raw=invoice(1))
        hook.secret = made
        assert store.dispatch_pending()["complete"] == 1
        assert [c["signature_ok"] for c in hook.calls] == [True]
        head = store.max_position()
        for bad in ("short", "with a space in it, long enough", "x" * 513):
            with pytest.raises(InvalidCommand):
                store.rotate_rule_secret("all", bad)
        assert store.max_position() == head


def test_a_rule_run_as_a_user_raises_only_where_that_user_may_read(store: Any) -> None:
    store.create_mailbox(ACCOUNT, "Team", create_account=True)
    store.create_rule("bob's", run_as="bob@example.org", webhook="http://127.0.0.1:1/h")
    assert store.rule("bob's")["run_as"] == "bob@example.org"
    store.deliver(account=ACCOUNT, raw=invoice(1), mailbox="Team")
    store.deliver(account="bob@example.org", raw=invoice(2))  # bob's own INBOX
    assert [e["mailbox"] for e in store.rule_events()] == ["INBOX"]
    store.acl_set(ACCOUNT, "Team", "bob@example.org", "lr")
    shared = store.deliver(account=ACCOUNT, raw=invoice(3), mailbox="Team")
    store.acl_set(ACCOUNT, "Team", "-anyone", "r")  # a negative right wins
    store.deliver(account=ACCOUNT, raw=invoice(4), mailbox="Team")
    team = [e["message_id"] for e in store.rule_events() if e["mailbox"] == "Team"]
    assert team == [str(shared.message_id)]
    with pytest.raises(InvalidCommand):
        store.create_rule("groups", run_as="$staff", webhook="http://127.0.0.1:1/h")
