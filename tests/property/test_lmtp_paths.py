"""``letterlog lmtp`` reads MAIL's and RCPT's plain ``<local@domain>`` paths itself; every
path must come out exactly as aiosmtpd's own parser reads it (address and the parameters
after it), or be handed to that parser."""

from __future__ import annotations

import string

from aiosmtpd.smtp import SMTP
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.mta.lmtpprotocol import _Lmtp

ATEXT = string.ascii_letters + string.digits + "!#$%&'*+/=?^_`{|}~-"
atom = st.text(ATEXT, min_size=1, max_size=8)
label = st.text(string.ascii_letters + string.digits + "-", min_size=1, max_size=8)
local = st.lists(st.one_of(atom, st.just("")), min_size=1, max_size=4).map(".".join)
domain = st.lists(st.one_of(label, st.just("")), min_size=1, max_size=4).map(".".join)
params = st.lists(st.sampled_from(["SIZE=1234", "BODY=8BITMIME", "SMTPUTF8", "X", "(c)",
                                   "ORCPT=rfc822;a@b", "=", ""]), max_size=3).map(" ".join)
space = st.sampled_from(["", " ", "  ", "\t", " \t "])
noise = st.sampled_from(["", "\"q x\"", "[1.2.3.4]", "ü", "(c)", "@r:", ">", "<", " ", "."])


def read(server: SMTP, arg: str) -> object:
    """What ``_getaddr`` gives, or the error it raises (the library's parser raises on some
    malformed paths: aiosmtpd answers those with its own error reply)."""
    try:
        return server._getaddr(arg)
    except Exception as e:  # noqa: BLE001 - compared, not hidden
        return type(e)


def ours(limit: int = 0) -> _Lmtp:
    server = _Lmtp.__new__(_Lmtp)
    server.local_part_limit = limit
    return server


def library(limit: int = 0) -> SMTP:
    server = SMTP.__new__(SMTP)
    server.local_part_limit = limit
    return server


@settings(max_examples=3000)
@given(local, domain, space, params, noise, noise, st.sampled_from([0, 3, 64]))
def test_a_path_reads_as_the_library_reads_it(lp: str, dom: str, gap: str, rest: str,
                                               before: str, inside: str, limit: int) -> None:
    for arg in (f"<{lp}@{dom}>{gap}{rest}", f"<{before}{lp}{inside}@{dom}>{gap}{rest}",
                f"{before}<{lp}@{dom}{inside}>{rest}", f"{lp}@{dom}{gap}{rest}"):
        assert read(ours(limit), arg) == read(library(limit), arg), arg


@settings(max_examples=2000)
@given(st.text(ATEXT + "<>@. ()[]\"\\:;,\t", max_size=30))
def test_any_text_reads_as_the_library_reads_it(arg: str) -> None:
    assert read(ours(), arg) == read(library(), arg), arg


def test_the_plain_path_is_read_without_the_library(monkeypatch: object) -> None:
    def refuse(self: SMTP, arg: str) -> object:
        raise AssertionError(f"the library's parser was called for {arg!r}")

    monkeypatch.setattr(SMTP, "_getaddr", refuse)  # type: ignore[attr-defined]
    assert ours()._getaddr("<alice+x@example.org> SIZE=10") == ("alice+x@example.org", "SIZE=10")
    assert ours(3)._getaddr("<alice@example.org>") == (None, None)  # local part over the limit
