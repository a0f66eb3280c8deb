"""Purge jobs on the embedded store: due vs not due, the double check, pointers, concurrency."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from adapters.embedded import Letterlog
from domain.message import Message
from projections.keys import PURGE_SHARDS, minute_bucket, purge_shard
from tests.factories import make_mail

ADA = "ada@example.org"
BIG = "x" * 20_000  # over the inline limit: goes to the payload store


@pytest.fixture
def store(tmp_path):
    s = Letterlog.open(tmp_path / "data", durability="normal")
    yield s
    s.close()


def deliver(store, n=1, body="Hi.\r\n", **kw):
    return [store.deliver(account=ADA, raw=make_mail(f"m{i}", message_id=f"<{i}@x>", body=body),
                          **kw) for i in range(n)]


RAW_BIG = make_mail("big", body=BIG)


def deliver_big(store, n=1):
    return [store.deliver(account=ADA, raw=RAW_BIG) for _ in range(n)]


def later(**kw):
    return datetime.now(UTC) + timedelta(**kw)


def purges(store):
    return Counter(e.originator_id for _, e in store.events() if isinstance(e, Message.Purged))


def test_a_deleted_message_is_kept_until_its_retention_has_passed(store):
    a, b = deliver(store, 2)
    store.delete(a.message_id)
    assert store.purge(later(days=29)).as_dict()["purged"] == 0
    assert store.mail.message(a.message_id).state == "deleted"
    report = store.purge(later(days=31)).as_dict()
    assert report["purged"] == 1 and purges(store) == {a.message_id: 1}
    assert store.mail.message(a.message_id).state == "purged"
    assert [m.uid for m in store.messages(ADA)] == [b.uid]


def test_a_message_restored_before_the_purge_is_kept(store):
    [a] = deliver(store)
    store.delete(a.message_id)
    store.restore(a.message_id)
    report = store.purge(later(days=31)).as_dict()
    assert report["purged"] == 0 and report["kept"] == 1
    assert [m.uid for m in store.messages(ADA)] == [a.uid]


def test_purging_keeps_counters_exact_and_never_reuses_a_uid(store):
    a, b = deliver(store, 2, labels=["work"])
    store.delete(b.message_id)  # the highest UID
    store.purge(later(days=31))
    counters = store.counters(ADA)
    assert counters["mailboxes"]["INBOX"]["messages"] == 1
    assert counters["labels"]["work"]["messages"] == 1
    [c] = deliver(store)
    assert c.uid == b.uid + 1
    assert store.label_messages(ADA, "work")[0].uid == a.uid
    assert all(r.identical for r in store.verify())


def test_an_until_date_expires_the_message_then_the_expired_ttl_purges_it(store):
    [a] = deliver(store, extract_until=later(days=1))
    assert store.purge(later(hours=12)).as_dict()["expired"] == 0
    assert store.purge(later(days=2)).as_dict()["expired"] == 1
    assert store.mail.message(a.message_id).state == "expired"
    assert store.purge(later(days=30)).as_dict()["purged"] == 0  # 29 days after the date
    assert store.purge(later(days=32)).as_dict()["purged"] == 1


def test_a_policy_relaxed_after_expiry_cancels_the_countdown(store):
    [a] = deliver(store, extract_limit=1)
    store.extract(a.message_id)
    assert store.mail.message(a.message_id).state == "expired"
    store.set_policy(a.message_id)  # indefinite again: extractable
    report = store.purge(later(days=31)).as_dict()
    assert report["purged"] == 0 and report["kept"] == 1
    assert store.extract(a.message_id)


def test_an_unfinished_upload_is_purged_after_its_ttl_with_its_chunks(store):
    upload = store.begin_upload(account=ADA).message_id
    store.append_chunk(upload, 0, BIG.encode())
    assert store.purge(later(days=1)).as_dict()["purged"] == 0
    report = store.purge(later(days=3)).as_dict()
    assert report["purged"] == 1 and report["payloads_freed"] == 1
    assert list(store.payloads.list()) == []


def purge_message(store, message_id):
    store.delete(message_id)
    return store.purge(later(days=31), ["deleted"]).as_dict()["purged"]


def test_a_shared_payload_stays_while_any_message_refers_to_it(store):
    a, b = deliver_big(store, 2)
    assert len(list(store.payloads.list())) == 1
    assert purge_message(store, a.message_id) == 1
    assert store.purge(later(days=1), ["payloads"]).as_dict()["payloads_freed"] == 0
    assert len(list(store.payloads.list())) == 1  # b still refers to it
    store.delete(b.message_id)
    report = store.purge(later(days=31), ["deleted"]).as_dict()
    assert report["purged"] == 1 and report["payloads_freed"] == 1  # its last reference
    assert list(store.payloads.list()) == []


@pytest.mark.parametrize("grace_hours", ["0", "12"])
def test_a_purge_run_deletes_its_purged_messages_payloads_in_the_same_run(
        tmp_path, monkeypatch, grace_hours):
    """ADR 0071: a run's own purges free their payloads before it returns (as an erasure
    does: no grace period, whatever ``LETTERLOG_PAYLOAD_GRACE_HOURS``): when it exits 0 no
    byte of a purged message is left. Before, the purge touched the payload after the run's
    ``now`` was fixed, and the payload job of that run kept it (even with a 0 h grace)."""
    monkeypatch.setenv("LETTERLOG_DELETED_RETENTION_DAYS", "0")
    monkeypatch.setenv("LETTERLOG_PAYLOAD_GRACE_HOURS", grace_hours)
    with Letterlog.open(tmp_path / "data", durability="normal") as store:
        [a] = deliver_big(store)
        [(sha, size, _)] = list(store.payloads.list())
        store.delete(a.message_id)
        report = store.purge().as_dict()  # now: the run's own clock
        assert report["purged"] == 1
        assert (report["payloads_freed"], report["payload_bytes_freed"]) == (1, size)
        assert list(store.payloads.list()) == [] and not store.payloads.exists(sha)


def test_a_payload_referred_to_again_during_its_grace_period_is_kept(store):
    [a] = deliver_big(store)
    assert purge_message(store, a.message_id) == 1
    [c] = deliver_big(store)
    assert store.purge(later(hours=13), ["payloads"]).as_dict()["payloads_freed"] == 0
    assert store.extract(c.message_id) == RAW_BIG


def test_an_erased_message_s_payload_goes_at_once_unless_another_refers_to_it(store):
    a, b = deliver_big(store, 2)
    assert store.erase_message(a.message_id)["payload_bytes_freed"] == 0
    assert store.erase_message(b.message_id)["payload_bytes_freed"] > 10 * 1024
    assert list(store.payloads.list()) == []


def test_an_orphan_payload_is_collected_after_the_grace_period(store):
    store.payloads.put(b"never referred to " * 1000)
    assert store.purge(later(hours=1)).as_dict()["payloads_freed"] == 0
    assert store.purge(later(hours=13)).as_dict()["payload_bytes_freed"] == 18_000


def test_a_dry_run_decides_and_changes_nothing(store):
    [a] = deliver(store)
    store.delete(a.message_id)
    report = store.purge(later(days=31), dry_run=True).as_dict()
    assert report["purged"] == 1 and purges(store) == {}
    assert store.purge_jobs().pointer("deleted", 0) is None


def test_the_purge_jobs_are_handed_their_parts_and_never_call_back_into_the_facade(store):
    """ADR 0056: bootstrap builds what the jobs call after an append, after a run and to
    catch up (``lifecycle.shredding``, the read side); none of it is a method of the facade,
    and a purge through them still destroys the keys and truncates the files."""
    jobs = store.purge_jobs()
    callbacks = (jobs.catch_up, jobs.after_run, jobs.purging.on_purged)
    owners = [getattr(getattr(c, "func", c), "__self__", None) for c in callbacks]
    assert owners[1] is owners[2] is store.shredding and owners[0] is store.projections
    assert not any(isinstance(owner, Letterlog) for owner in owners)
    [a] = deliver(store)
    store.delete(a.message_id)
    report = jobs.run(later(days=31))
    assert report.total("purged") == 1 and store.completion is store.shredding.completion
    assert store.completion is not None and store.shredding.unfinished == 0


def test_the_pointer_moves_to_the_horizon_and_peek_back_finds_late_entries(tmp_path):
    for peek, found in ((60, 1), (0, 0)):
        store = Letterlog.open(tmp_path / f"d{peek}", durability="normal",
                               purge_peek_back_minutes=peek)
        jobs = store.purge_jobs()
        jobs.clock = lambda: later(minutes=30)  # as if projection lagged 30 minutes behind
        first = later(days=30, minutes=30)
        jobs.run(first, ("deleted",))
        horizon = minute_bucket(first - timedelta(days=30))
        assert {jobs.pointer("deleted", s) for s in range(PURGE_SHARDS)} == {horizon}
        [a] = deliver(store)
        store.delete(a.message_id)  # queued 30 minutes behind the pointers
        assert store.purge(later(days=31), ["deleted"]).as_dict()["purged"] == found
        store.close()


def test_a_run_as_if_in_the_future_does_not_make_later_entries_skipped(store):
    store.purge(later(days=400))
    [a] = deliver(store)
    store.delete(a.message_id)
    assert store.purge(later(days=31)).as_dict()["purged"] == 1


def test_a_purger_stopped_mid_bucket_resumes_without_skipping_or_purging_early(store):
    due = deliver(store, 12)
    for d in due:
        store.delete(d.message_id)
    [kept] = deliver(store, 1)
    jobs = store.purge_jobs()
    jobs.batch, jobs.threads = 2, 1

    def stop_after_first_batch(queue, n):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        jobs.run(later(days=31), ("deleted",), progress=stop_after_first_batch)
    done = purges(store)
    assert 0 < sum(done.values()) < len(due)
    left = [d.message_id for d in due if d.message_id not in done]
    assert {jobs.pointer("deleted", purge_shard(i)) for i in left} == {None}
    store.delete(kept.message_id)
    assert store.purge(later(days=29)).as_dict()["purged"] == 0
    store.purge(later(days=31), ["deleted"])
    store.purge(later(days=31), ["deleted"])
    assert purges(store) == {d.message_id: 1 for d in [*due, kept]}


def test_two_purger_processes_at_once_purge_each_message_once(store, tmp_path):
    ids = [d.message_id for d in deliver(store, 40)]
    store.expunge(ids)
    store.close()
    data = str(tmp_path / "data")
    cmd = [sys.executable, "-m", "adapters.cli", "--data", data, "--json", "purge", "run"]
    # due at once with no retention (--now is only for --dry-run)
    env = {**os.environ, "LETTERLOG_DELETED_RETENTION_DAYS": "0"}
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
             for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    import json

    reported = sum(json.loads(o.splitlines()[-1])["purged"] for o, _ in outputs)
    reopened = Letterlog.open(data, durability="normal")
    assert purges(reopened) == {i: 1 for i in ids}
    assert reported == 40
    assert all(r.identical for r in reopened.verify())
    reopened.close()


def test_after_purges_a_rebuild_equals_the_live_tables(store):
    ds = deliver(store, 6, labels=["l"])
    big = deliver_big(store, 2)
    store.delete(ds[0].message_id)
    store.expunge([ds[1].message_id, big[0].message_id])
    store.flag(ds[2].message_id, ["\\Seen"])
    store.erase_message(ds[3].message_id)
    store.purge(later(days=31))
    store.rebuild()
    assert all(r.identical for r in store.verify())
