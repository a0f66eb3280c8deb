"""A real mail client on ``letterlog imap``: mutt under tmux reads a message, flags one,
moves one to another mailbox and deletes one, with keystrokes as a person types them; the
store is asked afterwards (over IMAP) what each left behind."""

from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.devservers import ServiceFailed
from devtools.devservers.imaptest import install_mutt
from tests.factories import until
from tests.services.imap_support import USERS, ImapServer, imap_server
from tests.services.servers import _unavailable

pytestmark = [pytest.mark.services, pytest.mark.slow]

ADA = "ada@example.org"
SUBJECTS = ("alpha apples", "bravo bananas", "charlie cherries", "delta dates")


def message(i: int, subject: str) -> bytes:
    return (f"From: Sender {i} <s{i}@example.net>\r\nTo: {ADA}\r\nSubject: {subject}\r\n"
            f"Date: Mon, 0{i + 1} Jan 2024 10:00:00 +0000\r\n"
            f"Message-ID: <m{i}@example.net>\r\n\r\nThe body of {subject}.\r\n").encode()


class Mutt:
    """mutt in a tmux session of its own: keys in, the screen out."""

    def __init__(self, tmux: str, mutt: str, muttrc: Path) -> None:
        self.tmux, self.name = tmux, f"ll-mutt-{uuid.uuid4().hex[:8]}"
        subprocess.run([tmux, "new-session", "-d", "-s", self.name, "-x", "160", "-y", "40",
                        f"{mutt} -n -F {muttrc}"], check=True, timeout=30)

    def keys(self, *keys: str) -> None:
        subprocess.run([self.tmux, "send-keys", "-t", self.name, *keys], check=True,
                       timeout=30)

    def screen(self) -> str:
        done = subprocess.run([self.tmux, "capture-pane", "-p", "-t", self.name],
                              capture_output=True, text=True, timeout=30, check=False)
        return done.stdout

    def shows(self, text: str, timeout: float = 60) -> str:
        return until(lambda: text in self.screen() and self.screen(), timeout=timeout,
                     what=f"mutt showing {text!r}", explain=self.screen)

    def close(self) -> None:
        subprocess.run([self.tmux, "kill-session", "-t", self.name], timeout=30,
                       check=False, capture_output=True)


@pytest.fixture
def mutt_on(tmp_path: Path) -> Iterator[tuple[ImapServer, Mutt]]:
    try:
        mutt, tmux = install_mutt()
    except ServiceFailed as failed:
        _unavailable(str(failed))
        raise
    with imap_server(tmp_path / "data", "--plaintext-auth") as server:
        c = server.client(ADA)
        assert c.create("Archive")[0] == "OK"
        for i, subject in enumerate(SUBJECTS):
            assert c.append("INBOX", "", None, message(i, subject))[0] == "OK"
        c.logout()
        muttrc = tmp_path / "muttrc"
        muttrc.write_text(f"""
set folder = "imap://127.0.0.1:{server.port}/"
set spoolfile = "+INBOX"
set imap_user = "{ADA}"
set imap_pass = "{USERS[ADA]}"
set ssl_starttls = no
set ssl_force_tls = no
set record = ""
set postponed = "+Drafts"
set header_cache = ""
set message_cachedir = ""
set sort = date-sent
set mark_old = no
set confirmappend = no
set confirmcreate = no
set delete = yes
set quit = yes
set move = no
set wait_key = no
set pager_stop = yes
set mail_check = 1
set timeout = 1
set index_format = "%4C %Z %s"
""")
        client = Mutt(tmux, mutt, muttrc)
        try:
            yield server, client
        finally:
            client.close()


def flags_by_subject(server: ImapServer, mailbox: str) -> dict[str, set[str]]:
    c = server.client(ADA)
    typ, exists = c.select(mailbox, readonly=True)
    if typ != "OK" or int(exists[0] or 0) == 0:  # not there yet, or empty (FETCH 1:* is BAD)
        c.logout()
        return {}
    _, data = c.fetch("1:*", "(FLAGS BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
    c.logout()
    out: dict[str, set[str]] = {}
    for item in data:
        if isinstance(item, tuple):
            flags = re.search(rb"FLAGS \(([^)]*)\)", item[0])
            subject = item[1].decode().split(":", 1)[1].strip()
            out[subject] = set(flags.group(1).decode().split()) if flags else set()
    return out


def test_mutt_reads_flags_moves_and_deletes(mutt_on: tuple[ImapServer, Mutt]) -> None:
    server, mutt = mutt_on
    for subject in SUBJECTS:
        mutt.shows(subject)
    # read: open "bravo" in the pager, then back to the index
    mutt.keys("/", "bravo", "Enter")
    mutt.keys("Enter")
    mutt.shows("The body of bravo bananas.")
    mutt.keys("i")
    mutt.keys("$")  # mutt fetches with BODY.PEEK and stores \Seen when it syncs
    until(lambda: "\\Seen" in flags_by_subject(server, "INBOX")["bravo bananas"], timeout=30,
          what="bravo \\Seen in the store", explain=mutt.screen)
    # flag: "charlie" flagged important
    mutt.keys("/", "charlie", "Enter")
    mutt.keys("F")
    mutt.keys("$")
    until(lambda: "\\Flagged" in flags_by_subject(server, "INBOX")["charlie cherries"],
          timeout=30, what="charlie \\Flagged in the store", explain=mutt.screen)
    # move: "alpha" saved to Archive (and so deleted from INBOX when mutt syncs)
    mutt.keys("/", "alpha", "Enter")
    mutt.keys("s")
    mutt.shows("Save to mailbox")
    mutt.keys("C-u", "=Archive", "Enter")
    mutt.keys("$")
    until(lambda: "alpha apples" in flags_by_subject(server, "Archive")
          and "alpha apples" not in flags_by_subject(server, "INBOX"), timeout=30,
          what="alpha moved to Archive", explain=mutt.screen)
    # delete: "delta" deleted and expunged
    mutt.keys("/", "delta", "Enter")
    mutt.keys("d")
    mutt.keys("$")
    until(lambda: "delta dates" not in flags_by_subject(server, "INBOX"), timeout=30,
          what="delta expunged", explain=mutt.screen)
    inbox = flags_by_subject(server, "INBOX")
    assert set(inbox) == {"bravo bananas", "charlie cherries"}, inbox
    assert "\\Seen" in inbox["bravo bananas"] and "\\Flagged" in inbox["charlie cherries"]
    assert "\\Deleted" not in inbox["bravo bananas"] | inbox["charlie cherries"]
    assert set(flags_by_subject(server, "Archive")) == {"alpha apples"}
    mutt.keys("q")
    until(lambda: subprocess.run([mutt.tmux, "has-session", "-t", mutt.name],
                                 capture_output=True, check=False).returncode != 0,
          timeout=30, what="mutt quit", explain=mutt.screen)
