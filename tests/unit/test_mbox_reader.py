"""The importer's mbox reader splits a file exactly as Python's ``mailbox.mbox`` does (the
idempotency keys of an earlier import depend on those bytes), and reads Status flags."""

from __future__ import annotations

import mailbox
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.cli.importer import MBOX_FLAGS, mbox_flags, mbox_messages, mbox_spans

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
