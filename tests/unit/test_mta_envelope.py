"""What the MTA says about a delivery, read as it says it: DSN's ORCPT (RFC 3461 xtext,
RFC 6533 utf-8 addresses) and the null sender of a bounce (issue 42, item 6)."""

from __future__ import annotations

import pytest

from adapters.mta.delivery import reverse_path, with_envelope_headers
from adapters.mta.lmtp import _dsn_params, original_recipient


@pytest.mark.parametrize(("orcpt", "address"), [
    ("rfc822;bob+2Blists@example.org", "bob+lists@example.org"),
    ("RFC822;bob@example.org", "bob@example.org"),
    ("rfc822;a+3Db@example.org", "a=b@example.org"),
    ("utf-8;j\\x{F6}rg@example.org", "jörg@example.org"),
    ("x400;whatever", ""),
    ("", ""),
])
def test_orcpt_gives_the_original_recipient(orcpt: str, address: str) -> None:
    assert original_recipient(orcpt) == address


def test_dsn_parameters_are_taken_out_with_their_case_kept() -> None:
    rest, params = _dsn_params("TO:<bob@example.org> NOTIFY=NEVER ORCPT=rfc822;Bob+2Bx@Ex.org")
    assert rest == "TO:<bob@example.org>"
    assert params == {"NOTIFY": "NEVER", "ORCPT": "rfc822;Bob+2Bx@Ex.org"}
    rest, params = _dsn_params("FROM:<> RET=HDRS ENVID=QQ314159 BODY=8BITMIME")
    assert (rest, params) == ("FROM:<> BODY=8BITMIME", {"RET": "HDRS", "ENVID": "QQ314159"})


@pytest.mark.parametrize(("given", "kept"), [
    (None, None), ("", "<>"), ("<>", "<>"), (" ", "<>"), ("ada@example.net", "ada@example.net"),
])
def test_an_empty_sender_is_the_null_sender_not_none(given: str | None,
                                                     kept: str | None) -> None:
    assert reverse_path(given) == kept


def test_a_bounce_gets_an_empty_return_path() -> None:
    assert with_envelope_headers(b"S: x\n\nb\n", "<>", "bob@example.org").startswith(
        b"Return-Path: <>\nDelivered-To: bob@example.org\n")
    assert with_envelope_headers(b"S: x\n\nb\n", "a@b.c", "").startswith(b"Return-Path: <a@b.c>\n")
