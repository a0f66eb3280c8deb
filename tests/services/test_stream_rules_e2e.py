"""Event rules on the scale-out path (real PostgreSQL, Kafka and HBase, started by the
suite): the rule book's and the rule events' events go through the relay and a faust worker
into HBase, and the rules, rule_events and rule_event_queue tables there are identical, cell
for cell, to a fold of the log: statuses, attempts, resends and purges included."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from adapters.rules.webhook import Webhook
from tests.conftest import make_mail
from tests.services.test_stream_e2e import pipeline  # noqa: F401 - the fixture
from tests.unit.test_stream_projector import story
from tests.webhook_endpoint import Endpoint

pytestmark = pytest.mark.services


def test_rule_events_reach_hbase_identical_to_a_fold_of_the_log(pipeline):  # noqa: F811
    store = pipeline.letterlog
    with Endpoint(fail_first=3) as hook:
        store.create_rule("all", webhook=hook.url, properties={"team": "ops"})
        store.create_rule("archive", mailbox_pattern="^Archive$", webhook=hook.url)
        store.create_rule("plans", include=["subject:^Plan"], exclude=["subject:^Re:"],
                          webhook=hook.url)
        story(store, rounds=1)  # deliveries, copies, moves, purges of a little of everything
        store.change_rule("plans", include=["subject:^Re: Plan"], webhook=hook.url)
        store.disable_rule("archive")
        store.deliver(account="ada@example.org", raw=make_mail("Plan Z", message_id="<z@x>"))
        once = {"webhook": Webhook(timeout=5, attempts=1, backoff=0)}  # no retry: 3 fail
        counts = store.dispatch_pending(once)
        assert counts["dispatched"] > 3 and counts["failed"] == 3
        store.resend(status="failed")
        assert store.dispatch_pending(once)["complete"] == 3
        store.purge_rule_events(datetime.now(UTC) + timedelta(days=8))
        store.deliver(account="ada@example.org", raw=make_mail("Plan Y", message_id="<y@x>"))
    assert store.rule_event_counts()["pending"] >= 1
    assert pipeline.publish() == store.max_position()
    pipeline.worker.start()
    pipeline.wait_caught_up()
    pipeline.assert_tables_equal_the_fold()
    names = set(pipeline.tables.list_tables())
    assert any(t.endswith("rule_events") for t in names), names
