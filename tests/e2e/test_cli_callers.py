"""``--as USER`` reaches every command: a contract that walks every registered command of
the CLI as a user with no right on the target account. Each command must declare its rule
(``adapters.cli.callers.RULES``); an administrator's command is refused before anything
runs (the data directory is left as it was, byte for byte); a command checked by the
caller's view is refused, or answers nothing of the other account, and writes nothing.
A new command without a declared rule fails ``test_every_registered_command_declares_a_rule``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer

from adapters.cli.app import app, run
from adapters.cli.callers import ADMINISTRATOR, CHECKED, RULES
from adapters.embedded import Letterlog
from tests.factories import make_mail

ADA, BOB = "ada@example.org", "bob@example.org"
SECRET = "secret-of-ada"


def registered() -> set[str]:
    """Every command of the CLI as a user names it (``group sub`` for a group's)."""
    root = typer.main.get_command(app)
    found = set()
    for name in root.list_commands(None):
        command = root.get_command(None, name)
        subs = getattr(command, "commands", None)
        if subs:
            found.update(f"{name} {sub}" for sub in subs)
        else:
            found.add(name)
    return found


def test_every_registered_command_declares_a_rule():
    commands = registered()
    assert commands - set(RULES) == set(), "declare these in adapters/cli/callers.py"
    assert set(RULES) - commands == set(), "rules of commands that no longer exist"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """ada's account (a message of hers, a mailbox Team, a subscription), bob's own; bob
    has no right on anything of ada's."""
    root = tmp_path_factory.mktemp("callers")
    data = root / "data"
    with Letterlog.open(data, durability="normal") as s:
        d = s.deliver(account=ADA, raw=make_mail(SECRET), labels=["work"])
        s.create_mailbox(ADA, "Team")
        s.subscribe(ADA, "Team")
        s.deliver(account=BOB, raw=make_mail("bob's own"))
    (data / "users.passwd").write_text(f"{ADA}:x\n{BOB}:x\n")
    mail = root / "m.eml"
    mail.write_bytes(make_mail("from bob"))
    return data, str(d.message_id), mail


def snapshot(data: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(data)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(data.rglob("*")) if p.is_file()}


def head(data: Path) -> int:
    with Letterlog.open(data, create=False, read_models=False) as s:
        return int(s.max_position())


def as_bob(data: Path, capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    monkeypatch.setenv("LETTERLOG_DURABILITY", "normal")
    capsys.readouterr()
    code = run(["--data", str(data), "--as", BOB, *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", sorted(c for c, r in RULES.items() if r == ADMINISTRATOR))
def test_an_administrators_command_is_refused_to_a_user_before_anything_runs(
        world, tmp_path, capsys, monkeypatch, command):
    data, message_id, mail = world
    before = snapshot(data)
    target = tmp_path / "out"
    code, out, err = as_bob(data, capsys, monkeypatch, *command.split(), str(target))
    assert code == (75 if command == "lda" else 2), (code, out, err)
    if command == "lda":  # what the MTA's DSN carries: a code and a short reason (ADR 0067);
        assert err.startswith("4.3.5 ") and err.count("\n") == 1, err  # the detail is logged
    else:
        assert f"permission denied: {command} is the administrator's; {BOB}" in err
    assert "Traceback" not in err and out == ""
    assert snapshot(data) == before and not target.exists()


def checked_calls(message_id: str, mail: Path) -> dict[str, list[str]]:
    """One call per command the caller's view checks, each aimed at ada's account."""
    return {
        "deliver": ["deliver", "--account", ADA, "--mailbox", "Team", str(mail)],
        "extract": ["extract", message_id],
        "show": ["show", message_id],
        "flag": ["flag", message_id, "\\Seen"],
        "label": ["label", message_id, "--add", "x"],
        "move": ["move", message_id, "Team"],
        "copy": ["copy", message_id, "Team"],
        "delete": ["delete", message_id],
        "restore": ["restore", message_id],
        "expunge": ["expunge", message_id],
        "policy": ["policy", message_id, "--extract-limit", "3"],
        "subscribe": ["subscribe", ADA, "INBOX"],
        "unsubscribe": ["unsubscribe", ADA, "Team"],
        "mailbox create": ["mailbox", "create", ADA, "Team/Sub"],
        "mailbox rename": ["mailbox", "rename", ADA, "Team", "Other"],
        "mailbox delete": ["mailbox", "delete", ADA, "Team"],
        "mailbox list": ["mailbox", "list", ADA],
        "list": ["list", ADA],
        "search": ["search", ADA, "--subject", SECRET],
        "labelled": ["labelled", ADA, "work"],
        "thread": ["thread", message_id],
        "counters": ["counters", ADA],
        "du": ["du", ADA],
        "status": ["status", ADA, "INBOX"],
        "subscriptions": ["subscriptions", ADA],
        "body": ["body", ADA, "INBOX", "1"],
        "acl get": ["acl", "get", ADA, "INBOX"],
        "acl set": ["acl", "set", ADA, "INBOX", BOB, "lr"],
        "acl add": ["acl", "add", ADA, "INBOX", BOB, "lr"],
        "acl remove": ["acl", "remove", ADA, "INBOX", BOB, "r"],
        "acl delete": ["acl", "delete", ADA, "INBOX", BOB],
        "acl rights": ["acl", "rights", ADA, "INBOX"],
        "quota get": ["quota", "get", ADA],
    }


def test_every_checked_command_has_an_attack_below():
    assert set(checked_calls("x", Path("m"))) == {c for c, r in RULES.items() if r == CHECKED}


@pytest.mark.parametrize("command", sorted(c for c, r in RULES.items() if r == CHECKED))
def test_a_checked_command_reads_and_writes_nothing_of_another_account(
        world, capsys, monkeypatch, command):
    data, message_id, mail = world
    position = head(data)
    code, out, err = as_bob(data, capsys, monkeypatch, *checked_calls(message_id, mail)[command])
    assert "Traceback" not in err
    assert head(data) == position, (command, out, err)  # nothing written
    for secret in (SECRET, message_id, "Team", "work"):
        assert secret not in out, (command, out)  # nothing of ada's read
    if code == 0:  # answered, with nothing of ada's: a listing of what bob may look up
        assert command in ("mailbox list",), (command, out, err)
        assert [json.loads(line) for line in out.splitlines() if line.startswith("{")] == []
    else:
        assert code == 2 and err.startswith("letterlog: error: "), (command, code, err)
        assert ("permission denied" in err or "does not exist" in err), err
