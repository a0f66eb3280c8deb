"""``--as USER`` reaches every command: a contract that walks every registered command of
the CLI as a user with no right on the target account. Each command must declare its rule
(``adapters.cli.callers.RULES``); an administrator's command is refused before anything
runs (the data directory is left as it was, byte for byte); a command checked by the
caller's view is refused, or answers nothing of the other account, and writes nothing.
A new command without a declared rule fails ``test_every_registered_command_declares_a_rule``.

The same contract holds for the embedded API: every member of the user's face
(``adapters.face.Face``) declares its rule (``adapters.caller.FACE_RULES``) and is attacked
below by a user with no right on the target account; the caller's view offers no member of
the administrator's ``Store`` beyond the face.
"""

from __future__ import annotations

import inspect
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import typer

from adapters.caller import FACE_RULES, RIGHTS_RULE, SESSION, VISIBLE
from adapters.cli.app import app, run
from adapters.cli.callers import ADMINISTRATOR, CHECKED, RULES
from adapters.embedded import Letterlog
from adapters.face import Face, Store
from domain.errors import NotFound, PermissionDenied
from domain.rights import COMMAND_RIGHTS
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


# -- the same contract on the embedded API: every member of the user's face -------------------


def face_members(protocol: type) -> set[str]:
    """The members a Protocol of ``adapters.face`` declares, its bases' included."""
    found = set()
    for cls in protocol.__mro__:
        if cls.__module__.split(".")[:2] != ["adapters", "face"]:  # the package's parts
            continue
        found.update(name for name, value in vars(cls).items()
                     if (callable(value) or isinstance(value, property))
                     and (not name.startswith("_") or name in ("__enter__", "__exit__")))
    return found


def test_every_member_of_the_face_declares_a_rule():
    members = face_members(Face)
    assert members - set(FACE_RULES) == set(), "declare these in adapters/caller/rules.py"
    assert set(FACE_RULES) - members == set(), "rules of members the face no longer has"
    checked = {name for name, rule in FACE_RULES.items() if rule == RIGHTS_RULE}
    aliases = {"check_delivery": "deliver", "extract_to": "extract",
               "extract_to_stream": "extract"}
    assert {aliases.get(name, name) for name in checked} <= set(COMMAND_RIGHTS)


def test_the_callers_view_offers_nothing_of_the_administrators_store(world):
    data, _, _ = world
    only_the_administrators = face_members(Store) - face_members(Face)
    assert {"purge", "erase_account", "as_user", "settings", "log", "projections",
            "message_record", "guard_appends"} <= only_the_administrators
    with Letterlog.open(data, create=False, user=BOB) as bob:
        offered = {name for name in only_the_administrators if hasattr(bob, name)}
        assert offered == {"root"}  # the view's own root(): the caller's, of no one else
        assert inspect.signature(bob.root).parameters == {}
        assert {name for name in ("mail", "store", "_getattr__") if hasattr(bob, name)} == set()


def face_calls(message_id: UUID, thread_id: UUID, target: Path
               ) -> dict[str, Callable[[Face], Any]]:
    """One call per member of the face, each aimed at ada's account."""
    return {
        "deliver": lambda f: f.deliver(account=ADA, mailbox="Team", raw=make_mail("bob's")),
        "check_delivery": lambda f: f.check_delivery(account=ADA, mailbox="Team"),
        "begin_upload": lambda f: f.begin_upload(account=ADA, mailbox="Team"),
        "append_chunk": lambda f: f.append_chunk(message_id, 0, b"bob's"),
        "complete_upload": lambda f: f.complete_upload(message_id),
        "extract": lambda f: f.extract(message_id),
        "extract_to": lambda f: f.extract_to(message_id, target),
        "extract_to_stream": lambda f: f.extract_to_stream(message_id, io.BytesIO()),
        "show": lambda f: f.show(message_id),
        "flag": lambda f: f.flag(message_id, ["\\Seen"]),
        "label": lambda f: f.label(message_id, add=["x"]),
        "set_policy": lambda f: f.set_policy(message_id, extract_limit=3),
        "move": lambda f: f.move(message_id, "Team"),
        "copy": lambda f: f.copy(message_id, "Team"),
        "delete": lambda f: f.delete(message_id),
        "restore": lambda f: f.restore(message_id),
        "expunge": lambda f: f.expunge([message_id]),
        "create_mailbox": lambda f: f.create_mailbox(ADA, "Team/Sub"),
        "rename_mailbox": lambda f: f.rename_mailbox(ADA, "Team", "Other"),
        "delete_mailbox": lambda f: f.delete_mailbox(ADA, "Team"),
        "acl_get": lambda f: f.acl_get(ADA, "INBOX"),
        "acl_set": lambda f: f.acl_set(ADA, "INBOX", BOB, "lr"),
        "acl_delete": lambda f: f.acl_delete(ADA, "INBOX", BOB),
        "messages": lambda f: f.messages(ADA, "INBOX"),
        "search": lambda f: f.search(ADA, "INBOX", subject=SECRET),
        "mailbox_status": lambda f: f.mailbox_status(ADA, "INBOX"),
        "body": lambda f: b"".join(f.body(ADA, "INBOX", 1)),
        "subscribe": lambda f: f.subscribe(ADA, "INBOX"),
        "unsubscribe": lambda f: f.unsubscribe(ADA, "Team"),
        "subscriptions": lambda f: f.subscriptions(ADA),
        "counters": lambda f: f.counters(ADA),
        "usage": lambda f: f.usage(ADA),
        "label_messages": lambda f: f.label_messages(ADA, "work"),
        "quota": lambda f: f.quota(ADA),
        "quota_shown": lambda f: f.quota_shown(ADA),
        "mailbox_list": lambda f: f.mailbox_list(ADA),
        "thread": lambda f: f.thread(thread_id),
        "my_rights": lambda f: f.my_rights(ADA, "INBOX"),
        "reading": lambda f: f.reading(as_of=1, account=ADA).messages(ADA, "INBOX"),
    }


def test_every_member_of_the_face_has_an_attack_below():
    calls = face_calls(UUID(int=1), UUID(int=2), Path("x"))
    assert set(calls) == {name for name, rule in FACE_RULES.items() if rule != SESSION}


@pytest.mark.parametrize("member", sorted(n for n, r in FACE_RULES.items() if r != SESSION))
def test_a_member_of_the_face_refuses_a_caller_with_no_rights_or_answers_nothing_of_it(
        world, tmp_path, member):
    data, message_id, _ = world
    with Letterlog.open(data, create=False) as admin:
        thread_id = UUID(admin.show(UUID(message_id))["thread_id"])
    position, target = head(data), tmp_path / "extracted.eml"
    call = face_calls(UUID(message_id), thread_id, target)[member]
    with Letterlog.open(data, create=False, user=BOB) as bob:
        try:
            answer = call(bob)
        except (PermissionDenied, NotFound) as refused:
            assert "Traceback" not in str(refused)
            answer = None
        else:  # answered: only a listing of what bob may see, and none of it ada's
            assert FACE_RULES[member] == VISIBLE, (member, answer)
            for secret in (SECRET, message_id, "Team", "work", ADA):
                assert secret not in repr(answer), (member, answer)
    assert head(data) == position, member  # nothing written
    assert not target.exists()
