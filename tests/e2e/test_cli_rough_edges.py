"""The command line as a new user meets it (issue 29, item 6): what a first session trips
over, each fixed and checked here as a user runs it (a subprocess, a real data directory)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import make_mail
from tests.factories import jrun, run

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
