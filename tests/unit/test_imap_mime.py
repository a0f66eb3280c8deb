"""The IMAP server's reading of a message's structure (adapters/imap/mime.py): every body
section is a slice of the stored bytes, for every corpus message, and the structures
imaptest's scripts name come out as Dovecot gives them."""

from __future__ import annotations

import pytest

from adapters.imap import mime
from tests.factories import CORPUS, corpus_messages

MESSAGES = list(corpus_messages(CORPUS)) if CORPUS.is_dir() else []

NESTED = (b"From: user@domain.org\r\nMime-Version: 1.0\r\n"
          b"Content-Type: multipart/mixed; boundary=\"foo\r\n bar\"\r\n\r\n"
          b"Root prologue\r\n\r\n--foo bar\r\nContent-Type: text/x-myown; charset=us-ascii\r\n"
          b"\r\nhello\r\n\r\n--foo bar\r\nContent-Type: message/rfc822\r\n\r\n"
          b"From: sub@domain.org\r\nSubject: submsg\r\n"
          b"Content-Type: multipart/alternative; boundary=\"sub1\"\r\n\r\n"
          b"--sub1\r\nContent-Type: text/html\r\n\r\n<p>Hello</p>\r\n"
          b"--sub1\r\nContent-Type: text/plain\r\n\r\nHello\r\n--sub1--\r\n"
          b"\r\n--foo bar--\r\nepilogue\r\n")


def _leaves(part: mime.Part, prefix: str = "") -> list[str]:
    """The section numbers of every part below ``part``."""
    out = []
    inner = part.message if part.message is not None else part
    children = inner.children if inner.maintype == "multipart" else []
    for i, child in enumerate(children, start=1):
        out.append(f"{prefix}{i}")
        out += _leaves(child, f"{prefix}{i}.")
    return out


@pytest.mark.skipif(not MESSAGES, reason="the shared mail corpus is not beside the checkout")
@pytest.mark.parametrize(("name", "raw"), MESSAGES, ids=[n for n, _ in MESSAGES])
def test_every_section_of_a_corpus_message_is_a_slice_of_its_bytes(name: str,
                                                                   raw: bytes) -> None:
    part = mime.parse(raw)
    assert mime.section(part, "") == raw
    assert mime.section(part, "HEADER") + mime.section(part, "TEXT") == raw
    for number in ["1", *_leaves(part)]:
        body = mime.section(part, number)
        header = mime.section(part, f"{number}.MIME")
        assert body is not None and body in raw, number
        assert header is not None and header in raw, number
    assert mime.bodystructure(part).startswith(b"(")
    assert mime.envelope(part).startswith(b"(")


def test_a_nested_message_s_sections_are_its_bytes() -> None:
    part = mime.parse(NESTED)
    assert mime.section(part, "1") == b"hello\r\n"
    assert mime.section(part, "1.MIME") == (b"Content-Type: text/x-myown; "
                                            b"charset=us-ascii\r\n\r\n")
    assert mime.section(part, "2.HEADER").startswith(b"From: sub@domain.org\r\n")
    assert mime.section(part, "2.1") == b"<p>Hello</p>"
    assert mime.section(part, "2.2") == b"Hello"
    assert mime.section(part, "2.HEADER.FIELDS (SUBJECT X-NONE)") == (
        b"Subject: submsg\r\n\r\n")
    assert mime.section(part, "3") is None
    assert mime.section(part, "1.1") is None


def test_a_part_number_that_names_no_part_or_no_message_reads_as_none() -> None:
    part = mime.parse(NESTED)
    assert mime.section(part, "1.HEADER") is None  # part 1 is text, not a message
    assert mime.section(part, "2.1.TEXT") is None
    text = mime.section(part, "2.TEXT")  # part 2 is a message: its text is the multipart
    assert text is not None and text.startswith(b"--sub1\r\n")
    assert mime.binary_section(part, "3") is None
    assert mime.binary_section(part, "2.3") is None
    assert mime.binary_section(part, "2") == mime.section(part, "2")  # a message/rfc822
    assert mime.binary_section(part, "2.2") == b"Hello"


def test_bodystructure_names_types_sizes_and_lines_as_dovecot_does() -> None:
    part = mime.parse(NESTED)
    assert mime.bodystructure(part, extended=False).startswith(
        b'(("TEXT" "X-MYOWN" ("charset" "us-ascii") NIL NIL "7BIT" 7 1)')
    assert b'"MIXED" ("boundary" "foo bar")' in mime.bodystructure(part)


@pytest.mark.parametrize(("header", "expected"), [
    (b"user@domain (Real Name)", b'(("Real Name" NIL "user" "domain"))'),
    (b"\"Ada L.\" <ada@example.org>", b'(("Ada L." NIL "ada" "example.org"))'),
    (b"<@route:user@domain>", b'((NIL "@route" "user" "domain"))'),
    (b"group: a@b.org, c@d.org;", b'((NIL NIL "group" NIL)(NIL NIL "a" "b.org")'
                                  b'(NIL NIL "c" "d.org")(NIL NIL NIL NIL))'),
    (b"undisclosed-recipients:;", b'((NIL NIL "undisclosed-recipients" NIL)'
                                  b'(NIL NIL NIL NIL))'),
])
def test_addresses_read_as_imap_lists(header: bytes, expected: bytes) -> None:
    assert mime.addresses(header) == expected


def test_the_binary_form_decodes_leaves_and_says_binary() -> None:
    """URLAUTH=BINARY's form of a message/rfc822 part (RFC 5524), as Dovecot gives it: the
    leaves decoded, their Content-Transfer-Encoding ``binary``, sizes of the decoded form."""
    raw = (b"Content-Type: multipart/mixed; boundary=b\r\n\r\npre\r\n--b\r\n"
           b"Content-Type: message/rfc822\r\n\r\nSubject: inner\r\n"
           b"Content-Type: text/plain\r\nContent-Transfer-Encoding: base64\r\n\r\n"
           b"aGVsbG8gd29y\r\nbGQ=\r\n\r\n--b--\r\n")
    message = mime.parse(raw)
    part = mime.part_at(message, "1")
    assert part is not None and part.message is not None
    assert mime.binary_body(part) == (b"Subject: inner\r\nContent-Type: text/plain\r\n"
                                      b"Content-Transfer-Encoding: binary\r\n\r\nhello world")
    assert mime.binary_measure(part.message) == (11, 0)
    structure = mime.bodystructure(part, measure=mime.binary_measure)
    inner = len(mime.binary_body(part))
    assert structure.startswith(b'("MESSAGE" "RFC822" NIL NIL NIL "7BIT" %d ' % inner)
    assert b'"BASE64" 11 0' in structure
    assert mime.part_at(message, "x") is None and mime.part_at(message, "3") is None
