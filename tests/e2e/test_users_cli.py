"""`letterlog users list|purge` and the purger's user purge on the default directory (the
store's `users.passwd`), run as an administrator would (subprocess, real data directory)."""

from __future__ import annotations

import os
import signal
import subprocess

from adapters.embedded import Letterlog
from tests.factories import BIN, jrun, run, stored_event_count

SHARED = "shared@example.org"


def store(tmp_path):
    """A store whose roots and rights name ada (known) and gone (not in users.passwd); made
    through the API in this process (one start-up, not seven)."""
    data = tmp_path / "d"
    with Letterlog.open(data, durability="normal") as s:
        s.create_mailbox(SHARED, "Projects", create_account=True)
        s.set_root("gone", f"{SHARED}/Projects")
        s.set_root("ada", SHARED)
        for identifier, rights in (("gone", "lrs"), ("ada", "lr"), ("$sales", "lr")):
            s.acl_set(SHARED, "Projects", identifier, rights)
    (data / "users.passwd").write_text(
        "ada:{PLAIN}x::::::userdb_acl_groups=sales\ngrace:{PLAIN}y\n")
    return data


def test_users_list_shows_the_stores_passwd_file(tmp_path):
    data = tmp_path / "d"  # the directory needs no store
    data.mkdir()
    (data / "users.passwd").write_text(
        "ada:{PLAIN}x::::::userdb_acl_groups=sales\ngrace:{PLAIN}y\n")
    assert jrun(data, "users", "list") == [{"name": "ada", "groups": ["sales"]},
                                           {"name": "grace", "groups": []}]
    (data / "users.passwd").write_text("ada:x:1000:staff\ngrace:y\n")
    bad = run(data, "users", "list", ok=False)  # the bad line is skipped, the rest answered
    assert bad.returncode == 1 and b"Traceback" not in bad.stderr
    assert bad.stdout.decode().split() == ["USER", "GROUPS", "grace", "-"]
    assert bad.stderr.decode().splitlines() == [
        f"user directory: skipped {data / 'users.passwd'}:1: user 'ada': gid 'staff' is"
        " not a number", f"1 user (1 skipped) from passwd-file {data / 'users.passwd'}"]


def test_users_purge_dry_run_then_purge(tmp_path):
    data = store(tmp_path)
    events = stored_event_count(data)
    [dry] = jrun(data, "users", "purge", "--dry-run")
    assert dry["status"] == "dry-run" and [r["user"] for r in dry["roots_removed"]] == ["gone"]
    assert stored_event_count(data) == events and not (data / "user-purge.json").exists()
    text = run(data, "users", "purge").stdout.decode()
    assert f"(again: letterlog root set gone {SHARED}/Projects)" in text
    assert "removed 1 virtual root and 1 ACL entry of unknown users" in text
    assert stored_event_count(data) == events + 2
    assert [r for r in jrun(data, "root", "list") if "gone" in str(r)] == []


def test_the_purger_runs_the_user_purge_when_due(tmp_path):
    data = store(tmp_path)
    env = {**os.environ, "LETTERLOG_DURABILITY": "normal"}
    proc = subprocess.Popen([*BIN, "--data", str(data), "purger", "--interval", "3600"],
                            stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    first = proc.stderr.readline().decode()  # readiness: the purge run's line, then the user's
    users = proc.stderr.readline().decode()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    assert "purge run: purged=0" in first
    assert "user purge: the directory answered 2 users (last accepted: none); removed 1 " \
           "virtual root and 1 ACL entry of unknown users" in users
    [again] = jrun(data, "users", "purge", "--dry-run")
    assert again["previous_users"] == 2 and again["roots_removed"] == []


def test_a_caller_whose_directory_does_not_answer_is_a_temporary_failure(tmp_path):
    data = tmp_path / "d"
    with Letterlog.open(data, durability="normal") as s:
        s.create_mailbox(SHARED, "Projects", create_account=True)
    env = {**os.environ, "LETTERLOG_DURABILITY": "normal", "LETTERLOG_DIRECTORY": "ldap",
           "LETTERLOG_LDAP_URL": "ldap://127.0.0.1:1", "LETTERLOG_LDAP_BASE_DN": "dc=x"}
    p = subprocess.run([*BIN, "--data", str(data), "--as", "bob", "mailbox", "list", SHARED],
                       capture_output=True, env=env, timeout=120)
    err = p.stderr.decode()
    assert p.returncode == 1 and err.count("\n") == 1, err
    assert err.startswith("letterlog: error: the user directory ldap://127.0.0.1:1 (dc=x) "
                          "failed") and "temporary" in err
