"""The ``letterlog`` command line, run as a user would (subprocess, real data directory)."""

from __future__ import annotations

import mailbox
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories import jrun, make_mail, run, stored_event_count


def test_deliver_extract_round_trip_and_json_fields(tmp_path, mail_file):
    data = tmp_path / "d"
    [d] = jrun(data, "deliver", "--account", "ada@example.org", "--label", "x", str(mail_file))
    assert set(d) >= {"message_id", "mailbox_id", "uid", "uidvalidity", "size", "sha256"}
    out = tmp_path / "out.eml"
    run(data, "extract", d["message_id"], "-o", str(out))
    assert out.read_bytes() == mail_file.read_bytes()
    assert run(data, "extract", d["message_id"]).stdout == mail_file.read_bytes()


def test_commands_and_queries(tmp_path, mail_file):
    data = tmp_path / "d"
    [d] = jrun(data, "deliver", "--account", "ada@example.org", str(mail_file))
    mid = d["message_id"]
    run(data, "flag", mid, "\\Seen")
    run(data, "label", mid, "--add", "work")
    run(data, "mailbox", "create", "ada@example.org", "Archive")
    run(data, "move", mid, "Archive")
    [listed] = jrun(data, "list", "ada@example.org", "--mailbox", "Archive")
    assert listed["flags"] == ["\\Seen"] and listed["labels"] == ["work"]
    [c] = jrun(data, "counters", "ada@example.org")
    assert c["mailboxes"]["Archive"]["messages"] == 1
    lines = run(data, "counters", "ada@example.org").stdout.decode().splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["mailbox", "Archive"], ["mailbox", "INBOX"], ["label", "work"],
        ["quota", "bytes"]]  # usage beside the limit (unlimited: the default)
    [st] = jrun(data, "status", "ada@example.org", "Archive")
    assert st["uidnext"] == 2
    reports = jrun(data, "verify", "--all")
    assert reports and all(r["identical"] for r in reports)


def test_count_limited_extract_is_refused_with_exit_code(tmp_path, mail_file):
    data = tmp_path / "d"
    [d] = jrun(data, "deliver", "--account", "ada@example.org", "--extract-limit", "1",
               str(mail_file))
    run(data, "extract", d["message_id"], "-o", str(tmp_path / "a"))
    p = run(data, "extract", d["message_id"], "-o", str(tmp_path / "b"), ok=False)
    assert p.returncode != 0 and b"extraction limit" in p.stderr
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("size", ["inline", "payload"])
def test_body_is_not_an_extraction_but_is_refused_once_extract_is(tmp_path, size):
    data = tmp_path / "d"
    raw = make_mail("body", body="y" * (20_000 if size == "payload" else 10))
    mail = tmp_path / "m.eml"
    mail.write_bytes(raw)
    [d] = jrun(data, "deliver", "--account", "ada@example.org", "--extract-limit", "1",
               str(mail))
    assert run(data, "body", "ada@example.org", "INBOX", str(d["uid"])).stdout == raw
    [shown] = jrun(data, "show", d["message_id"])
    assert shown["extract_count"] == 0 and shown["state"] == "active"  # body did not count
    assert run(data, "extract", d["message_id"]).stdout == raw  # the one extraction
    refused_extract = run(data, "extract", d["message_id"], ok=False)
    p = run(data, "body", "ada@example.org", "INBOX", str(d["uid"]), ok=False)
    assert p.returncode == refused_extract.returncode == 2
    assert p.stdout == b"", "nothing of the message is written"
    assert p.stderr == refused_extract.stderr  # the same one line: the same refusal
    assert b"extraction refused" in p.stderr and b"Traceback" not in p.stderr


@pytest.mark.parametrize(("args", "needle", "code"), [
    (["extract", "not-a-uuid"], b"not a message id", 2),
    (["extract", "01a20208-0b11-75ed-839a-fbb4ab1f7b5a"], b"does not exist", 2),
    (["deliver", "--account", "ada@example.org", "/nonexistent.eml"], b"cannot read", 1),
    (["deliver", "--account", "not an address", "MAIL"], b"account", 2),
    (["deliver", "--account", "ada@example.org", "--extract-until", "tomorrow", "MAIL"],
     b"--extract-until", 2),
    (["deliver", "--account", "ada@example.org", "BINARY"], b"not a message", 1),
    (["flag", "MID", "\\Bogus"], b"not a system flag", 2),
    (["mailbox", "create", "ada@example.org", "INBOX"], b"already exists", 2),
    (["move", "MID", "Nowhere"], b"does not exist", 2),
])
def test_bad_input_exits_non_zero_with_one_line_and_writes_nothing(tmp_path, mail_file, args,
                                                                  needle, code):
    data = tmp_path / "d"
    [d] = jrun(data, "deliver", "--account", "ada@example.org", str(mail_file))
    binary = tmp_path / "junk.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    subst = {"MAIL": str(mail_file), "BINARY": str(binary), "MID": d["message_id"]}
    before = stored_event_count(data)
    p = run(data, *[subst.get(a, a) for a in args], ok=False)
    assert p.returncode == code
    lines = p.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and needle in p.stderr, p.stderr
    assert stored_event_count(data) == before


def test_import_mbox_and_maildir_keeps_flags(tmp_path):
    mbox_path = tmp_path / "in.mbox"
    box = mailbox.mbox(str(mbox_path))
    for i in range(5):
        box.add(make_mail(f"m{i}", message_id=f"<{i}@mbox>"))
    box.close()
    md = mailbox.Maildir(str(tmp_path / "md"), create=True)
    m = mailbox.MaildirMessage(make_mail("seen one", message_id="<s@md>"))
    m.set_subdir("cur")
    m.set_flags("SF")
    md.add(m)
    md.add(mailbox.MaildirMessage(make_mail("new one", message_id="<n@md>")))
    data = tmp_path / "d"
    [r] = jrun(data, "import", "mbox", str(mbox_path), "--account", "ada@example.org")
    assert (r["imported"], r["rejected"]) == (5, 0)
    run(data, "mailbox", "create", "ada@example.org", "Old")
    [r] = jrun(data, "import", "maildir", str(tmp_path / "md"), "--account", "ada@example.org",
               "--mailbox", "Old")
    assert r["imported"] == 2
    flags = {tuple(x["flags"]) for x in jrun(data, "list", "ada@example.org", "--mailbox", "Old")}
    assert flags == {("\\Flagged", "\\Seen"), ()}


def test_readme_example_runs(tmp_path):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = [b.split("```", 1)[0] for b in readme.split("```python\n")[1:3]]
    code = "\n".join(blocks)  # the API example, then the idempotent delivery
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    assert b"\\Seen" in p.stdout


def test_listing_keeps_columns_and_shows_no_terminal_escapes(tmp_path):
    """Senders and subjects are the author's text: a listing pads wide characters by their
    display width and shows control characters (an escape sequence) as U+FFFD."""
    import base64

    from rich.cells import cell_len

    data = tmp_path / "d"
    wide = "代开各地增值税发票" * 6  # 108 columns: cut to 44
    encoded = base64.b64encode(wide.encode()).decode()
    for subject in (f"=?utf-8?b?{encoded}?=", "=?utf-8?q?=1B[2J=1B[31mred?=", "plain"):
        f = tmp_path / "m.eml"
        f.write_bytes(make_mail(subject))
        run(data, "deliver", "--account", "ada@example.org", str(f))
    header, *lines = run(data, "list", "ada@example.org").stdout.decode().splitlines()
    assert header.split()[:2] == ["UID", "DATE"] and "SUBJECT" in header
    assert len(lines) == 3 and "\x1b" not in "".join(lines)
    assert "[31mred" in lines[1]
    # the wide subject is cut, marked with an ellipsis, at the subject column's right edge
    subject_end = lines[2].index("…") + 1
    assert cell_len(lines[2][:subject_end]) == 6 + 2 + 16 + 2 + 26 + 2 + 44


def test_a_listing_cell_replaces_control_characters_and_fits_its_width():
    from adapters.cli.common import cell as _cell

    assert _cell("\x1b[31mred\x9b", 9) == "\ufffd[31mred\ufffd"
    assert _cell("\x1b[31mred\x9b", 8) == "\ufffd[31mre…"
    assert _cell("代开", 3) == "代…" and _cell("代开", 2) == " …"
    assert _cell("代开", 4) == "代开" and _cell(None, 2) == "  "
