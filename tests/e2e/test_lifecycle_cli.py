"""``letterlog purge run``, ``letterlog purger``, ``erase-message`` and ``erase-account``, run
as a user would (subprocess, real data directory)."""

from __future__ import annotations

import os
import signal
import subprocess
from datetime import UTC, datetime, timedelta

from tests.factories import BIN, jrun, run


def test_purge_run_purges_only_what_is_due_and_summarises(tmp_path, mail_file, monkeypatch):
    data = tmp_path / "d"
    [delivered] = jrun(data, "deliver", str(mail_file), "--account", "ada@example.org")
    run(data, "delete", delivered["message_id"])  # kept 30 days
    [early] = jrun(data, "purge", "run")
    assert early["purged"] == 0
    soon = (datetime.now(UTC) + timedelta(days=29)).isoformat()
    [early] = jrun(data, "purge", "run", "--now", soon, "--dry-run")
    assert early["purged"] == 0
    due = (datetime.now(UTC) + timedelta(days=31)).isoformat()
    [dry] = jrun(data, "purge", "run", "--queue", "deleted", "--now", due, "--dry-run")
    assert dry["purged"] == 1 and [q["queue"] for q in dry["queues"]] == ["deleted"]
    assert dry["dry_run"]
    monkeypatch.setenv("LETTERLOG_DELETED_RETENTION_DAYS", "0")  # how tests make it due
    text = run(data, "purge", "run").stdout.decode()
    assert "purged 1 messages" in text
    assert jrun(data, "list", "ada@example.org") == []

def test_purge_run_now_without_dry_run_is_refused_and_purges_nothing(tmp_path, mail_file):
    data = tmp_path / "d"
    [delivered] = jrun(data, "deliver", str(mail_file), "--account", "ada@example.org")
    run(data, "delete", delivered["message_id"])
    due = (datetime.now(UTC) + timedelta(days=31)).isoformat()
    p = run(data, "purge", "run", "--now", due, ok=False)
    err = p.stderr.decode()
    assert p.returncode == 2 and p.stdout == b"", err
    assert "--now: only with --dry-run" in err and "now=" in err and "Traceback" not in err
    [shown] = jrun(data, "show", delivered["message_id"])
    assert shown["state"] == "deleted"
    [dry] = jrun(data, "purge", "run", "--now", due, "--dry-run")
    assert dry["purged"] == 1  # still there to purge


def test_purge_run_names_a_bad_queue_or_date_without_a_traceback(tmp_path):
    for args, needle in ((["--queue", "trash"], "--queue: 'trash'"),
                         (["--now", "tomorrow"], "--now: 'tomorrow'")):
        p = run(tmp_path / "d", "purge", "run", *args, ok=False)
        assert p.returncode == 2 and needle in p.stderr.decode()
        assert b"Traceback" not in p.stderr


def test_the_purger_logs_one_line_per_run_and_stops_on_sigterm(tmp_path, mail_file):
    jrun(tmp_path / "d", "deliver", str(mail_file), "--account", "ada@example.org")
    env = {**os.environ, "LETTERLOG_DURABILITY": "normal"}
    proc = subprocess.Popen([*BIN, "--data", str(tmp_path / "d"), "purger", "--interval", "3600"],
                            stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    first = proc.stderr.readline().decode()  # readiness: the first run's line
    assert "purge run: purged=0" in first
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    assert "purger stopped" in proc.stderr.read().decode()


def test_erase_account_and_erase_message_report_what_was_destroyed(tmp_path, mail_file):
    data = tmp_path / "d"
    [a] = jrun(data, "deliver", str(mail_file), "--account", "ada@example.org")
    [b] = jrun(data, "deliver", str(mail_file), "--account", "bob@example.org")
    [erased] = jrun(data, "erase-account", "ada@example.org")
    assert erased["purged"] == [a["message_id"]] and erased["bytes"] == a["size"]
    [again] = jrun(data, "erase-message", b["message_id"])
    assert again["purged"] == [b["message_id"]]
    [twice] = jrun(data, "erase-message", b["message_id"])
    assert twice["purged"] == [] and twice["already_purged"] == [b["message_id"]]
    p = run(data, "erase-message", "not-an-id", ok=False)
    assert p.returncode == 2 and b"Traceback" not in p.stderr
