"""The command line as a new user meets it (issue 29, item 6): what a first session trips
over, each fixed and checked here as a user runs it (a subprocess, a real data directory)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from tests.factories import jrun, make_mail, run

ADA = "ada@example.org"


def _deliver(data: Path, tmp_path: Path, subject: str, *args: str) -> dict:
    f = tmp_path / f"{subject}.eml"
    f.write_bytes(make_mail(subject, message_id=f"<{subject}@x>"))
    [d] = jrun(data, "deliver", "--account", ADA, *args, str(f))
    return d


def test_listings_show_each_message_id_in_a_column_of_its_own(tmp_path):
    data = tmp_path / "d"
    first = _deliver(data, tmp_path, "first", "--label", "work")
    second = _deliver(data, tmp_path, "second", "--label", "work")
    [shown] = jrun(data, "show", first["message_id"])
    ids = [second["message_id"], first["message_id"]]  # newest first
    for args in (["list", ADA], ["search", ADA, "--subject", ""], ["labelled", ADA, "work"],
                 ["thread", second["message_id"]]):
        header, *rows = run(data, *args).stdout.decode().splitlines()
        if args[0] == "thread":  # one thread per message here
            assert [r for r in rows if second["message_id"] in r] == rows and len(rows) == 1
            continue
        at = header.index("MESSAGE ID")
        assert [r[at:at + 36] for r in rows] == ids, args  # one aligned column
        assert all(r.rstrip().endswith("work") for r in rows)  # labels stay last
    assert shown["message_id"] == first["message_id"]
    # the id shown works in every message command
    row = run(data, "list", ADA).stdout.decode().splitlines()[1]
    at = run(data, "list", ADA).stdout.decode().splitlines()[0].index("MESSAGE ID")
    assert run(data, "flag", row[at:at + 36], "\\Seen").returncode == 0
    # JSON is unchanged: it had the id already
    assert [m["message_id"] for m in jrun(data, "list", ADA)] == ids


def test_flag_replace_with_no_flag_or_clear_removes_every_flag(tmp_path):
    data = tmp_path / "d"
    mid = _deliver(data, tmp_path, "m", "--flag", "\\Seen", "--flag", "work")["message_id"]
    [r] = jrun(data, "flag", mid, "--replace")
    assert r["flags"] == [] and r["changed"] is True
    run(data, "flag", mid, "\\Flagged", "$Forwarded")
    p = run(data, "flag", mid, "--clear")
    assert p.stdout.decode().strip() == f"{mid}: flags -"
    [r] = jrun(data, "flag", mid, "--clear")
    assert r["flags"] == [] and r["changed"] is False
    [shown] = jrun(data, "show", mid)
    assert shown["flags"] == []


def test_flag_without_a_flag_says_how_to_clear_and_changes_nothing(tmp_path):
    data = tmp_path / "d"
    mid = _deliver(data, tmp_path, "m", "--flag", "\\Seen")["message_id"]
    for args, needle in ((["flag", mid], b"--clear"),
                         (["flag", mid, "--clear", "\\Seen"], b"--clear takes no FLAG"),
                         (["flag", mid, "--remove", "--clear"], b"exclude each other")):
        p = run(data, *args, ok=False)
        assert p.returncode == 2 and needle in p.stderr and b"Traceback" not in p.stderr
    [shown] = jrun(data, "show", mid)
    assert shown["flags"] == ["\\Seen"]


def _mbox(path: Path, count: int, from_line: str = "From a@b Thu Nov 26 10:00:00 2026") -> Path:
    """An mbox of ``count`` messages, each unlike any other file's (its name in the subject)."""
    with open(path, "wb") as fh:
        for i in range(count):
            raw = make_mail(f"{path.name} {i}", message_id=f"<{i}.{path.name}@x>").replace(
                b"\r\n", b"\n")
            fh.write(from_line.encode() + b"\n" + raw + b"\n")
    return path


def _utc(iso: str) -> str:
    return datetime.fromisoformat(iso).astimezone(UTC).isoformat()


def test_an_mbox_from_line_with_a_zone_gives_the_date_in_that_zone(tmp_path):
    data = tmp_path / "d"
    for n, (zone, expected) in enumerate([("+0100", "2026-11-26T09:00:00+00:00"),
                                          ("-0500", "2026-11-26T15:00:00+00:00"),
                                          ("EST", "2026-11-26T15:00:00+00:00"),
                                          ("", "2026-11-26T10:00:00+00:00")]):
        box = _mbox(tmp_path / f"{n}.mbox", 1, f"From a@b Thu Nov 26 10:00:00 2026 {zone}")
        p = run(data, "import", "mbox", str(box), "--account", ADA, "--mailbox", "INBOX")
        assert b"warning" not in p.stderr, zone
        [m] = jrun(data, "search", ADA, "--subject", f"{n}.mbox")
        assert _utc(m["internal_date"]) == expected, zone
    # the zone before the year, as some writers put it
    box = _mbox(tmp_path / "before.mbox", 1, "From a@b Thu Nov 26 10:00:00 +0200 2027")
    run(data, "import", "mbox", str(box), "--account", ADA)
    [m] = jrun(data, "search", ADA, "--subject", "before.mbox")
    assert _utc(m["internal_date"]) == "2027-11-26T08:00:00+00:00"


def test_an_unknown_zone_or_an_unreadable_from_line_is_said_once_naming_the_line(tmp_path):
    data = tmp_path / "d"
    box = _mbox(tmp_path / "cet.mbox", 3, "From a@b Thu Nov 26 10:00:00 CET 2026")
    p = run(data, "import", "mbox", str(box), "--account", ADA)
    [warning] = p.stderr.decode().splitlines()
    assert warning.startswith(f"letterlog: warning: {box}#1: From line ") and "'CET'" in warning
    assert "Thu Nov 26 10:00:00 CET 2026" in warning and "read as UTC" in warning
    assert {_utc(m["internal_date"]) for m in jrun(data, "list", ADA)} == {
        "2026-11-26T10:00:00+00:00"}
    box = _mbox(tmp_path / "nodate.mbox", 2, "From a@b")
    p = run(data, "import", "mbox", str(box), "--account", ADA, "--mailbox", "INBOX")
    [warning] = p.stderr.decode().splitlines()
    assert f"{box}#1: From line 'From a@b'" in warning and "Date: header" in warning


def test_the_same_mbox_into_another_mailbox_is_imported_there_and_once_only(tmp_path):
    data = tmp_path / "d"
    box = _mbox(tmp_path / "in.mbox", 3)
    [first] = jrun(data, "import", "mbox", str(box), "--account", ADA)
    assert (first["imported"], first["already_imported"]) == (3, 0)
    run(data, "mailbox", "create", ADA, "Archive")
    [other] = jrun(data, "import", "mbox", str(box), "--account", ADA, "--mailbox", "Archive")
    assert (other["imported"], other["already_imported"]) == (3, 0)
    assert len(jrun(data, "list", ADA, "--mailbox", "Archive")) == 3
    # again into either mailbox: nothing, and the text says why
    p = run(data, "import", "mbox", str(box), "--account", ADA, "--mailbox", "Archive")
    assert p.stdout.decode().strip() == (
        f"imported 0 messages, rejected 0; 3 already imported into {ADA} Archive "
        "(from this source before: not imported again)")
    [again] = jrun(data, "import", "mbox", str(box), "--account", ADA)
    assert (again["imported"], again["already_imported"]) == (0, 3)
    assert len(jrun(data, "list", ADA)) == 3


def test_ctrl_c_during_an_import_says_what_landed_and_how_to_resume(tmp_path):
    import signal
    import sqlite3
    import subprocess
    import time

    from tests.factories import BIN

    data, box = tmp_path / "d", _mbox(tmp_path / "big.mbox", 3000)
    run(data, "init")
    env = {**os.environ, "LETTERLOG_DURABILITY": "normal"}
    # started as a shell starts a foreground job: with SIGINT's default disposition. (A
    # process started with SIGINT ignored, as a script's background job is, keeps ignoring
    # it, as every program does: so did the import when the suite ran in the background.)
    p = subprocess.Popen([*BIN, "--data", str(data), "import", "mbox", str(box), "--account",
                          ADA, "--batch", "20"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def landed() -> int:  # the readiness probe: events in the log
        try:
            con = sqlite3.connect(f"file:{data / 'events.sqlite'}?mode=ro", uri=True)
            try:
                return int(con.execute("SELECT count(*) FROM stored_events").fetchone()[0])
            finally:
                con.close()
        except sqlite3.OperationalError:
            return 0

    start = landed()
    deadline = time.monotonic() + 240  # a loaded machine starts an import slowly
    while landed() < start + 40 and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert p.poll() is None, "the import ended before it could be interrupted"
    assert landed() >= start + 40, "nothing landed yet: the interrupt would test nothing"
    os.killpg(p.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
    stdout, stderr = p.communicate(timeout=60)
    assert (p.returncode, stdout) == (130, b""), stderr.decode()[-3000:]
    lines = stderr.decode().splitlines()
    assert len(lines) == 1, stderr.decode()  # one line: no traceback, not even the follower's
    [line] = lines
    assert line.startswith("letterlog: interrupted: ") and " of 3000 messages imported" in line
    assert "run the same command again to resume" in line and "Traceback" not in line
    so_far = int(line.split("interrupted: ")[1].split()[0])
    assert 0 < so_far < 3000
    [resumed] = jrun(data, "import", "mbox", str(box), "--account", ADA, "--batch", "500")
    assert resumed["imported"] + resumed["already_imported"] == 3000
    assert resumed["already_imported"] >= so_far
    [c] = jrun(data, "counters", ADA)
    assert c["mailboxes"]["INBOX"]["messages"] == 3000


def test_as_of_is_a_position_or_a_date_on_list_counters_status_and_rebuild(tmp_path):
    data = tmp_path / "d"
    first = _deliver(data, tmp_path, "first")
    between = datetime.now(UTC)
    second = _deliver(data, tmp_path, "second")
    assert first["position"] < second["position"]
    at = between.isoformat()
    for as_of in (str(first["position"]), at):
        assert [m["message_id"] for m in jrun(data, "list", ADA, "--as-of", as_of)] == [
            first["message_id"]], as_of
        [c] = jrun(data, "counters", ADA, "--as-of", as_of)
        assert c["mailboxes"]["INBOX"]["messages"] == 1
        [st] = jrun(data, "status", ADA, "--as-of", as_of)
        assert st["position"] == first["position"]
    # a day is midnight UTC: before the store existed, so the account did not exist then
    p = run(data, "list", ADA, "--as-of", "2000-01-01", ok=False)
    assert p.returncode == 2 and b"Traceback" not in p.stderr
    # rebuild: a number is a position (as --until-position), a date the position then
    [by_number] = jrun(data, "rebuild", "--all", "--as-of", str(first["position"]),
                       "--view", "n")
    [by_date] = jrun(data, "rebuild", "--all", "--as-of", at, "--view", "d")
    assert by_number["position"] == by_date["position"] == first["position"]
    assert len(jrun(data, "list", ADA, "--view", "d")) == 1


def test_an_as_of_that_is_neither_a_position_nor_a_date_is_refused_naming_both(tmp_path):
    data = tmp_path / "d"
    _deliver(data, tmp_path, "m")
    for args in (["list", ADA], ["rebuild", "--all"]):
        for bad, needle in (("yesterday", b"neither a log position"),
                            ("-3", b"not a log position"),
                            ("2026-03-01T12:00:00", b"needs a timezone")):
            p = run(data, *args, "--as-of", bad, ok=False)
            assert p.returncode == 2 and needle in p.stderr, (args, bad, p.stderr)
            assert p.stderr.count(b"\n") == 1


def test_no_command_but_init_creates_a_store_a_mistyped_data_is_refused_naming_init(
        tmp_path):
    import subprocess

    from tests.factories import BIN

    mail = tmp_path / "m.eml"
    mail.write_bytes(make_mail("m"))
    box = _mbox(tmp_path / "in.mbox", 2)
    (tmp_path / "empty").mkdir()
    env = {**os.environ, "LETTERLOG_DURABILITY": "normal"}
    for data in (tmp_path / "typo" / "data", tmp_path / "empty"):
        for args in (["deliver", "--account", ADA, str(mail)],
                     ["import", "mbox", str(box), "--account", ADA],
                     ["mailbox", "create", ADA, "Archive", "--create-account"],
                     ["demo", "--messages", "2"]):
            p = subprocess.run([*BIN, "--data", str(data), *args], capture_output=True,
                               env=env, timeout=120)
            err = p.stderr.decode()
            assert p.returncode == 2 and err.count("\n") == 1, (args, err)
            assert err.startswith(f"letterlog: error: {data}: ") and "no letterlog store" in err
            assert f"`letterlog --data {data} init` makes one" in err, err
        assert not (tmp_path / "typo").exists()
        assert list((tmp_path / "empty").iterdir()) == []
    # init makes it (parents included); then the same commands work
    data = tmp_path / "typo" / "data"
    p = subprocess.run([*BIN, "--data", str(data), "init"], capture_output=True, env=env,
                       timeout=120)
    assert p.returncode == 0 and (data / "events.sqlite").is_file()
    p = subprocess.run([*BIN, "--data", str(data), "deliver", "--account", ADA, str(mail)],
                       capture_output=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr.decode()


def test_rebuild_workers_take_a_count_with_the_embedded_engine_only(tmp_path):
    data = tmp_path / "d"
    first = _deliver(data, tmp_path, "m")
    for args, needle in ((["--workers", "2", "--engine", "spark"],
                          b"--workers: only with --engine embedded"),
                         (["--workers", "0"], b"--workers"),
                         (["--workers", "two"], b"--workers")):
        p = run(data, "rebuild", "--all", *args, ok=False)
        assert p.returncode == 2 and needle in p.stderr, (args, p.stderr)
        assert b"Traceback" not in p.stderr
    # a log this short is folded in one process whatever the count: it still rebuilds
    [rebuilt] = jrun(data, "rebuild", "--all", "--workers", "3")
    assert rebuilt["position"] >= first["position"]
    assert [m["message_id"] for m in jrun(data, "list", ADA)] == [first["message_id"]]
