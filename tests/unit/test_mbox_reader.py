"""The importer's mbox reader splits a file exactly as Python's ``mailbox.mbox`` does (the
idempotency keys of an earlier import depend on those bytes), and reads Status flags."""

from __future__ import annotations

import mailbox
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.cli.import_mbox import MBOX_FLAGS, mbox_flags, mbox_messages, mbox_spans

LINES = st.sampled_from([b"From a@b Sat Jan  3 01:05:34 1996\n", b"From \n", b"\n", b"\r\n",
                         b"Subject: x\n", b">From quoted\n", b"body From here\n", b"Status: RO\n",
                         b"X-Status: F\n", b"text", b"From no newline"])


def stdlib_messages(path: Path) -> list[bytes]:
    box = mailbox.mbox(str(path), create=False)
    try:
        return [box.get_bytes(k, from_=True) for k in box.iterkeys()]
    finally:
        box.close()


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, min_size=0, max_size=14))
def test_spans_cut_any_mbox_as_the_stdlib_does(tmp_path_factory, tail):
    data = b"From x@y Mon Jan  1 00:00:00 2024\n" + b"".join(tail)
    path = tmp_path_factory.mktemp("mbox") / "box"
    path.write_bytes(data)
    assert [data[a:b] for a, b in mbox_spans(data)] == stdlib_messages(path)


def test_corpus_mbox_reads_the_same_messages_and_keys_as_before(tmp_path, corpus):
    corpus = sorted(corpus.glob("*.eml"))
    assert len(corpus) > 5
    path = tmp_path / "corpus.mbox"
    box = mailbox.mbox(str(path))
    for eml in corpus:
        box.add(eml.read_bytes())
    box.flush()
    box.close()
    expected = [m.partition(b"\n")[2] for m in stdlib_messages(path)]
    total, items = mbox_messages(path)
    got = list(items)
    assert total == len(corpus) == len(got)
    assert [m.raw for m in got] == expected
    assert len({m.key for m in got}) == len(got)
    assert {m.key.split(":")[1] for m in got} == {got[0].key.split(":")[1]}


def test_status_headers_give_flags_and_the_body_does_not():
    raw = b"Subject: s\nStatus: RO\nx-status: FA\n\nStatus: D\n"
    assert mbox_flags(raw) == tuple(sorted({MBOX_FLAGS[c] for c in "RFA"}))
    assert mbox_flags(b"Subject: none\n\nbody\n") == ()


_WORDS = st.sampled_from(["Sun", "sun", "THU", "Sunday", "Foo", "Mar", "mar", "Feb", "Sept",
                          "1", "01", "7", "29", "30", "31", "0", "32", "²", "٣",
                          "12:34:56", "23:59:59", "24:00:00", "7:05:03", "12:60:00",
                          "12:00:60", "12-34-56", "2020", "0000", "99", "20200", "٢٠٢٠"])


@settings(max_examples=2000, deadline=None)
@given(st.tuples(_WORDS, _WORDS, _WORDS, _WORDS, _WORDS))
def test_the_fast_from_line_date_reads_what_strptime_reads_or_leaves_it_to_strptime(words):
    """The fast reader of the usual form never gives a date strptime would not give."""
    from datetime import datetime

    from adapters.cli.import_mbox import _fast_date

    weekday, month, day, hms, year = words
    try:
        expected = datetime.strptime(" ".join(words), "%a %b %d %H:%M:%S %Y")
    except ValueError:
        expected = None
    fast = _fast_date(weekday, month, day, hms, year)
    assert fast is None or fast == expected


def test_the_usual_from_lines_take_the_fast_path():
    from datetime import UTC, datetime

    from adapters.cli.import_mbox import _fast_date, from_line_date

    assert _fast_date("Sun", "Mar", "1", "12:34:56", "2020") == datetime(2020, 3, 1, 12, 34, 56)
    assert from_line_date("From a@b Thu Nov 26 10:00:00 2026") == (
        datetime(2026, 11, 26, 10, tzinfo=UTC), None)
    assert from_line_date("From a@b thu nov 26 10:00:00 2026")[0] == datetime(
        2026, 11, 26, 10, tzinfo=UTC)  # strptime's case-insensitive names, read the same
    assert from_line_date("From a@b Thu Feb 30 10:00:00 2026")[0] is None
