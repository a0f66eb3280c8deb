"""Every speed trick of ``domain.speedups`` is held to the plain code beside it: the same
value, hash, text, bytes, fields, and it survives pickling and copying like the plain one."""

from __future__ import annotations

import copy
import pickle
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain import speedups

INPUTS = {
    speedups.uuid_of_int: st.integers(min_value=0, max_value=(1 << 128) - 1),
    speedups.uuid_of_bytes: st.binary(min_size=16, max_size=16),
    speedups.uuid_of_hex: st.integers(min_value=0, max_value=(1 << 128) - 1).map(
        lambda v: f"{v:032x}"),
}


def test_every_trick_has_a_plain_version_and_inputs() -> None:
    assert set(speedups.PLAIN) == set(INPUTS)


@pytest.mark.parametrize("trick", list(INPUTS), ids=lambda f: f.__name__)
def test_a_trick_builds_what_its_plain_version_builds(trick) -> None:
    plain = speedups.PLAIN[trick]

    @given(INPUTS[trick])
    def same(argument) -> None:
        made, expected = trick(argument), plain(argument)
        assert type(made) is type(expected) is uuid.UUID
        assert made == expected and hash(made) == hash(expected)
        assert str(made) == str(expected) and made.bytes == expected.bytes
        assert made.fields == expected.fields and made.version == expected.version
        assert made.is_safe is expected.is_safe
        assert pickle.loads(pickle.dumps(made)) == expected
        assert copy.deepcopy(made) == expected and copy.copy(made) == expected
        with pytest.raises(TypeError):  # immutable like the plain one
            made.int = 0  # type: ignore[misc]

    same()
