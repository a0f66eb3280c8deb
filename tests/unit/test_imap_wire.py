"""The IMAP wire format (adapters/imap/wire.py, utf7.py) and the passwd-file's password
schemes (adapters/directory/passwords.py)."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

from adapters.directory.passwords import verify
from adapters.imap import utf7
from adapters.imap.session.listing import _list_returns
from adapters.imap.session.selecting import _qresync_parameters
from adapters.imap.wire import Atom, BadCommand, String, sequence_set, tokens


def test_a_fetch_section_stays_one_atom_and_literals_are_strings() -> None:
    toks = tokens([b'a1 FETCH 1:* (BODY.PEEK[HEADER.FIELDS (FROM TO)]<0.10> FLAGS)\r\n'])
    assert toks[3] == [Atom("BODY.PEEK[HEADER.FIELDS (FROM TO)]<0.10>"), Atom("FLAGS")]
    toks = tokens([b"a2 APPEND INBOX {5}\r\n", b"hello", b" \"x\\\"y\"\r\n"])
    assert toks[3] == String(b"hello", literal=True) and toks[4] == String(b'x"y')


@pytest.mark.parametrize("line", [b"a1 FETCH (1\r\n", b"a1 FETCH 1)\r\n",
                                  b'a1 LOGIN "ada\r\n', b"a1 APPEND INBOX {5x}\r\n",
                                  b"a1 {\r\n"])
def test_unbalanced_commands_are_bad(line: bytes) -> None:
    with pytest.raises(BadCommand):
        tokens([line])


def test_sequence_sets_take_star_as_the_largest_and_reject_zero() -> None:
    assert sequence_set("1:3,5,7:*", 9) == [(1, 3), (5, 5), (7, 9)]
    assert sequence_set("*:4", 2) == [(2, 4)]
    with pytest.raises(BadCommand):
        sequence_set("0:2", 5)


@pytest.mark.parametrize("name", ["Entwürfe", "p&q", "日本語/子", "INBOX"])
def test_modified_utf7_round_trips(name: str) -> None:
    assert utf7.decode(utf7.encode(name)) == name
    assert utf7.encode("pää") == "p&AOQA5A-"


def test_password_schemes_of_the_passwd_file() -> None:
    salt = b"salt1234"
    ssha = base64.b64encode(hashlib.sha512(b"secret" + salt).digest() + salt).decode()
    assert verify("{PLAIN}secret", "secret") and not verify("{PLAIN}secret", "Secret")
    assert verify("{SSHA512}" + ssha, "secret") and not verify("{SSHA512}" + ssha, "x")
    sha = hashlib.sha256(b"secret").hexdigest()
    assert verify("{SHA256.HEX}" + sha, "secret")
    assert not verify("", "") and not verify("{NOSUCH}x", "x")


def test_select_s_qresync_parameters_are_read_or_refused() -> None:
    assert _qresync_parameters([Atom("CONDSTORE")]) is None
    assert _qresync_parameters([Atom("QRESYNC"), [Atom("7"), Atom("9"), Atom("1:4")]]) == (
        7, 9, "1:4")
    assert _qresync_parameters([Atom("qresync"), [Atom("7"), Atom("9")]]) == (7, 9, None)
    for bad in ([Atom("QRESYNC")], [Atom("QRESYNC"), Atom("7")],
                [Atom("QRESYNC"), [Atom("7")]], [Atom("QRESYNC"), [Atom("x"), Atom("9")]],
                [Atom("QRESYNC"), [Atom("7"), String(b"9")]]):
        with pytest.raises(BadCommand):
            _qresync_parameters(bad)


def test_list_s_return_options_are_read_or_refused() -> None:
    assert _list_returns([]) == ([], [])
    assert _list_returns([Atom("RETURN"), [Atom("subscribed"), Atom("STATUS"),
                                           [Atom("messages"), Atom("UIDNEXT")]]]) == (
        ["SUBSCRIBED", "STATUS"], ["MESSAGES", "UIDNEXT"])
    for bad in ([Atom("RETURN")], [Atom("RETURN"), Atom("STATUS")],
                [Atom("RETURN"), [Atom("STATUS")]], [Atom("RETURN"), [Atom("STATUS"), Atom("x")]],
                [Atom("RETURN"), [Atom("FANCY")]], [String(b"RETURN"), [Atom("CHILDREN")]]):
        with pytest.raises(BadCommand):
            _list_returns(bad)


def test_partial_ranges_of_rfc_5267_and_9394() -> None:
    from adapters.imap.search import SearchError, partial_of, return_options

    assert return_options([Atom("PARTIAL"), Atom("4:2"), Atom("UPDATE")]) == (
        ["PARTIAL", "UPDATE"], (2, 4))
    assert return_options([Atom("PARTIAL"), Atom("-1:-3")])[1] == (-1, -3)
    for bad in ("1", "1:*", "*:1", "0:2", "-1:2"):
        with pytest.raises(SearchError):
            return_options([Atom("PARTIAL"), Atom(bad)])
    found = [10, 20, 30, 40, 50]
    assert partial_of(found, (2, 4)) == [20, 30, 40]
    assert partial_of(found, (4, 9)) == [40, 50] and partial_of(found, (6, 6)) == []
    assert partial_of(found, (-1, -2)) == [40, 50]
    assert partial_of(found, (-5, -9)) == [10]


def test_urlauth_urls_are_read_signed_and_checked(tmp_path: Path) -> None:
    from adapters.imap import urlauth

    url = urlauth.parse("imap://ada@example.org/Team%20A;UIDVALIDITY=7/;UID=3/;SECTION=1.2"
                        "/;PARTIAL=0.10;URLAUTH=user+bob%40example.org")
    assert (url.owners(), url.mailbox_name, url.uidvalidity, url.uid, url.section,
            url.partial) == (["ada", "ada@example.org"], "Team A", 7, 3, "1.2", (0, 10))
    assert url.owned_by("ada@example.org") and not url.owned_by("bob@example.org")
    assert url.may_fetch("bob@example.org") and not url.may_fetch("ada@example.org")
    keys = urlauth.UrlKeys(tmp_path)
    box = ("ada@example.org", "ada@example.org", "Team A", 7)
    signed = urlauth.parse(keys.sign(box, url))
    assert keys.verify(box, signed)
    assert not keys.verify(("ada@example.org", "ada@example.org", "Team A", 8), signed)
    assert not keys.verify(box, url)  # not signed
    keys.reset("ada@example.org", ("ada@example.org", "Team A"))
    assert not keys.verify(box, signed)
    keys.close()
    with pytest.raises(urlauth.BadUrl):
        urlauth.parse("imap://ada@example.org/INBOX/;UID=1")  # no URLAUTH
