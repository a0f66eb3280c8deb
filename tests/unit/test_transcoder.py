"""The msgpack transcoder round-trips every type events use."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.eventlog.transcoder import MsgpackTranscoder

T = MsgpackTranscoder()
aware = st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1),
                     timezones=st.just(UTC))
leaves = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.text(),
                   st.binary(), st.uuids(), aware, st.floats(allow_nan=False))
values = st.recursive(leaves, lambda c: st.one_of(st.lists(c, max_size=5),
                                                  st.dictionaries(st.text(), c, max_size=5)),
                      max_leaves=30)


@given(values)
def test_round_trip(value):
    assert T.decode(T.encode(value)) == value


def test_sets_uuids_decimals_and_datetimes_keep_their_types():
    v = {"s": {1, 2}, "f": frozenset({"a"}), "u": UUID(int=7), "d": Decimal("1.50"),
         "t": datetime(2026, 1, 1, tzinfo=UTC)}
    back = T.decode(T.encode(v))
    assert back == v
    assert type(back["f"]) is frozenset and type(back["s"]) is set


def test_other_timezones_come_back_as_the_same_instant_in_utc():
    t = datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=2)))
    back = T.decode(T.encode(t))
    assert back == t and back.tzinfo == UTC


def test_naive_datetimes_and_unknown_types_are_refused():
    with pytest.raises(TypeError, match="naive"):
        T.encode(datetime(2026, 1, 1))
    with pytest.raises(TypeError, match="object"):
        T.encode(object())


def _reference_default(obj):
    """The extension types as the module docstring specifies them, built the checked way."""
    import msgpack

    if isinstance(obj, UUID):
        return msgpack.ExtType(1, obj.bytes)
    if isinstance(obj, datetime):
        micros = (obj - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
        return msgpack.ExtType(2, micros.to_bytes(8, "big", signed=True))
    raise TypeError(type(obj).__name__)


@given(values)
def test_uuids_and_datetimes_are_written_in_the_documented_extension_types(value):
    import msgpack

    expected = msgpack.packb(value, default=_reference_default, use_bin_type=True,
                             datetime=False)
    assert T.encode(value) == expected
