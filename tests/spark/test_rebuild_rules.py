"""The Spark rebuild (local[2]) of a store with event rules: the rules, rule_events and
rule_event_queue tables come back identical to the live ones (statuses, attempts and purges
included), and rebuilding dispatches nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import pytest

from adapters.config.settings import load_settings
from adapters.embedded import Letterlog
from spark_replay.job import rebuild
from tests.factories import make_mail
from tests.webhook_endpoint import Endpoint

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_a_spark_rebuild_gives_the_same_rules_and_rule_events(spark, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Letterlog.open(data, dispatch_attempts=1) as store, Endpoint(fail_first=2) as hook:
        store.create_rule("all", webhook=hook.url, properties={"k": "v"})
        store.create_rule("archive", mailbox_pattern="^Arch", webhook=hook.url)
        store.create_rule("subject", include=["subject:^Invoice"], webhook=hook.url)
        for i, person in enumerate(("ada@example.org", "grace@example.org", "alan@example.org")):
            store.create_mailbox(person, "Archive", create_account=True)
            d = store.deliver(account=person, raw=make_mail(f"Invoice {i}",
                                                            message_id=f"<{i}@x>"))
            store.copy(d.message_id, "Archive")
            store.deliver(account=person, raw=make_mail("Lunch", message_id=f"<l{i}@x>"))
        store.change_rule("subject", include=["subject:^Lunch"], webhook=hook.url)
        store.disable_rule("archive")
        store.dispatch_pending()  # two fail (the endpoint's first two answers)
        store.resend([UUID(store.rule_events(status="failed")[0]["id"])])
        store.delete_rule("all")
        store.purge_rule_events(datetime.now(UTC) + timedelta(days=8))  # complete ones go
        store.deliver(account="ada@example.org", raw=make_mail("Lunch 9"))  # pending
        before = store.rule_events()
        assert {e["status"] for e in before} == {"pending", "failed"}
        rules = store.rules()
        calls = len(hook.calls)
    assert before and rules
    rebuild(load_settings(data=data), spark=spark)
    with Letterlog.open(data) as store:
        assert store.rule_events() == before
        assert store.rules() == rules
        reports = store.verify()
    assert all(r.identical for r in reports), [r.as_dict() for r in reports
                                               if not r.identical]
    tables = {r.table for r in reports}
    assert {"rules", "rule_events", "rule_event_queue"} <= tables
    assert len(hook.calls) == calls
