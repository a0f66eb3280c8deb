"""RFC 4314 side by side with Dovecot 2.3's ACL plugin (``acl = vfile``, IMAP over the
``imap`` binary's standard input, pre-authenticated): the same shares, the same attacks,
and what each answers; every right through IMAP as another user, against Dovecot and
``letterlog imap`` alike (the answer and the effect). Where letterlog follows RFC 4314 more
strictly than Dovecot, the difference is named here and in docs/permissions.md."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from adapters.embedded import Letterlog
from devtools.devservers import DovecotServer
from domain.errors import LetterlogError
from tests.services.imap_support import RIGHTS_TABLE, ImapServer, imap_server, raw

pytestmark = [pytest.mark.services, pytest.mark.slow]

ADA, BOB = "ada@example.org", "bob@example.org"
RAW = b"From: x@example.org\r\nSubject: shared\r\n\r\nhello\r\n"
ACL_CONFIG = """
mail_plugins = acl
protocol imap {{
  mail_plugins = $mail_plugins imap_acl
}}
namespace inbox {{
  inbox = yes
  separator = /
  prefix =
}}
namespace shared {{
  type = shared
  separator = /
  prefix = shared/%%u/
  location = mdbox:{mail}/%%n
  subscriptions = no
  list = children
}}
plugin {{
  acl = vfile
}}

"""
IMAP = "/usr/lib/dovecot/imap"


class AclDovecot(DovecotServer):
    """The dev server's Dovecot with IMAP (``dovecot-imapd``) and the ACL plugin."""

    def install(self) -> None:
        super().install()
        if not Path(IMAP).exists():
            from devtools.devservers.toolchain import apt_install

            apt_install(["dovecot-imapd"])

    def prepare(self) -> None:
        super().prepare()
        assert self.workdir is not None
        text = self.config.read_text().replace("protocols = lmtp", "protocols = imap lmtp")
        self.config.write_text(text + ACL_CONFIG.format(mail=self.workdir / "mail"))

    def imap(self, user: str, *commands: str) -> list[str]:
        """Each command's tagged answer (``OK``, ``NO``, ``BAD``) and the untagged lines
        before it, as one string per command."""
        script = "".join(f"a{i} {c}\r\n" for i, c in enumerate(commands)) + "z LOGOUT\r\n"
        p = subprocess.run([IMAP, "-c", str(self.config), "-u", user], input=script.encode(),
                           capture_output=True, timeout=60, check=False)
        text = p.stdout.decode(errors="replace")
        answers: dict[int, str] = {}  # Dovecot may answer pipelined commands out of order
        pending: list[str] = []
        for line in text.splitlines():
            pending.append(line)
            tagged = re.match(r"^a(\d+) ", line)
            if tagged:
                answers[int(tagged.group(1))] = "\n".join(pending)
                pending = []
        assert sorted(answers) == list(range(len(commands))), text
        return [answers[i] for i in range(len(commands))]


@pytest.fixture(scope="module")
def dovecot() -> Iterator[AclDovecot]:
    # not under pytest's 0700 tmp root: the mail user walks to its mail
    root = Path(tempfile.mkdtemp(prefix="ll-dovecot-acl-"))
    server = AclDovecot(workdir=root, keep_workdir=True)
    server.install()
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def ok(answer: str) -> bool:
    return answer.splitlines()[-1].split()[1] == "OK"


def shared(mailbox: str) -> str:
    return f'"shared/{ADA}/{mailbox}"'


@pytest.fixture
def both(dovecot, tmp_path) -> Iterator[tuple[AclDovecot, Letterlog, str]]:
    """ada's Team (one message) and Drop on both sides; a fresh namespace in Dovecot."""
    tag = tmp_path.name[-8:].replace("_", "").lower()
    team, drop = f"Team{tag}", f"Drop{tag}"
    dovecot.deliver_lmtp([(ADA, RAW)])
    assert all(ok(a) for a in dovecot.imap(ADA, f"CREATE {team}", f"CREATE {drop}"))
    # the newest message of ada's INBOX into Team
    assert all(ok(a) for a in dovecot.imap(ADA, "SELECT INBOX", f"COPY * {team}"))
    store = Letterlog.open(tmp_path / "data", durability="normal")
    store.deliver(account=BOB, raw=RAW)
    for name in (team, drop):
        store.create_mailbox(ADA, name, create_account=True)
    store.deliver(account=ADA, mailbox=team, raw=RAW)
    yield dovecot, store, tag
    store.close()


def ours(action) -> bool:
    try:
        action()
    except LetterlogError:
        return False
    return True


def test_move_needs_read_on_the_source_in_both(both):
    dovecot, store, tag = both
    team, drop = f"Team{tag}", f"Drop{tag}"
    for rights, expected in (("lte", False), ("lrte", True)):
        assert all(ok(a) for a in dovecot.imap(
            ADA, f"SETACL {team} {BOB} {rights}", f"SETACL {drop} {BOB} lri"))
        theirs = dovecot.imap(BOB, f"SELECT {shared(team)}", f"UID MOVE 1:* {shared(drop)}")
        store.acl_set(ADA, team, BOB, rights)
        store.acl_set(ADA, drop, BOB, "lri")
        [message] = store.messages(ADA, team) or store.messages(ADA, drop)
        mine = ours(lambda m=message: store.as_user(BOB).move(m.message_id, drop))
        assert (ok(theirs[0]) and ok(theirs[1])) == expected == mine, (rights, theirs)
    # in the end the message is in Drop on both sides
    assert "MESSAGES 1" in dovecot.imap(ADA, f"STATUS {drop} (MESSAGES)")[0]
    assert len(store.messages(ADA, drop)) == 1 and store.messages(ADA, team) == []


def test_expunge_removes_only_deleted_messages_in_both(both):
    dovecot, store, tag = both
    team = f"Team{tag}"
    assert all(ok(a) for a in dovecot.imap(ADA, f"SETACL {team} {BOB} lre"))
    theirs = dovecot.imap(BOB, f"SELECT {shared(team)}", "EXPUNGE",
                          f"STATUS {shared(team)} (MESSAGES)")
    assert "MESSAGES 1" in theirs[2]  # nothing marked \Deleted: nothing expunged
    store.acl_set(ADA, team, BOB, "lre")
    [message] = store.messages(ADA, team)
    assert not ours(lambda: store.as_user(BOB).expunge([message.message_id]))
    assert len(store.messages(ADA, team)) == 1


def test_flags_of_an_append_follow_s_t_w_of_the_target_in_both(both):
    dovecot, store, tag = both
    drop = f"Drop{tag}"
    for rights, kept in (("li", set()), ("lis", {"\\Seen"}), ("liw", {"\\Flagged", "$Work"})):
        assert all(ok(a) for a in dovecot.imap(ADA, f"SETACL {drop} {BOB} {rights}"))
        append = (f"APPEND {shared(drop)} (\\Seen \\Flagged $Work) {{{len(RAW)}+}}\r\n"
                  + RAW.decode())
        assert ok(dovecot.imap(BOB, append)[0])
        fetched = dovecot.imap(ADA, f"SELECT {drop}", "FETCH * (FLAGS)")[1]
        flags = set(re.search(r"FLAGS \(([^)]*)\)", fetched).group(1).split()) - {"\\Recent"}
        store.acl_set(ADA, drop, BOB, rights)
        d = store.as_user(BOB).deliver(account=ADA, mailbox=drop, raw=RAW,
                                       flags=["\\Seen", "\\Flagged", "$Work"])
        assert flags == set(store.show(d.message_id)["flags"]) == kept, (rights, fetched)


def test_a_child_starts_with_its_parents_acl_in_both(both):
    dovecot, store, tag = both
    team = f"Team{tag}"
    assert all(ok(a) for a in dovecot.imap(ADA, f"SETACL {team} {BOB} lrk"))
    assert ok(dovecot.imap(BOB, f"CREATE \"shared/{ADA}/{team}/Notes\"")[0])
    theirs = dovecot.imap(ADA, f"GETACL {team}/Notes")[0]
    store.acl_set(ADA, team, BOB, "lrk")
    store.as_user(BOB).create_mailbox(ADA, f"{team}/Notes")
    [their_rights] = re.findall(rf"{re.escape(BOB)} (\w+)", theirs)
    # Dovecot also shows RFC 2086's 'c' for 'k' (RFC 4314 section 2.1.1)
    assert set(their_rights) - {"c"} == set(store.acl_get(ADA, f"{team}/Notes")[BOB]) == set(
        "lrk"), theirs


def test_status_with_lookup_alone_is_where_letterlog_is_stricter(both):
    """RFC 4314 section 4: STATUS needs 'r'. Dovecot 2.3 answers it to 'l' alone (its
    UIDNEXT and message count); letterlog shows a mailbox it may only look up by its name."""
    dovecot, store, tag = both
    team = f"Team{tag}"
    assert all(ok(a) for a in dovecot.imap(ADA, f"SETACL {team} {BOB} l"))
    theirs = dovecot.imap(BOB, f"STATUS {shared(team)} (UIDNEXT)")[0]
    assert ok(theirs) and "UIDNEXT" in theirs
    store.acl_set(ADA, team, BOB, "l")
    [row] = [r for r in store.as_user(BOB).mailboxes() if r["name"] == team]
    assert "uidnext" not in row
    assert not ours(lambda: store.as_user(BOB).mailbox_status(ADA, team))


# -- every right through IMAP, letterlog imap beside Dovecot ---------------------------------
#: Where Dovecot 2.3's answer differs from RFC 4314 (and letterlog's): the command is
#: refused by effect in both (nothing changes, as the table says), but Dovecot answers OK
#: where letterlog answers NO ([NOPERM], or [READ-ONLY] in a mailbox opened read-only).
DOVECOT_ANSWERS_OK_WITHOUT_EFFECT = {
    # a flag bob may not set: Dovecot leaves it off silently
    ("lr", "", "STORE +FLAGS (\\Seen)"),
    ("lrs", "", "STORE +FLAGS (\\Flagged)"),
    ("lrw", "", "STORE +FLAGS (\\Deleted)"),
    # EXPUNGE without 'e': Dovecot expunges nothing and answers OK
    # (test_expunge_removes_only_deleted_messages_in_both)
    ("lrt", "", "EXPUNGE"),
}
#: Where Dovecot 2.3 (this configuration) refuses what RFC 4314 grants: DELETE of another
#: user's shared mailbox with 'x' answers NO [CANNOT] "Mailbox attributes not enabled" (and
#: with a mail_attribute_dict, "The /private/specialuse attribute cannot be changed");
#: letterlog deletes it.
DOVECOT_REFUSES = {("lrx", "", "DELETE")}


@pytest.fixture(scope="module")
def letterlog_imap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ImapServer]:
    with imap_server(tmp_path_factory.mktemp("imap-acl") / "data", "--plaintext-auth") as s:
        yield s


def _bobs_commands(box: str, command: str) -> list[str]:
    """What bob sends for a row of the table, the last one the command under test."""
    shared_box = f'"shared/{ADA}/{box}"'
    if command in ("SELECT", "EXAMINE"):
        return [f"{command} {shared_box}"]
    if command == "CREATE":
        return [f'CREATE "shared/{ADA}/{box}/child"']
    if command == "DELETE":
        return [f"DELETE {shared_box}"]
    if command == "SETACL":
        return [f"SETACL {shared_box} {ADA} lr"]
    if command in ("COPY", "MOVE"):
        return [f"SELECT {shared_box}", f'{command} 1 "shared/{ADA}/{box}-target"']
    if command == "EXPUNGE":
        return [f"SELECT {shared_box}", "EXPUNGE"]
    return [f"SELECT {shared_box}", "STORE 1 " + command.split(" ", 1)[1]]


def _effect(command: str, status: Callable[[str], int], flags: Callable[[str], set[str]],
            exists: Callable[[str], bool], acl: Callable[[str], str], box: str) -> bool:
    """Whether bob's command took effect, as ada sees her mailboxes afterwards."""
    if command in ("SELECT", "EXAMINE"):
        raise AssertionError("no effect to look at")
    if command == "CREATE":
        return exists(f"{box}/child")
    if command == "DELETE":
        return not exists(box)
    if command == "SETACL":  # bob gave ada exactly "lr"
        return re.search(rf'{re.escape(ADA)}"? "?lr"?(\s|$)', acl(box)) is not None
    if command == "COPY":
        return status(f"{box}-target") == 2
    if command == "MOVE":
        return status(f"{box}-target") == 2 and status(box) == 0
    if command == "EXPUNGE":
        return status(box) == 0
    wanted = set(re.findall(r"[\\$]\w+", command))
    return wanted <= flags(box)


def _status(answer: str) -> str:
    return answer.splitlines()[-1].split()[1]


@pytest.mark.parametrize(("source", "target", "command", "allowed"), RIGHTS_TABLE,
                         ids=[f"{s}-{t}-{c.split()[0]}-{a}" for s, t, c, a in RIGHTS_TABLE])
def test_each_right_through_imap_beside_dovecot(dovecot: AclDovecot,
                                                letterlog_imap: ImapServer,
                                                source: str, target: str, command: str,
                                                allowed: bool, tmp_path: Path) -> None:
    """Bob's command on ada's mailbox shared with the row's rights: the answer and the
    effect (as ada sees it afterwards) in Dovecot 2.3 with its ACL plugin and in letterlog
    imap, and RFC 4314's (the table's)."""
    box = f"R{RIGHTS_TABLE.index((source, target, command, allowed))}" \
          f"x{tmp_path.name[-6:].replace('_', '')}"
    flags = "(\\Deleted) " if command == "EXPUNGE" else ""
    append = f"APPEND {{box}} {flags}{{{{{len(RAW)}+}}}}\r\n" + RAW.decode()
    # Dovecot
    setup = []
    for name, rights in ((box, source), (box + "-target", target or "l")):
        setup += [f"CREATE {name}", append.format(box=name), f"SETACL {name} {BOB} {rights}"]
    assert all(ok(a) for a in dovecot.imap(ADA, *setup)), setup
    theirs = dovecot.imap(BOB, *_bobs_commands(box, command))
    # letterlog imap
    ada = letterlog_imap.client(ADA)
    for name, rights in ((box, source), (box + "-target", target or "l")):
        assert raw(ada, f"CREATE {name}")[0].startswith("OK")
        assert raw(ada, f"APPEND {name} {flags}{{{len(RAW)}+}}", RAW)[0].startswith("OK")
        assert raw(ada, f"SETACL {name} {BOB} {rights}")[0].startswith("OK")
    bob = letterlog_imap.client(BOB)
    mine = [(status + " " + text) for status, text in
            (raw(bob, c)[0].split(" ", 1) for c in _bobs_commands(box, command))]
    bob.logout()
    word = command.split()[0]
    if word in ("SELECT", "EXAMINE"):
        their_ok, my_ok = _status(theirs[-1]) == "OK", mine[-1].startswith("OK")
        assert their_ok == my_ok == allowed, (theirs, mine)
        ada.logout()
        return

    def their_status(name: str) -> int:
        m = re.search(r"MESSAGES (\d+)", dovecot.imap(ADA, f"STATUS {name} (MESSAGES)")[0])
        return int(m.group(1)) if m else -1

    def their_flags(name: str) -> set[str]:
        answer = dovecot.imap(ADA, f"EXAMINE {name}", "FETCH 1 (FLAGS)")[1]
        m = re.search(r"FLAGS \(([^)]*)\)", answer)
        return set(m.group(1).split()) if m else set()

    def their_exists(name: str) -> bool:
        return f'"{name}"' in dovecot.imap(ADA, f'LIST "" "{name}"')[0] or \
            f" {name}\n" in dovecot.imap(ADA, f'LIST "" "{name}"')[0] + "\n"

    def their_acl(name: str) -> str:
        # once bob gave ada (the owner) "lr", Dovecot refuses ada's GETACL (no 'a' left:
        # letterlog keeps the owner's rights): bob, who had 'a', reads it then
        return dovecot.imap(ADA, f"GETACL {name}")[0] + dovecot.imap(
            BOB, f'GETACL "shared/{ADA}/{name}"')[0]

    def my_status(name: str) -> int:
        _, lines = raw(ada, f"STATUS {name} (MESSAGES)")
        m = re.search(rb"MESSAGES (\d+)", b"".join(lines))
        return int(m.group(1)) if m else -1

    def my_flags(name: str) -> set[str]:
        raw(ada, f"EXAMINE {name}")
        _, lines = raw(ada, "FETCH 1 (FLAGS)")
        m = re.search(rb"FLAGS \(([^)]*)\)", b"".join(lines))
        return set(m.group(1).decode().split()) if m else set()

    def my_exists(name: str) -> bool:
        _, lines = raw(ada, f'LIST "" "{name}"')
        return bool(lines)

    def my_acl(name: str) -> str:
        _, lines = raw(ada, f"GETACL {name}")
        return b"".join(lines).decode()

    their_effect = _effect(word if word in ("COPY", "MOVE", "EXPUNGE", "CREATE", "DELETE",
                                            "SETACL") else command,
                           their_status, their_flags, their_exists, their_acl, box)
    my_effect = _effect(word if word in ("COPY", "MOVE", "EXPUNGE", "CREATE", "DELETE",
                                         "SETACL") else command,
                        my_status, my_flags, my_exists, my_acl, box)
    ada.logout()
    if (source, target, word) in DOVECOT_REFUSES:
        assert not their_effect and _status(theirs[-1]) == "NO", theirs
        their_effect = allowed
    assert their_effect == my_effect == allowed, (theirs, mine)
    assert mine[-1].startswith("OK") == allowed, mine
    if (source, target, command) in DOVECOT_ANSWERS_OK_WITHOUT_EFFECT:
        assert _status(theirs[-1]) == "OK", theirs
    elif (source, target, word) not in DOVECOT_REFUSES:
        assert (_status(theirs[-1]) == "OK") == allowed, theirs
