"""``letterlog imap``'s later extensions as a client meets them (raw IMAP over imaplib's
connection): MULTIAPPEND all or nothing, RENAME INBOX, QUOTA, URLAUTH between two users,
NOTIFY of another mailbox's changes, CONTEXT=SEARCH updates."""

from __future__ import annotations

import re
from collections.abc import Iterator
from imaplib import IMAP4
from pathlib import Path

import pytest

from tests.factories import run
from tests.services.imap_support import ImapServer, imap_server, raw

pytestmark = [pytest.mark.services, pytest.mark.slow]

ADA, BOB = "ada@example.org", "bob@example.org"
MSG = b"From: ada@example.org\r\nSubject: ext\r\n\r\nbody\r\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ImapServer]:
    with imap_server(tmp_path_factory.mktemp("imap-ext") / "data", "--plaintext-auth") as s:
        yield s


def count(c: IMAP4, mailbox: str) -> int:
    _, lines = raw(c, f"STATUS {mailbox} (MESSAGES)")
    return int(re.search(rb"MESSAGES (\d+)", lines[0]).group(1))  # type: ignore[union-attr]


def test_multiappend_over_the_quota_appends_nothing(tmp_path: Path) -> None:
    with imap_server(tmp_path / "data", "--plaintext-auth") as s:
        c = s.client(ADA)
        assert raw(c, "CREATE Multi")[0].startswith("OK")
        run(s.data, "quota", "set", ADA, "--messages", "3")
        answer, _ = raw(c, f"APPEND Multi {{{len(MSG)}+}} {{{len(MSG)}+}}", MSG, MSG)
        assert answer.startswith("OK"), answer
        # two more would make four of three: neither goes in
        answer, _ = raw(c, f"APPEND Multi {{{len(MSG)}+}} {{{len(MSG)}+}}", MSG, MSG)
        assert answer.startswith("NO [OVERQUOTA]"), answer
        assert count(c, "Multi") == 2
        # one more fits
        answer, _ = raw(c, f"APPEND Multi (\\Seen \\Deleted) {{{len(MSG)}+}}", MSG)
        assert answer.startswith("OK"), answer
        # RFC 9208's STATUS items: the messages marked \Deleted, their KiB
        _, lines = raw(c, "STATUS Multi (DELETED DELETED-STORAGE MESSAGES)")
        assert lines[0].strip() == (b'* STATUS "Multi" (DELETED 1 DELETED-STORAGE 1 '
                                    b'MESSAGES 3)'), lines
        # QUOTA (RFC 9208): the account is the root; MESSAGE used and limit
        answer, lines = raw(c, "GETQUOTAROOT Multi")
        assert answer.startswith("OK"), answer
        assert lines[0].strip() == f'* QUOTAROOT "Multi" "{ADA}"'.encode(), lines
        assert lines[1].strip() == f'* QUOTA "{ADA}" (MESSAGE 3 3)'.encode(), lines
        answer, lines = raw(c, f'GETQUOTA "{ADA}"')
        assert lines[0].strip() == f'* QUOTA "{ADA}" (MESSAGE 3 3)'.encode(), lines
        assert raw(c, f'GETQUOTA "{BOB}"')[0].startswith("NO [NONEXISTENT]")
        assert raw(c, f'SETQUOTA "{ADA}" (STORAGE 10)')[0].startswith("NO [NOPERM]")
        c.logout()


def test_a_multiappend_with_a_bad_message_appends_none(server: ImapServer) -> None:
    c = server.client(ADA)
    assert raw(c, "CREATE Bad")[0].startswith("OK")
    answer, _ = raw(c, f"APPEND Bad {{{len(MSG)}+}} (\\Bogus) {{{len(MSG)}+}}", MSG, MSG)
    assert answer.startswith("BAD"), answer
    assert count(c, "Bad") == 0
    c.logout()


def test_rename_inbox_moves_its_messages_and_leaves_it_empty(server: ImapServer) -> None:
    c = server.client(BOB)
    raw(c, "CREATE INBOX/Child")
    for flags in ("(\\Seen)", "()"):
        assert raw(c, f"APPEND INBOX {flags} {{{len(MSG)}+}}", MSG)[0].startswith("OK")
    before = count(c, "INBOX")
    answer, _ = raw(c, "RENAME INBOX Old")
    assert answer.startswith("OK"), answer
    assert count(c, "INBOX") == 0 and count(c, "Old") == before
    _, lines = raw(c, 'LIST "" "*"')
    names = b"".join(lines)
    assert b'"INBOX/Child"' in names and b'"Old/Child"' not in names  # children stay
    raw(c, "SELECT Old")
    _, lines = raw(c, "FETCH 1:* (FLAGS)")
    assert sum(b"\\Seen" in line for line in lines) >= 1, lines
    assert raw(c, "RENAME Old INBOX")[0].startswith("NO [ALREADYEXISTS]")
    c.logout()


def test_urlauth_lets_another_user_fetch_one_message_until_the_key_is_reset(
        server: ImapServer) -> None:
    ada, bob = server.client(ADA), server.client(BOB)
    raw(ada, "CREATE Urls")
    answer, _ = raw(ada, f"APPEND Urls {{{len(MSG)}+}}", MSG)
    uid = re.search(r"APPENDUID \d+ (\d+)", answer).group(1)  # type: ignore[union-attr]
    base = f"imap://ada%40example.org@example.org/Urls/;uid={uid}"
    signed = {}
    for access in ("authuser", f"user+{BOB}", f"user+{ADA}"):
        answer, lines = raw(ada, f'GENURLAUTH "{base};urlauth={access}" INTERNAL')
        assert answer.startswith("OK"), answer
        signed[access] = re.search(rb'"(.*)"', lines[0]).group(1).decode()  # type: ignore[union-attr]
        assert re.search(r":INTERNAL:[0-9a-f]{64}$", signed[access])

    def fetched(url: str) -> bytes:
        answer, lines = raw(bob, f'URLFETCH "{url}"')
        assert answer.startswith("OK"), answer
        return b"".join(lines)

    assert MSG in fetched(signed["authuser"])
    assert MSG in fetched(signed[f"user+{BOB}"])
    assert fetched(signed[f"user+{ADA}"]).rstrip().endswith(b" NIL")  # not bob's URL
    forged = signed["authuser"][:-4] + "0000"
    assert fetched(forged).rstrip().endswith(b" NIL")
    # bob cannot sign a URL of ada's mailbox
    answer, _ = raw(bob, f'GENURLAUTH "{base};urlauth=authuser" INTERNAL')
    assert answer.startswith("NO"), answer
    assert raw(ada, "RESETKEY Urls")[0].startswith("OK")
    assert fetched(signed["authuser"]).rstrip().endswith(b" NIL")
    ada.logout()
    bob.logout()


def test_notify_reports_another_mailboxs_new_messages_as_status(server: ImapServer) -> None:
    watcher = server.client(ADA)
    raw(watcher, "CREATE Watched")
    answer, lines = raw(watcher, "NOTIFY SET STATUS (MAILBOXES Watched (MessageNew "
                                 "MessageExpunge))")
    assert answer.startswith("OK"), answer
    assert re.match(rb'\* STATUS "Watched" \(MESSAGES 0 UIDNEXT \d+ UIDVALIDITY \d+\)',
                    lines[0]), lines
    run(server.data, "deliver", "--account", ADA, "--mailbox", "Watched", "-",
        stdin=MSG)
    _, lines = raw(watcher, "NOOP")
    assert any(re.match(rb'\* STATUS "Watched" \(MESSAGES 1 UIDNEXT', line)
               for line in lines), lines
    _, lines = raw(watcher, "NOOP")  # reported once
    assert not any(b"STATUS" in line for line in lines), lines
    assert raw(watcher, "NOTIFY NONE")[0].startswith("OK")
    run(server.data, "deliver", "--account", ADA, "--mailbox", "Watched", "-", stdin=MSG)
    _, lines = raw(watcher, "NOOP")
    assert not any(b"STATUS" in line for line in lines), lines
    watcher.logout()


def test_search_update_follows_another_sessions_changes(server: ImapServer) -> None:
    a, b = server.client(ADA), server.client(ADA)
    raw(a, "CREATE Ctx")
    for _ in range(3):
        raw(a, f"APPEND Ctx {{{len(MSG)}+}}", MSG)
    raw(a, "SELECT Ctx")
    raw(b, "SELECT Ctx")
    answer, lines = raw(a, "UID SEARCH RETURN (UPDATE ALL) FLAGGED")
    assert answer.startswith("OK"), answer
    raw(b, "STORE 2 +FLAGS (\\Flagged)")
    _, lines = raw(a, "NOOP")
    assert any(re.search(rb"ADDTO \(0 \d+\)", line) for line in lines), lines
    raw(b, "STORE 2 -FLAGS (\\Flagged)")
    _, lines = raw(a, "NOOP")
    assert any(b"REMOVEFROM" in line for line in lines), lines
    a.logout()
    b.logout()


def test_sort_update_adds_at_the_position_in_the_sorted_order(server: ImapServer) -> None:
    a, b = server.client(ADA), server.client(ADA)
    raw(a, "CREATE Sorted")
    for subject in (b"c", b"a", b"b"):
        raw(a, f"APPEND Sorted {{{len(MSG) + 2}+}}", MSG.replace(b"ext", b"ext " + subject))
    raw(a, "SELECT Sorted")
    raw(b, "SELECT Sorted")
    answer, lines = raw(a, "SORT RETURN (UPDATE ALL) (SUBJECT) UTF-8 FLAGGED")
    assert answer.startswith("OK") and b"ALL" not in b"".join(lines), (answer, lines)
    raw(b, "STORE 1 +FLAGS (\\Flagged)")  # "ext c"
    _, lines = raw(a, "NOOP")
    assert any(b"ADDTO (1 1)" in line for line in lines), lines
    raw(b, "STORE 2 +FLAGS (\\Flagged)")  # "ext a": sorts first
    _, lines = raw(a, "NOOP")
    assert any(b"ADDTO (1 2)" in line for line in lines), lines
    raw(b, "STORE 3 +FLAGS (\\Flagged)")  # "ext b": between them
    _, lines = raw(a, "NOOP")
    assert any(b"ADDTO (2 3)" in line for line in lines), lines
    a.logout()
    b.logout()
