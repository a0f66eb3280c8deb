"""A message beyond the parse limits is still delivered, listed and extracted byte-exact;
its facts say which limit stopped the parse. Only the total size rejects."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.embedded import Letterlog
from domain.errors import MessageRejected
from tests.factories import make_mail

ADA = "ada@example.org"


def many_parts(count: int) -> bytes:
    head = (b"From: ada@example.org\r\nSubject: many parts\r\n"
            b"Content-Type: multipart/mixed; boundary=sep\r\n\r\n")
    part = b"--sep\r\nContent-Type: text/plain\r\n\r\npart\r\n"
    return head + part * count + b"--sep--\r\n"


def nested(depth: int) -> bytes:
    raw = b"Content-Type: text/plain\r\n\r\nthe innermost part\r\n"
    for level in range(depth):
        raw = (f"Subject: level {level}\r\nContent-Type: multipart/mixed; boundary=l{level}"
               f"\r\n\r\n--l{level}\r\n").encode() + raw + f"\r\n--l{level}--\r\n".encode()
    return raw


def test_a_3000_part_message_is_stored_listed_and_extracted_byte_exact(tmp_path: Path) -> None:
    store = Letterlog.open(tmp_path / "data")
    raw = many_parts(3000)
    d = store.deliver(account=ADA, raw=raw)
    facts = store.show(d.message_id)["facts"]
    assert (facts["part_count"], facts["truncated"]) == (1000, ["max_parts"])
    [listed] = store.messages(ADA)
    assert (listed.subject, listed.truncated) == ("many parts", ["max_parts"])
    assert store.extract(d.message_id) == raw
    store.close()


def test_nesting_beyond_the_depth_limit_is_stored_and_extracted_byte_exact(
        tmp_path: Path) -> None:
    store = Letterlog.open(tmp_path / "data", max_depth=4)
    raw = nested(6)
    d = store.deliver(account=ADA, raw=raw)
    facts = store.show(d.message_id)["facts"]
    assert (facts["depth"], facts["truncated"]) == (4, ["max_depth"])
    assert store.messages(ADA)[0].subject == "level 5"
    assert store.extract(d.message_id) == raw
    store.close()


def test_a_message_within_the_limits_is_not_flagged(tmp_path: Path) -> None:
    store = Letterlog.open(tmp_path / "data")
    d = store.deliver(account=ADA, raw=nested(6))
    assert "truncated" not in store.show(d.message_id)["facts"]
    assert store.messages(ADA)[0].truncated == []
    store.close()


def test_only_the_total_size_rejects_and_the_error_names_the_setting(tmp_path: Path) -> None:
    store = Letterlog.open(tmp_path / "data", max_message_size=1024, max_parts=1,
                           max_header_bytes=1, max_line_length=1)
    store.deliver(account=ADA, raw=many_parts(10)[:1000])  # every parse limit exceeded
    with pytest.raises(MessageRejected, match="max_message_size=1024"):
        store.deliver(account=ADA, raw=make_mail(body="x" * 2000))
    assert [m.uid for m in store.messages(ADA)] == [1]
    store.close()
