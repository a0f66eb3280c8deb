"""What the MTA says about a delivery, read as it says it: DSN's ORCPT (RFC 3461 xtext,
RFC 6533 utf-8 addresses) and the null sender of a bounce (issue 42, item 6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.mta.delivery import reverse_path, with_envelope_headers
from adapters.mta.lmtpprotocol import _dsn_params, original_recipient


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


@pytest.mark.parametrize("spool_over", [4, 1 << 20])
def test_a_spooled_message_comes_back_whole(tmp_path: Path, spool_over: int,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 42, item 7: past ``SPOOL_OVER`` bytes a message waits in an unlinked file of
    the data directory, and comes back byte for byte; nothing is left there."""
    import adapters.mta.delivery as delivery

    monkeypatch.setattr(delivery, "SPOOL_OVER", spool_over)
    spool = delivery.Spool(tmp_path)
    pieces = [b"Subject: x\r\n", b"\r\n", b"body " * 3, b"\x00\xff end\r\n"]
    for piece in pieces:
        spool.write(piece)
    assert spool.size == sum(map(len, pieces))
    assert spool.read() == b"".join(pieces)
    assert list(tmp_path.iterdir()) == []


def test_a_spool_that_cannot_write_keeps_the_message_in_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import adapters.mta.delivery as delivery

    monkeypatch.setattr(delivery, "SPOOL_OVER", 4)
    spool = delivery.Spool(tmp_path / "missing")  # cannot be made: stays in memory
    for piece in (b"abc", b"defgh", b"ij"):
        spool.write(piece)
    assert spool.read() == b"abcdefghij"


@pytest.mark.parametrize(("runs", "message"), [
    ([b"..a\r\nb\r\n"], b".a\r\nb\r\n"),
    ([b"a\r\n..\r\n"], b"a\r\n.\r\n"),
    ([b"a\r", b"\n..b\r\n"], b"a\r\n.b\r\n"),
    ([b"a\r\n", b"..b\r\n"], b"a\r\n.b\r\n"),
])
def test_dot_stuffing_is_undone_across_runs(runs: list[bytes], message: bytes) -> None:
    from adapters.mta.lmtpprotocol import _unstuffed

    out, at_line_start, after_cr = b"", True, False
    for run in runs:
        out += _unstuffed(run, at_line_start, after_cr)
        at_line_start, after_cr = run.endswith(b"\r\n"), run.endswith(b"\r")
    assert out == message
