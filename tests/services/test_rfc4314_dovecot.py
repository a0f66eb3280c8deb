"""RFC 4314 side by side with Dovecot 2.3's ACL plugin (``acl = vfile``, IMAP over the
``imap`` binary's standard input, pre-authenticated): the same shares, the same attacks,
and what each answers. Where letterlog follows RFC 4314 more strictly than Dovecot, the
difference is named here and in docs/permissions.md."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.devservers import DovecotServer
from adapters.embedded import Letterlog
from domain.errors import LetterlogError

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
            from adapters.devservers.toolchain import apt_install

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
