from __future__ import annotations

import hashlib
import mailbox
import random
import time
from datetime import UTC, datetime
from email.headerregistry import HeaderRegistry
from email.message import EmailMessage
from email.policy import EmailPolicy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from adapters.demo.benchmail import bench_messages
from adapters.demo.mailgen import generate
from domain.errors import MessageRejected
from domain.rfc5322 import (
    MessageLimits,
    header_block_size,
    inspect_message,
    inspect_message_reference,
    line_ending,
    message_ids,
    prescan_structure,
    sanitise_filename,
)
from domain.rfc5322.defect_upcasting import facts_without_text, without_text
from domain.rfc5322.defects import RECORDED_HEADERS, defect_entry
from domain.rfc5322.headers import simple_header
from domain.rfc5322.reader import ReadMessage, read_fast
from domain.rfc5322.scan import header_block, header_block_size_by_lines


def mail(*headers: str, body: str = "Hello.\r\n", eol: str = "\r\n") -> bytes:
    return (eol.join(headers) + eol + eol + body).encode("utf-8", "surrogateescape")


def multipart(parts: list[bytes], boundary: str = "b1", subtype: str = "mixed") -> bytes:
    head = f"Content-Type: multipart/{subtype}; boundary={boundary}\r\n\r\n".encode()
    inner = b"".join(f"--{boundary}\r\n".encode() + part + b"\r\n" for part in parts)
    return head + inner + f"--{boundary}--\r\n".encode()


def nested_messages(depth: int) -> bytes:
    return b"Content-Type: message/rfc822\r\n\r\n" * depth + b"Subject: inside\r\n\r\nhi\r\n"


def nested_multiparts(depth: int) -> bytes:
    raw = b"Content-Type: text/plain\r\n\r\nleaf\r\n"
    for level in range(depth):
        raw = multipart([raw], boundary=f"level{level}")
    return raw


TEXT_PART = b"Content-Type: text/plain\r\n\r\nsome text"


# --- envelope ------------------------------------------------------------------------------


def test_the_envelope_carries_the_decoded_headers() -> None:
    facts = inspect_message(
        mail(
            "From: Ada Lovelace <ada@example.org>",
            "To: grace@example.org, Alan <alan@example.org>",
            "Cc: group: carl@example.org, dana@example.org;",
            "Bcc: eve@example.org",
            "Subject: Notes on the engine",
            "Date: Sun, 01 Mar 2026 13:30:00 +0100",
            "Message-ID: <m1@example.org>",
            "In-Reply-To: <m0@example.org>",
            "References: <r1@example.org> <m0@example.org>",
        )
    )
    envelope = facts.envelope
    assert envelope.from_ == "Ada Lovelace <ada@example.org>"
    assert envelope.to == ("grace@example.org", "Alan <alan@example.org>")
    assert envelope.cc == ("carl@example.org", "dana@example.org")
    assert envelope.bcc == ("eve@example.org",)
    assert envelope.subject == "Notes on the engine"
    assert envelope.date == "Sun, 01 Mar 2026 13:30:00 +0100"
    assert envelope.sent_at == datetime(2026, 3, 1, 12, 30, tzinfo=UTC)
    assert envelope.message_id == "<m1@example.org>"
    assert envelope.in_reply_to == "<m0@example.org>"
    assert envelope.references == ("<r1@example.org>", "<m0@example.org>")
    assert facts.defects == ()


def test_absent_headers_are_empty_not_missing() -> None:
    envelope = inspect_message(mail("X-Only: this")).envelope
    assert (envelope.subject, envelope.from_, envelope.to) == ("", "", ())
    assert (envelope.date, envelope.sent_at, envelope.message_id) == (None, None, None)


@pytest.mark.parametrize(
    ("encoded", "decoded"),
    [
        ("=?utf-8?q?Caf=C3=A9_cr=C3=A8me?=", "Café crème"),
        ("=?ISO-8859-1?B?SGFsbG8gV2VsdCE=?= =?iso-8859-1?q?_=E4?=", "Hallo Welt! ä"),
        ("=?GB2312?B?tPq/qrj3tdjU9ta1y7C3osax?=", "代开各地增值税发票"),
        ("Re: =?utf-8?b?8J+Ygg==?= plain", "Re: 😂 plain"),
    ],
)
def test_encoded_word_subjects_are_decoded(encoded: str, decoded: str) -> None:
    assert inspect_message(mail(f"Subject: {encoded}")).envelope.subject == decoded


def test_raw_utf8_headers_are_read_as_utf8() -> None:
    raw = "From: Jöhn <jöhn@exämple.org>\r\nSubject: Säying hello\r\n\r\nhi".encode()
    envelope = inspect_message(raw).envelope
    assert (envelope.from_, envelope.subject) == ("Jöhn <jöhn@exämple.org>", "Säying hello")


def test_a_decoded_header_never_carries_line_breaks() -> None:
    subject = inspect_message(mail("Subject: =?utf-8?b?b25lDQp0d28=?=")).envelope.subject
    assert subject == "one two"


@pytest.mark.parametrize(
    ("date", "sent_at"),
    [
        ("Sun, 1 Mar 2026 12:00:00 -0000", datetime(2026, 3, 1, 12, tzinfo=UTC)),
        ("1 Mar 2026 04:00:00 PST", datetime(2026, 3, 1, 12, tzinfo=UTC)),
        ("Sun, 1 Mar 2026 12:00:00 +0000 (UTC)", datetime(2026, 3, 1, 12, tzinfo=UTC)),
        ("Malformed Date", None),
        ("", None),
    ],
)
def test_the_sending_time_is_utc_or_none(date: str, sent_at: datetime | None) -> None:
    envelope = inspect_message(mail(f"Date: {date}")).envelope
    assert envelope.sent_at == sent_at
    assert envelope.date == date


@pytest.mark.parametrize(
    ("value", "ids"),
    [
        ("<a@b>", ("<a@b>",)),
        ("  < a@b >  (comment)", ("<a@b>",)),
        ("a@b", ("<a@b>",)),
        ("<x@y> <a@b>\r\n <x@y>", ("<x@y>", "<a@b>")),
        ("John's message of yesterday", ()),
        ("<>", ()),
    ],
)
def test_message_ids_are_normalised(value: str, ids: tuple[str, ...]) -> None:
    assert message_ids(value) == ids


def test_a_header_the_parser_chokes_on_falls_back_to_its_raw_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = EmailPolicy.header_fetch_parse

    def choke(self: EmailPolicy, name: str, value: str) -> Any:
        if name in ("subject", "to"):
            raise AttributeError("'Group' object has no attribute 'local_part'")
        return original(self, name, value)

    monkeypatch.setattr(EmailPolicy, "header_fetch_parse", choke)
    facts = inspect_message(
        mail("Subject: =?utf-8?q?caf=C3=A9?=", "To: Grace <grace@example.org>, a@b.org")
    )
    assert facts.envelope.subject == "café"
    assert facts.envelope.to == ("Grace <grace@example.org>", "a@b.org")
    assert [d.split(":")[0] for d in facts.defects] == ["HeaderDecodeFailure"] * 2


def test_stdlib_header_bugs_do_not_escape() -> None:
    """An empty group and an encoded CR LF in an address raise inside Python 3.11's parser."""
    facts = inspect_message(
        mail(
            "To: unlisted-recipients:; (no To-header on input)",
            "From: =?UTF-8?B?QmV2ZXJseSBIaWxscyBNRA0==?= <c@yahoo.com>",
        )
    )
    assert facts.envelope.to == ()
    assert facts.envelope.from_.endswith("<c@yahoo.com>")


# --- facts and defects ---------------------------------------------------------------------


def test_the_facts_describe_the_bytes() -> None:
    raw = multipart([TEXT_PART, b"Content-Type: text/html\r\n\r\n<p>hi</p>"], subtype="alternative")
    facts = inspect_message(raw)
    assert (facts.size, facts.content_type) == (len(raw), "multipart/alternative")
    assert (facts.part_count, facts.depth, facts.line_ending) == (3, 1, "CRLF")
    assert facts.header_bytes == len(b"Content-Type: multipart/alternative; boundary=b1\r\n\r\n")
    assert len(facts.sha256) == 64 and not facts.has_attachments


def test_a_broken_message_is_kept_with_its_defects() -> None:
    raw = b"Content-Type: multipart/mixed; boundary=never\r\n\r\nno parts at all\r\n"
    facts = inspect_message(raw)
    assert "StartBoundaryNotFoundDefect" in facts.defects
    assert facts.part_count == 1


def test_header_defects_name_their_header() -> None:
    facts = inspect_message(b"From: L\xfctkebohle <ingo@example.org>\r\n\r\nhi")
    assert facts.defects == ("UndecodableBytesDefect: from",)
    assert facts.envelope.from_ == "L\ufffdtkebohle <ingo@example.org>"


MALFORMED_FILE_NAME = (
    b"From: a@example.org\r\nMIME-Version: 1.0\r\n"
    b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n"
    b"Content-Type: text/plain; name==?koi8-r?B?89DJ08/LLmRvYw==?=\r\n"
    b"Content-Disposition: attachment; filename==?koi8-r?B?89DJ08/LLmRvYw==?=\r\n\r\n"
    b"hi\r\n--b--\r\n"
)


@pytest.mark.parametrize("raw", [
    MALFORMED_FILE_NAME,
    b" From: Ada Lovelace <ada@analytical.example>\r\nSubject: x\r\n\r\nhi\r\n",
    b"From: a@example.org\r\nTo: Secret Project Falcon <falcon\x00@\r\n\r\nhi\r\n",
])
def test_defects_keep_their_class_and_header_and_no_text_of_the_message(raw: bytes) -> None:
    """A defect's own text often quotes the header's value; the facts are not sealed."""
    for facts in (inspect_message(raw), inspect_message_reference(raw)):
        assert facts.defects
        for defect in facts.defects:
            kind, *header = defect.split(": ")
            assert kind.isidentifier() and len(header) <= 2, defect
            assert all(h in RECORDED_HEADERS or h.isidentifier() for h in header), defect
        text = " ".join(facts.defects)
        assert not {"89DJ08", "koi8", "Lovelace", "analytical", "Falcon"} & set(
            text.replace(":", " ").replace("/", " ").split()), text


def test_an_entry_is_made_of_tokens_only() -> None:
    assert defect_entry("InvalidHeaderDefect", "content-type") == (
        "InvalidHeaderDefect: content-type")
    assert defect_entry("InvalidHeaderDefect", "Subject: secret") == "InvalidHeaderDefect"
    assert defect_entry("InvalidHeaderDefect", "x" * 77) == "InvalidHeaderDefect"
    assert defect_entry("not a class", "to") == "Defect: to"
    assert defect_entry("HeaderDecodeFailure", "to", ValueError("Ada <x@y>")) == (
        "HeaderDecodeFailure: to: ValueError")
    assert defect_entry("ParserFailure", error=RecursionError()) == (
        "ParserFailure: RecursionError")


@pytest.mark.parametrize(("old", "new"), [
    ("InvalidHeaderDefect: content-type: invalid parameter InvalidParameter([CFWSList("
     "[WhiteSpaceTerminal(' ')]), Phrase([Atom([ValueTerminal('name==?koi8-r?B?89DJ08/"
     "LLmRvYw==?=')])])])", "InvalidHeaderDefect: content-type"),
    ("FirstHeaderLineIsContinuationDefect: From: James Hillyerd <james@makita.skynet>",
     "FirstHeaderLineIsContinuationDefect"),
    ("UndecodableBytesDefect: from: Non-ASCII characters found in header token",
     "UndecodableBytesDefect: from"),
    ("UndecodableBytesDefect: content-type", "UndecodableBytesDefect: content-type"),
    ("HeaderTruncated: subject: decoded its first 16381 bytes", "HeaderTruncated: subject"),
    ("HeaderDecodeFailure: to: AttributeError: 'Group' object has no attribute 'local_part'",
     "HeaderDecodeFailure: to: AttributeError"),
    ("HeaderDecodeFailure: attachment: ValueError: bad name.doc",
     "HeaderDecodeFailure: ValueError"),
    ("ParserFailure: MIME nesting too deep for the parser", "ParserFailure: RecursionError"),
    ("ParserFailure: IndexError: string index out of range", "ParserFailure: IndexError"),
    ("TooManyDefects: 49 more not recorded", "TooManyDefects: 49 more not recorded"),
    ("TooManyDefects: ada", "TooManyDefects"),
    ("StartBoundaryNotFoundDefect", "StartBoundaryNotFoundDefect"),
    ("Ada Lovelace: to", "Defect"),
    ("MisplacedEnvelopeHeaderDefect: From ada@example.org Mon Jan  1 00:00:00 2024",
     "MisplacedEnvelopeHeaderDefect"),
])
def test_a_defect_recorded_with_text_is_read_without_it(old: str, new: str) -> None:
    assert without_text(old) == new
    assert without_text(new) == new


def test_defects_recorded_now_read_back_unchanged() -> None:
    raws = [MALFORMED_FILE_NAME, b"From: L\xfctkebohle <ingo@example.org>\r\n\r\nhi",
            b"From: a@example.org\r\nContent-Type: multipart/mixed; boundary*=\"'\"\r\n"
            b"\r\nbody\r\n"]
    for raw in raws:
        defects = list(inspect_message(raw).defects)
        assert defects and [without_text(d) for d in defects] == defects
        facts = {"content_type": "text/plain", "defects": defects}
        assert facts_without_text(facts) is facts


def test_a_defect_storm_is_summed_up() -> None:
    raw = multipart([b"Content-Type: multipart/mixed; boundary=x\r\n\r\n"] * 150)
    defects = inspect_message(raw).defects
    assert len(defects) == 101
    assert defects[-1].startswith("TooManyDefects:")


@pytest.mark.parametrize(
    ("raw", "ending"),
    [
        (b"A: b\r\n\r\nc\r\n", "CRLF"),
        (b"A: b\n\nc\n", "LF"),
        (b"A: b\r\n\nc", "mixed"),
        (b"c", "none"),
    ],
)
def test_line_endings_are_reported(raw: bytes, ending: str) -> None:
    assert inspect_message(raw).line_ending == ending


def test_an_mbox_from_line_at_the_start_is_accepted() -> None:
    raw = b"From ada@example.org Sun Mar  1 12:00:00 2026\nSubject: hi\n\nbody\n"
    facts = inspect_message(raw)
    assert facts.envelope.subject == "hi" and facts.defects == ()


def test_attachments_are_parts_with_a_file_name_or_attachment_disposition() -> None:
    raw = multipart(
        [
            TEXT_PART,
            b'Content-Type: application/pdf; name="../../etc/passwd"\r\n\r\n%PDF',
            b"Content-Type: image/png\r\nContent-Disposition: inline;"
            b" filename*=utf-8''%C3%A9t%C3%A9.png\r\n\r\nPNG",
            b"Content-Type: message/rfc822\r\nContent-Disposition: attachment\r\n\r\n"
            b"Subject: forwarded\r\n\r\nhi",
            b"Content-Type: message/external-body; name=elsewhere.txt\r\n\r\n",
        ]
    )
    facts = inspect_message(raw)
    assert facts.has_attachments
    assert facts.attachment_names == ("passwd", "été.png", "attachment")


# --- limits --------------------------------------------------------------------------------


def test_a_message_over_the_size_limit_is_rejected_naming_the_setting() -> None:
    raw = mail("Subject: big", body="x" * 200)
    with pytest.raises(MessageRejected,
                       match=rf"{len(raw)} bytes exceeds max_message_size=100"):
        inspect_message(raw, MessageLimits(max_size=100))


def test_a_header_block_over_its_limit_is_read_up_to_the_limit() -> None:
    raw = mail("Subject: short", "X-Long: " + "long " * 40, "X-More: yes")
    facts = inspect_message(raw, MessageLimits(max_header_bytes=64))
    assert facts.truncated == ("max_header_bytes",)
    assert facts.envelope.subject == "short"
    assert facts.header_bytes == len(raw) - len(b"Hello.\r\n")  # the real size


def test_a_header_block_without_end_is_read_up_to_the_limit() -> None:
    facts = inspect_message(b"Subject: " + b"x" * 100, MessageLimits(max_header_bytes=64))
    assert facts.truncated == ("max_header_bytes",) and facts.size == 109


def test_too_many_parts_stop_the_parse_at_the_limit() -> None:
    raw = multipart([TEXT_PART] * 5)
    facts = inspect_message(raw, MessageLimits(max_parts=3))
    assert (facts.part_count, facts.truncated) == (3, ("max_parts",))
    assert inspect_message(raw).part_count == 6


@pytest.mark.parametrize("build", [nested_messages, nested_multiparts])
def test_nesting_deeper_than_the_limit_stops_the_parse_at_the_limit(build: Any) -> None:
    assert inspect_message(build(32)).truncated == ()
    facts = inspect_message(build(33))
    assert (facts.depth, facts.truncated) == (32, ("max_depth",))


@pytest.mark.parametrize("build", [nested_messages, nested_multiparts])
def test_pathological_nesting_is_cut_before_the_parser_sees_it(build: Any) -> None:
    raw = build(3000)
    started = time.perf_counter()
    facts = inspect_message(raw, MessageLimits(max_parts=10_000))
    assert time.perf_counter() - started < 2
    assert (facts.depth, facts.truncated) == (32, ("max_depth",))


def test_a_hundred_thousand_tiny_parts_are_cut_before_parsing() -> None:
    raw = b"Content-Type: multipart/mixed; boundary=b\r\n\r\n" + b"--b\r\n\r\n" * 100_000
    started = time.perf_counter()
    facts = inspect_message(raw)
    assert time.perf_counter() - started < 2
    assert (facts.part_count, facts.truncated) == (1000, ("max_parts",))


def test_a_line_over_its_limit_ends_the_parse_where_it_starts() -> None:
    attachment = (b"Content-Type: application/pdf\r\nContent-Disposition: attachment; "
                  b"filename=a.pdf\r\n\r\n")
    raw = multipart([TEXT_PART + b"x" * 5000, attachment + b"pdf"])
    assert inspect_message(raw).attachment_names == ("a.pdf",)
    facts = inspect_message(raw, MessageLimits(max_line_length=1000))
    assert facts.truncated == ("max_line_length",)
    assert facts.attachment_names == ()


def test_a_parse_over_its_time_budget_keeps_what_it_read() -> None:
    raw = multipart([TEXT_PART + b"\r\n" + b"line of text\r\n" * 20_000] * 4)
    facts = inspect_message(raw, MessageLimits(parse_seconds=1e-9))
    assert facts.truncated == ("parse_seconds",)
    assert 1 <= facts.part_count < 5 and facts.size == len(raw)


def test_text_that_only_talks_about_mime_is_not_mistaken_for_deep_mime() -> None:
    body = "--boundary=x in message/rfc822 of a digest\r\n" * 2000
    facts = inspect_message(mail("Subject: MIME lecture notes", body=body))
    assert (facts.part_count, facts.depth) == (1, 0)


@pytest.mark.parametrize(
    "raw",
    [
        nested_multiparts(3),
        nested_messages(3),
        multipart([TEXT_PART, multipart([TEXT_PART] * 3, boundary="b1")], boundary="b1"),
        b"Content-Type: multipart/digest; boundary=d\r\n\r\n--d\r\n\r\nSubject: a\r\n\r\n--d--\r\n",
        b"Content-Type: message/delivery-status\r\n\r\nA: 1\r\n\r\nB: 2\r\n\r\nC: 3\r\n",
        b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n--b\r\nA: b\r\n\r\nc\r\n--b--",
    ],
    ids=["multiparts", "messages", "reused-boundary", "digest", "delivery-status", "repeated"],
)
def test_the_pre_scan_counts_what_the_parser_finds(raw: bytes) -> None:
    facts = inspect_message(raw)
    assert prescan_structure(raw) == (facts.part_count, facts.depth)


# --- not a message -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"", "empty input"),
        (b" \r\n\t\r\n", "whitespace only"),
        (random.Random(5322).randbytes(4096), "binary data"),
        (b"\x00" * 1000, "binary data"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10", "binary data"),
        (b"\r\n" + random.Random(1).randbytes(2000), "binary data"),
        (b"\tcontinued\x00\x01\x02\x03\x04\x05: x\r\n\r\nbody", "binary data"),
        ("Subject: text, not bytes\r\n\r\nhi", "expected bytes"),
    ],
    ids=["empty", "blank", "random", "nul", "png", "blank-then-binary", "binary-header", "str"],
)
def test_bytes_that_are_not_a_message_are_rejected(raw: Any, problem: str) -> None:
    with pytest.raises(MessageRejected, match=f"not a message: .*{problem}"):
        inspect_message(raw)


def test_a_few_bytes_of_binary_junk_are_not_a_message() -> None:
    with pytest.raises(MessageRejected, match="binary data, 3 NUL/control bytes"):
        inspect_message(b"\x00\x01\x02 binary junk")


def test_text_without_headers_is_kept_as_a_defective_message() -> None:
    """Mail corpora are full of these; the stdlib reads them as a body without headers."""
    facts = inspect_message(b"This is a simple message not having headers.\r\n")
    assert facts.defects == ("MissingHeaderBodySeparatorDefect",)
    assert (facts.header_bytes, facts.content_type) == (0, "text/plain")


def test_a_stray_nul_in_real_mail_is_tolerated() -> None:
    facts = inspect_message(mail("Subject: spam\x00", "From: a@b.org", body="\x00\x00"))
    assert facts.envelope.from_ == "a@b.org"


# --- file names ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offered", "safe"),
    [
        ("report.pdf", "report.pdf"),
        ("../../etc/passwd", "passwd"),
        ("..\\..\\windows\\system32\\cmd.exe", "cmd.exe"),
        ("C:\\Users\\ada\\notes.txt", "notes.txt"),
        ("evil.exe\x00.txt", "evil.exe.txt"),
        ("a\r\nContent-Type: text-html.txt", "a Content-Type_ text-html.txt"),
        ("\u202etxt.exe", "txt.exe"),
        ("a..b.txt", "a.b.txt"),
        ("..", "attachment"),
        ("   ", "attachment"),
        ("", "attachment"),
        (".bashrc", "bashrc"),
        ("CON.txt", "_CON.txt"),
        ('why?<not>*"this"|.txt', "why__not___this__.txt"),
        ("photo\udce9.jpg", "photo\ufffd.jpg"),
    ],
)
def test_file_names_are_sanitised(offered: str, safe: str) -> None:
    assert sanitise_filename(offered) == safe


def test_a_long_file_name_is_cut_to_255_bytes_keeping_its_extension() -> None:
    safe = sanitise_filename("é" * 300 + ".pdf")
    assert len(safe.encode()) <= 255 and safe.endswith("é.pdf")


@given(st.text())
def test_any_sanitised_name_is_safe_and_stable(name: str) -> None:
    safe = sanitise_filename(name)
    assert safe and len(safe.encode()) <= 255
    assert not any(c in safe for c in "/\\\x00\r\n") and ".." not in safe
    assert all(c.isprintable() or c == " " for c in safe)
    assert sanitise_filename(safe) == safe


# --- the fast paths give the reference facts -----------------------------------------------
#
# inspect_message reads well-formed mail with its own reader and shortcut header decoding;
# inspect_message_reference is the stdlib parser with policy.default's header classes only.
# They must agree on everything, including defects and rejections.

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "mail"


def corpus_mail() -> list[tuple[str, bytes]]:
    if not CORPUS.is_dir():
        return []
    found: list[tuple[str, bytes]] = []
    for path in sorted(CORPUS.iterdir()):
        if path.suffix == ".eml":
            found.append((path.name, path.read_bytes()))
        elif path.suffix == ".mbox":
            box = mailbox.mbox(path, create=False)
            found += [(f"{path.name}#{key}", box.get_bytes(key)) for key in box.iterkeys()]
            box.close()
    return found


def outcome(inspect: Any, raw: bytes, limits: MessageLimits) -> object:
    try:
        return inspect(raw, limits)
    except MessageRejected as rejected:
        return ("rejected", str(rejected))


TIGHT_LIMITS = [
    MessageLimits(),
    MessageLimits(max_parts=2),
    MessageLimits(max_parts=3, max_depth=1),
    MessageLimits(max_header_bytes=300),
]


def assert_same_facts(raw: bytes, limits: list[MessageLimits] = TIGHT_LIMITS) -> None:
    for limit in limits:
        fast = outcome(inspect_message, raw, limit)
        assert fast == outcome(inspect_message_reference, raw, limit), limit


@pytest.mark.slow
def test_the_fast_path_gives_the_reference_facts_for_the_corpus() -> None:
    mail_ = corpus_mail()
    if not mail_:
        pytest.skip(f"no mail corpus at {CORPUS}")
    for name, raw in mail_:
        try:
            assert_same_facts(raw)
        except AssertionError as error:
            raise AssertionError(f"{name}: {error}") from None


def test_the_fast_path_gives_the_reference_facts_for_generated_mail() -> None:
    for number, raw in enumerate(bench_messages(200) + [g.raw for g in generate(100)]):
        assert_same_facts(raw, TIGHT_LIMITS if number % 10 == 0 else TIGHT_LIMITS[:1])


def test_generated_mail_takes_the_fast_path() -> None:
    """Typical mail must not fall back to the stdlib parser (correct, but ten times slower)."""
    for raw in bench_messages(40) + [g.raw for g in generate(40)]:
        header_lines, _ = header_block(raw)
        assert read_fast(raw, MessageLimits(), header_lines) is not None


LINE_BREAKS = st.sampled_from(["\r\n", "\n", "\r", ""])
MESSAGE_LINES = st.sampled_from(
    [
        "Subject: hello",
        "From: Ada <ada@example.org>",
        'To: a@b.org, "Last, First" <x@y.org>',
        "Date: Sun, 01 Mar 2026 12:00:00 +0000",
        "Message-ID: <m1@example.org>",
        "Content-Type: multipart/mixed; boundary=b1",
        "Content-Type: multipart/alternative;",
        ' boundary="b2"',
        "Content-Type: text/plain; charset=utf-8",
        "Content-Type: message/rfc822",
        "Content-Type: multipart/digest; boundary=b1",
        'Content-Disposition: attachment; filename="a.pdf"',
        "Content-Transfer-Encoding: base64",
        "--b1",
        "--b1--",
        "--b2",
        "--b2--",
        "--b1 ",
        "From ada@example.org Sun Mar  1 12:00:00 2026",
        ":no name",
        "\tcontinued",
        "",
        "",
        "body text",
        "-- ",
        "X-Sp\xe9cial: caf\xe9",
    ]
)


@given(st.lists(st.tuples(MESSAGE_LINES, LINE_BREAKS), min_size=1, max_size=25))
def test_the_fast_path_gives_the_reference_facts_for_any_structure(
    lines: list[tuple[str, str]],
) -> None:
    raw = "".join(line + eol for line, eol in lines).encode("utf-8", "surrogateescape")
    assert_same_facts(raw)


def header_object(header: Any) -> tuple[object, ...]:
    return (
        str(header),
        [(type(defect).__name__, str(defect)) for defect in header.defects],
        [str(address) for address in getattr(header, "addresses", ())],
        getattr(header, "datetime", None),
    )


ATOM = st.text("abcXYZ019!#$%&'*+/=?^_`{|}~-", min_size=1, max_size=5)
NASTY = st.text(' \t.,;:<>@"()[]\\=?\xe9\x00\x7f\udce9aZ', max_size=3)
ADDRESS = st.builds(lambda a, b: f"{a}@{b}", ATOM, st.builds(".".join, st.lists(ATOM, min_size=1)))
MAILBOX = st.one_of(
    ADDRESS,
    st.builds(lambda n, a: f"{n} <{a}>", st.builds(" ".join, st.lists(ATOM, min_size=1)), ADDRESS),
    st.builds(lambda n, a: f'"{n}" <{a}>', st.text("ab ,.@;:<>()[]x", min_size=1), ADDRESS),
    st.builds(lambda a: f"<{a}>", ADDRESS),
)
PARAMETER = st.builds(
    lambda n, v, q: f'{n}="{v}"' if q else f"{n}={v}",
    st.sampled_from(["charset", "boundary", "name", "filename", "a", "A"]),
    st.text("abcXYZ019!#$&+-.^_`{|}~'%* ", min_size=1, max_size=8),
    st.booleans(),
)
HEADER_VALUES = {
    "subject": st.text(max_size=20),
    "to": st.lists(MAILBOX, min_size=1, max_size=3).map(", ".join),
    "date": st.sampled_from(
        [
            "Mon, 05 Jan 2026 08:00:00 +0000",
            "1 Mar 2026 04:00:00 PST",
            "Malformed",
            "",
            "31 Feb 2026 10:00 +0100",
            "Mon, 05 Jan 99 08:00:00 +0000",
            "Mon, 05 Jan 0000 08:00",
        ]
    ),
    "content-type": st.builds(
        lambda head, params, sep: head + "".join(sep + p for p in params),
        st.sampled_from(["text/plain", "multipart/mixed", " Application/PDF ", "text", "a/b/c"]),
        st.lists(PARAMETER, max_size=3),
        st.sampled_from([";", "; ", " ;", ";  "]),
    ),
    "content-disposition": st.builds(
        lambda head, params: head + "".join("; " + p for p in params),
        st.sampled_from(["inline", "attachment", "form-data"]),
        st.lists(PARAMETER, max_size=3),
    ),
}


@given(st.data())
def test_header_shortcuts_decode_as_policy_default_does(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(HEADER_VALUES)))
    value = data.draw(HEADER_VALUES[name])
    cut = data.draw(st.integers(0, len(value)))
    value = value[:cut] + data.draw(NASTY) + value[cut:]
    simple = simple_header(name, value)
    if simple is not None:
        assert header_object(simple) == header_object(HeaderRegistry()(name, value))


@given(
    st.lists(
        st.sampled_from(
            [
                b"Subject: x",
                b"From ",
                b":x",
                b" cont",
                b"\r\n",
                b"\n",
                b"\r",
                b"--b",
                b"body",
                b"a b: c",
                b"\x00",
                b"N\xe9:",
                b"X-Y:",
            ]
        ),
        max_size=14,
    ),
)
def test_the_header_block_is_found_as_line_by_line(pieces: list[bytes]) -> None:
    raw = b"".join(pieces)
    assert header_block_size(raw) == header_block_size_by_lines(raw)


@given(st.lists(st.sampled_from([b"\r", b"\n", b"\r\n", b"x"]), max_size=12))
def test_line_endings_are_counted_exactly(pieces: list[bytes]) -> None:
    raw = b"".join(pieces)
    crlf = raw.count(b"\r\n")
    bare = raw.count(b"\n") + raw.count(b"\r") - 2 * crlf
    expected = (
        "none"
        if not crlf and not bare
        else "CRLF"
        if not bare
        else "LF"
        if not crlf and b"\r" not in raw
        else "mixed"
    )
    assert line_ending(raw) == expected


@given(
    st.sampled_from(["multipart/mixed", " multipart/alternative ", "text/plain"]),
    st.lists(
        st.builds(
            lambda name, value, quoted: f'{name}="{value}"' if quoted else f"{name}={value}",
            st.sampled_from(["boundary", "Boundary", "BOUNDARY", "charset", "b", "boundary*"]),
            st.text("abcXYZ019!#$&+-.^_`{|}~'%* <>;=/", max_size=10),
            st.booleans(),
        ),
        max_size=3,
    ),
    st.sampled_from([";", "; ", " ;"]),
)
@example("multipart/mixed", ['boundary*="\'"'], ";")  # the stdlib raises IndexError
def test_the_boundary_is_read_as_message_get_boundary_does(
    media: str, parameters: list[str], separator: str
) -> None:
    value = media + "".join(separator + parameter for parameter in parameters)
    stdlib = EmailMessage()
    stdlib.set_raw("Content-Type", value)
    # the same value, or the same exception: the stdlib's own parser raises IndexError on
    # some malformed RFC 2231 values (e.g. boundary*="'"), which inspection records as a
    # ParserFailure defect (test_a_boundary_the_stdlib_cannot_parse_is_a_defect)
    ours = _outcome(ReadMessage([("Content-Type", value)]).get_boundary)
    assert ours == _outcome(stdlib.get_boundary)


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        return "value", call()
    except Exception as error:  # noqa: BLE001 -- compared, not swallowed
        return "raises", type(error)


def test_a_boundary_the_stdlib_cannot_parse_is_a_defect() -> None:
    raw = (b"From: a@example.org\r\nContent-Type: multipart/mixed; boundary*=\"'\"\r\n"
           b"\r\nbody\r\n")
    facts = inspect_message(raw, MessageLimits())
    assert any(d.startswith("ParserFailure: IndexError") for d in facts.defects)


@pytest.mark.parametrize(
    "raw",
    [
        b"Subject: \x01\x02\x03 an old mailer\x00\x7f\r\n\r\nbody\r\n",
        b"\tcontinued\x00\x01\x02\x03\x04\x05: x\r\n\r\nbody",
        random.Random(5322).randbytes(4096),
    ],
    ids=["control-bytes-in-headers", "binary-header", "random"],
)
def test_an_mta_s_message_is_never_refused_for_its_bytes(raw: bytes) -> None:
    """What an MTA hands over is stored unless it cannot be at all (ADR 0067)."""
    facts = inspect_message(raw, refuse_binary=False)
    assert (facts.size, facts.sha256) == (len(raw), hashlib.sha256(raw).hexdigest())


@pytest.mark.parametrize(("raw", "problem"), [(b"", "empty input"),
                                              (b" \r\n", "whitespace only")])
def test_even_an_mta_s_message_must_have_bytes(raw: bytes, problem: str) -> None:
    with pytest.raises(MessageRejected, match=problem):
        inspect_message(raw, refuse_binary=False)
