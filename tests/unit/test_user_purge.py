"""The user purge job on fakes: what it removes (only users the directory does not know),
what it never removes (groups, anyone, authenticated), and when it refuses to decide (a
directory that failed, answered no one, or far fewer users than last time)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.directory.passwdfile import PasswdFileDirectory
from adapters.lifecycle.purgememory import PurgeMemory, due
from adapters.lifecycle.userpurge import purge_users
from domain.directory import DirectoryUnavailable, DirectoryUser
from domain.userpurge import plan_user_purge, user_of
from tests.factories import FakeRecords, records


@dataclass
class FakeDirectory:
    names: list[str]
    down: bool = False

    source = "fake directory"

    def users(self) -> list[DirectoryUser]:
        if self.down:
            raise DirectoryUnavailable(self.source, "timed out", timed_out=True)
        return [DirectoryUser(n) for n in sorted(self.names)]

    def user(self, name: str) -> DirectoryUser | None:
        return next((u for u in self.users() if u.name == name), None)








def run(directory, recs, tmp_path: Path, **options):
    options.setdefault("min_ratio", 0.5)
    return purge_users(directory, recs, PurgeMemory(tmp_path / "user-purge.json"), **options)


@pytest.mark.parametrize(("identifier", "user"), [
    ("ada", "ada"), ("-ada", "ada"), ("$sales", None), ("-$sales", None), ("anyone", None),
    ("authenticated", None), ("-anyone", None), ("Anyone", None), ("-", None),
])
def test_which_user_an_identifier_names(identifier, user):
    assert user_of(identifier) == user


def test_removes_the_roots_and_rights_of_unknown_users_only(tmp_path):
    recs = records()
    report = run(FakeDirectory(["ada", "grace"]), recs, tmp_path)
    assert report.status == "purged" and report.directory_users == 2
    assert report.roots_removed == [{"user": "gone", "root": "shared@example.org/Projects"}]
    assert [(e["identifier"], e["rights"]) for e in report.acl_removed] == [("gone", "lrswi")]
    # a negative entry is kept: removing it would give "gone" back 'w' should it return
    assert [(e["identifier"], e["rights"]) for e in report.negative_kept] == [("-gone", "w")]
    assert "kept 1 negative entry (removing one would widen access)" in report.line()
    assert set(recs.root) == {"ada", "Grace"}  # a user known in another case is kept
    assert {e[2] for e in recs.acl} == {"ada", "$sales", "-$interns", "anyone",
                                        "authenticated", "grace", "-gone"}
    assert report.position == 2
    assert PurgeMemory(tmp_path / "user-purge.json").previous_users() == 2
    assert PurgeMemory(tmp_path / "user-purge.json").previous_names() == ["ada", "grace"]


def test_a_dry_run_decides_the_same_and_writes_nothing(tmp_path):
    recs = records()
    report = run(FakeDirectory(["ada", "grace"]), recs, tmp_path, dry_run=True)
    assert report.dry_run and report.status == "dry-run"
    assert [r["user"] for r in report.roots_removed] == ["gone"]
    assert len(report.acl_removed) == 1 and len(report.negative_kept) == 1
    assert recs.calls == [] and recs.root == records().root
    assert not (tmp_path / "user-purge.json").exists()


def test_a_directory_that_fails_removes_nothing_and_says_why(tmp_path):
    recs = records()
    report = run(FakeDirectory(["ada"], down=True), recs, tmp_path)
    assert report.status == "refused" and recs.calls == []
    assert "did not answer in time" in report.reason and report.line().startswith(
        "user purge refused, nothing removed")
    memory = PurgeMemory(tmp_path / "user-purge.json").read()
    assert memory["last_refusal"]["reason"] == report.reason and "users" not in memory


def test_an_answer_of_no_user_is_refused_even_the_first_time(tmp_path):
    recs = records()
    report = run(FakeDirectory([]), recs, tmp_path)
    assert report.status == "refused" and "no user at all" in report.reason
    assert recs.calls == []


def test_far_fewer_users_than_last_time_is_refused_and_the_count_kept(tmp_path):
    everyone = [f"user{i}" for i in range(10)] + ["ada", "grace"]
    assert run(FakeDirectory(everyone), records(), tmp_path).status == "purged"
    recs = records()
    report = run(FakeDirectory(["ada", "grace", "user1", "user2", "user3"]), recs, tmp_path)
    assert report.status == "refused" and recs.calls == []
    assert "answered 5 users, fewer than 50% of the 12" in report.reason
    assert "at least 6 needed" in report.reason
    assert PurgeMemory(tmp_path / "user-purge.json").previous_users() == 12
    # exactly at the threshold is accepted
    six = ["ada", "grace", "user1", "user2", "user3", "user4"]
    assert run(FakeDirectory(six), records(), tmp_path).status == "purged"
    assert PurgeMemory(tmp_path / "user-purge.json").previous_users() == 6


def test_as_many_users_but_other_ones_is_refused(tmp_path):
    """A base DN mistyped onto another branch holding 12 unrelated users: the count passes,
    the overlap with the last accepted users does not."""
    staff = [f"staff{i}" for i in range(12)]
    assert run(FakeDirectory(staff + ["ada", "grace"]), records(), tmp_path).status == "purged"
    recs = records()
    report = run(FakeDirectory([f"other{i}" for i in range(14)]), recs, tmp_path)
    assert report.status == "refused" and recs.calls == []
    assert "shares 0 of the 14 users of the last accepted answer" in report.reason
    assert "at least 7 needed" in report.reason
    # half of the last accepted users, and newcomers: accepted
    half = staff[:5] + ["ada", "grace"] + [f"new{i}" for i in range(7)]
    assert run(FakeDirectory(half), records(), tmp_path).status == "purged"


def test_names_compare_as_the_identity_rule_has_them(tmp_path):
    recs = records()
    recs.acl.append(("shared@example.org", "Projects", "\u017fam", "lr"))  # refused: kept
    report = run(FakeDirectory(["ADA", "\uff47race", "gone2"]), recs, tmp_path)
    assert [r["user"] for r in report.roots_removed] == ["gone"]
    assert [e["identifier"] for e in report.acl_removed] == ["gone"]


def test_an_answer_that_skipped_an_entry_is_refused(tmp_path):
    path = tmp_path / "users.passwd"
    path.write_text("ada:x\ngrace:x\nbroken:x:1:staff\n")
    recs = records()
    report = run(PasswdFileDirectory(path), recs, tmp_path)
    assert report.status == "refused" and recs.calls == []
    assert f"skipped 1 entry it could not read ({path}:3)" in report.reason


def test_an_administrator_may_accept_a_directory_that_really_shrank(tmp_path):
    PurgeMemory(tmp_path / "user-purge.json").accepted(100, datetime.now(UTC), "x")
    report = run(FakeDirectory(["ada", "grace"]), records(), tmp_path, accept_shrink=True)
    assert report.status == "purged" and len(report.roots_removed) == 1
    assert run(FakeDirectory([]), records(), tmp_path, accept_shrink=True).status == "refused"


def test_a_record_removed_meanwhile_is_not_reported(tmp_path):
    recs = records()

    class Racing(FakeRecords):
        def roots(self) -> dict[str, str]:
            found = super().roots()
            self.root.pop("gone")  # another administrator deletes it first
            return found

    racing = Racing(root=recs.root, acl=recs.acl)
    report = run(FakeDirectory(["ada", "grace"]), racing, tmp_path)
    assert report.roots_removed == [] and len(report.acl_removed) == 1


def test_the_job_is_due_after_its_interval_since_the_last_accepted_run(tmp_path):
    memory = PurgeMemory(tmp_path / "user-purge.json")
    now = datetime(2026, 11, 26, tzinfo=UTC)
    week = timedelta(days=7)
    assert due(memory, week, now)
    memory.accepted(3, now, "x")
    memory.refused("down", now + timedelta(days=3))  # a refusal does not count as a run
    assert not due(memory, week, now + timedelta(days=6))
    assert due(memory, week, now + week)


def test_the_plan_is_the_same_for_any_order_of_records():
    acl = records().acl
    a = plan_user_purge(["ada"], None, 0.5, records().root, acl)
    b = plan_user_purge(["ada"], None, 0.5, dict(reversed(list(records().root.items()))),
                        list(reversed(acl)))
    assert a == b


def test_with_no_record_to_check_the_directory_is_not_asked(tmp_path):
    report = run(FakeDirectory([], down=True), FakeRecords(), tmp_path)
    assert report.status == "nothing" and "not asked" in report.line()
    assert not (tmp_path / "user-purge.json").exists()


def test_the_purger_runs_the_job_when_due_and_logs_a_refusal_as_a_warning(tmp_path, caplog):
    import logging
    import threading
    from types import SimpleNamespace

    from adapters.lifecycle.scheduled import run_purger
    from adapters.lifecycle.scheduleduserpurge import ScheduledUserPurge

    stop = threading.Event()
    answers = [["ada", "grace"], ["ada", "grace"]]

    class Store(FakeRecords):
        settings = SimpleNamespace(data=tmp_path, table_store="embedded",
                                   purge_interval_seconds=0, user_purge_interval_days=7,
                                   user_purge_min_ratio=0.5)
        completion = None
        runs = 0

        def purge(self, now, queues):
            self.runs += 1
            if self.runs == 3:
                stop.set()
            report = dict.fromkeys(("purged", "expired", "kept", "payloads_freed",
                                    "payload_bytes_freed"), 0)
            return SimpleNamespace(as_dict=lambda: report)

        def close(self):
            pass

    store = Store(root=records().root, acl=records().acl)
    directories = [FakeDirectory([], down=True), FakeDirectory(answers[0])]
    with caplog.at_level(logging.INFO, logger="letterlog.purger"):
        run_purger(tmp_path, None, None, stop, open_store=lambda data: store,
                   user_purge=ScheduledUserPurge(lambda settings: directories.pop(0)))
    said = [(r.levelno, r.getMessage()) for r in caplog.records
            if r.getMessage().startswith("user purge")]
    assert said[0][0] == logging.WARNING and "refused" in said[0][1]  # run 1: down
    assert said[1][0] == logging.INFO  # run 2: accepted
    assert "removed 1 virtual root and 1 ACL entry" in said[1][1]
    assert len(said) == 2 and directories == []  # run 3: not due for 7 days
    assert "gone" not in store.root


def test_a_store_without_roots_or_acls_is_left_alone(tmp_path):
    class Bare:
        pass

    report = run(FakeDirectory([], down=True), Bare(), tmp_path)
    assert report.status == "nothing" and "keeps no virtual roots" in report.reason
