"""Cell value decoding: the fast paths give what the standard constructors give, and bad
values fail as they would."""

from __future__ import annotations

import json
import math
import tracemalloc
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.codec import decode_json, decode_uuid, encode_json, iso


def test_decoded_uuids_equal_the_standard_constructors_and_bad_lengths_fail() -> None:
    for u in (uuid.uuid4(), uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)):
        got = decode_uuid(u.bytes)
        assert got == u and str(got) == str(u) and hash(got) == hash(u)
        assert got.is_safe == uuid.UUID(bytes=u.bytes).is_safe
    with pytest.raises(ValueError):
        decode_uuid(b"short")


def test_decoded_json_equals_json_loads_and_keeps_its_errors() -> None:
    value = {"a": [1, 2.5, None, True], "b": {"c": "ü\u2028"}, "d": ""}
    assert decode_json(encode_json(value)) == value == json.loads(encode_json(value))
    assert decode_json(b'  {"x": 1} \n') == {"x": 1}  # whitespace around: the slow path
    for bad in (b'{"x": 1} trailing', b"", b"{", b"[1,]"):
        with pytest.raises(json.JSONDecodeError):
            decode_json(bad)


def _reference(value: object) -> bytes:
    """What ``encode_json`` wrote before ADR 0035: ``json`` with the codec's own settings."""
    from projections.codec import _ENCODER

    return _ENCODER.encode(value).encode()


_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",))),
    st.datetimes(timezones=st.just(UTC)), st.uuids(),
)
_TREES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=6), inner, max_size=4),
                            st.frozensets(st.integers(0, 9), max_size=3)),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_TREES)
def test_encoded_json_is_the_bytes_json_wrote(value: object) -> None:
    # orjson writes what the reference encoder wrote: same keys order, separators, escapes,
    # date-times, UUIDs and sets, so cells written before and after ADR 0035 are comparable
    assert encode_json(value) == _reference(value)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_a_float_reads_back_as_the_same_number(value: float) -> None:
    # no projector writes floats; where one did, orjson may spell it otherwise
    # (0.00006103515625 for 6.103515625e-05), never as another number
    assert decode_json(encode_json([value])) == json.loads(_reference([value])) == [value]


def test_what_orjson_refuses_is_written_or_rejected_as_before() -> None:
    # non-string keys and integers beyond 64 bits: the reference encoder writes them
    for value in ({1: "a", 2: "b"}, {"n": 2**70}, [-(2**65)], {None: 1}):
        assert encode_json(value) == _reference(value)
    # what neither can write fails with the reference encoder's own message
    for value, message in (({"b": b"raw"}, "bytes never go into JSON"),
                           ({"o": object()}, "cannot encode object")):
        with pytest.raises(TypeError, match=message):
            encode_json(value)
    # a str subclass is written as its text, as before
    class Name(str):
        pass

    assert encode_json({"k": Name("v")}) == _reference({"k": Name("v")}) == b'{"k":"v"}'


def test_nan_is_written_as_null_and_legacy_nan_still_reads() -> None:
    assert encode_json({"score": math.nan, "max": math.inf}) == b'{"max":null,"score":null}'
    # cells written before ADR 0035 may hold json's NaN: they read as before
    got = decode_json(b'{"score":NaN,"big":123456789012345678901234567890}')
    assert math.isnan(got["score"]) and got["big"] == 123456789012345678901234567890


@given(st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5))])))
def test_iso_is_isoformat_in_utc_with_microseconds(value: datetime) -> None:
    assert iso(value) == value.astimezone(UTC).isoformat(timespec="microseconds")
    assert iso(value).endswith("+00:00") and len(iso(value)) == 32


def test_an_encoded_value_holds_no_more_memory_than_its_bytes() -> None:
    # a fold keeps millions of encoded cells: each must cost its length, not the buffer the
    # encoder wrote into (orjson's own bytes keep 4 KiB each)
    value = {"subject": "s" * 100, "size": 1234, "to": ["a@example.org"]}
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [encode_json(value) for _ in range(2000)]
        per_value = (tracemalloc.get_traced_memory()[0] - before) / len(kept)
    finally:
        tracemalloc.stop()
    assert per_value < len(kept[0]) + 200, per_value


def test_iso_of_a_whole_second_keeps_its_zero_fraction() -> None:
    # orjson leaves a zero fraction out; a Date header's time has one
    assert iso(datetime(2026, 3, 1, 12, tzinfo=UTC)) == "2026-03-01T12:00:00.000000+00:00"
    assert iso(datetime(1, 1, 1, tzinfo=UTC)) == "0001-01-01T00:00:00.000000+00:00"
