"""Event rules on the scale-out path (real PostgreSQL, Kafka and HBase, started by the
suite): the rule book's and the rule events' events go through the relay and a faust worker
into HBase, and the rules, rule_events and rule_event_queue tables there are identical, cell
for cell, to a fold of the log: statuses, attempts, resends and purges included."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.rules.webhook import Webhook
from tests.factories import make_mail
from tests.stream_support import story
from tests.webhook_endpoint import Endpoint

pytestmark = pytest.mark.services

SECRET = "k3y-of-the-kafka-rule"  # 16 to 512 printable characters (ADR 0078)


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


def test_the_kafka_application_publishes_each_event_keyed_and_signed(tmp_path, kafka_server):
    import asyncio
    import secrets as tokens

    from aiokafka import AIOKafkaConsumer

    from adapters.embedded import Letterlog
    from adapters.rules.webhook import signature

    topic = f"rules-{tokens.token_hex(4)}"
    with Letterlog.open(tmp_path / "data", kafka_bootstrap=kafka_server.bootstrap) as store:
        store.create_rule("to-kafka", kafka_topic=topic, secret=SECRET,
                          properties={"team": "ops"})
        for i in range(3):
            store.deliver(account="ada@example.org",
                          raw=make_mail(f"n{i}", message_id=f"<{i}@x>"))
        assert store.dispatch_pending() == {"dispatched": 3, "complete": 3, "failed": 0}
        ids = sorted(e["id"] for e in store.rule_events(status="complete"))

    async def read() -> list[Any]:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=kafka_server.bootstrap,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            got: list[Any] = []
            while len(got) < 3:
                batch = await consumer.getmany(timeout_ms=10_000)
                assert batch, "no record within 10 s"
                for records in batch.values():
                    got.extend(records)
            return got
        finally:
            await consumer.stop()

    records = asyncio.run(read())
    assert sorted(r.key.decode() for r in records) == ids
    for r in records:
        headers = dict(r.headers)
        assert headers["Idempotency-Key"] == r.key
        assert headers["X-Letterlog-Signature"].decode() == signature(SECRET, r.value)
        assert json.loads(r.value)["properties"] == {"team": "ops"}
