"""``letterlog acl``, ``letterlog root`` and the global ``--as USER`` as a user types them: a
refusal is one line on stderr, exit status 2, no traceback, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.mta_support import letterlog

ADA, BOB = "ada@example.org", "bob@example.org"


def ok(env: dict[str, str], data: Path, *args: str) -> str:
    p = letterlog(env, data, *args)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.decode()


def refused(env: dict[str, str], data: Path, *args: str) -> str:
    head = ok(env, data, "--json", "root", "list")  # nothing of the log changes either:
    before = ok(env, data, "--json", "acl", "list") + head
    p = letterlog(env, data, *args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("letterlog: error: "), lines
    assert b"Traceback" not in p.stderr
    assert ok(env, data, "--json", "acl", "list") + ok(env, data, "--json", "root",
                                                        "list") == before
    return lines[0]


def test_acl_and_root_commands_and_a_user_acting_with_them(env, data, mail_file):
    ok(env, data, "deliver", "--account", ADA, str(mail_file))
    ok(env, data, "mailbox", "create", ADA, "Team")
    ok(env, data, "deliver", "--account", ADA, "--mailbox", "Team", str(mail_file))
    ok(env, data, "deliver", "--account", BOB, str(mail_file))
    as_bob = ("--as", BOB)

    hidden = refused(env, data, *as_bob, "list", ADA, "--mailbox", "Team")
    missing = refused(env, data, *as_bob, "list", ADA, "--mailbox", "Nope")
    assert hidden == missing.replace("'Nope'", "'Team'")

    ok(env, data, "acl", "set", ADA, "Team", BOB, "lr")
    ok(env, data, "acl", "add", ADA, "Team", "$sales", "lrs")
    ok(env, data, "acl", "remove", ADA, "Team", "$sales", "s")
    assert ok(env, data, "acl", "get", ADA, "Team").split() == ["$sales", "lr", BOB, "lr"]
    listed = [json.loads(line) for line in
              ok(env, data, "--json", *as_bob, "list", ADA, "--mailbox", "Team").splitlines()]
    assert len(listed) == 1
    assert ok(env, data, *as_bob, "acl", "rights", ADA, "Team").strip() == "lr"
    line = refused(env, data, *as_bob, "acl", "set", ADA, "Team", BOB, "lrwa")
    assert "'a' (administer)" in line
    assert "administrator" in refused(env, data, *as_bob, "root", "set", BOB, ADA)
    assert "is not a right" in refused(env, data, "acl", "set", ADA, "Team", BOB, "lrQ")

    ok(env, data, "root", "set", BOB, f"{ADA}/Team")
    assert ok(env, data, "root", "get", BOB).strip() == f"{ADA}/Team"
    paths = [json.loads(line)["path"] for line in
             ok(env, data, "--json", *as_bob, "mailbox", "list").splitlines()]
    assert paths == ["/", f"shared/{BOB}/INBOX"]
    deleted = json.loads(ok(env, data, "--json", "root", "delete", BOB))
    assert deleted["old_root"] == f"{ADA}/Team"
    assert json.loads(ok(env, data, "--json", "acl", "delete", ADA, "Team", BOB))[
        "old_rights"] == "lr"
    assert ok(env, data, "acl", "list").split() == [ADA, "Team", "$sales", "lr"]
