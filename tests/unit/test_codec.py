"""Cell value decoding: the fast paths give what the standard constructors give, and bad
values fail as they would."""

from __future__ import annotations

import json
import uuid

import pytest

from projections.codec import decode_json, decode_uuid, encode_json


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
