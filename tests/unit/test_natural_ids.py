"""The domain's natural keys are uuid5 of names; it builds them without ``uuid.UUID``'s
argument checks (several per delivery), so they are held to the standard library's here."""

from __future__ import annotations

import copy
import pickle
import sys
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.errors import InvalidCommand
from domain.identity import NameRefused
from domain.speedups import uuid_of_int
from domain.values import NAMESPACE, account_id_for, name_uuid, normalise_address


@given(st.text())
def test_name_uuid_is_uuid5_in_the_namespace(name: str) -> None:
    made = name_uuid(name)
    expected = uuid.uuid5(NAMESPACE, name)
    assert made == expected and hash(made) == hash(expected)
    assert made.version == 5 and made.variant == uuid.RFC_4122
    assert str(made) == str(expected) and made.bytes == expected.bytes


@given(st.integers(min_value=0, max_value=(1 << 128) - 1))
def test_uuid_of_int_is_the_uuid_of_that_int(value: int) -> None:
    made = uuid_of_int(value)
    assert made == uuid.UUID(int=value) and made.int == value
    assert pickle.loads(pickle.dumps(made)) == made and copy.deepcopy(made) == made
    assert made.is_safe is uuid.SafeUUID.unknown


def test_a_name_that_is_not_unicode_text_fails_as_uuid5_does() -> None:
    with pytest.raises(UnicodeEncodeError):
        uuid.uuid5(NAMESPACE, "\ud800")
    with pytest.raises(UnicodeEncodeError):
        name_uuid("\ud800")


def test_addresses_with_any_unicode_space_are_refused_and_others_kept() -> None:
    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    assert len(spaces) > 20  # not only ASCII blanks: NBSP, EM SPACE, LINE SEPARATOR, ...
    for space in spaces:
        with pytest.raises(InvalidCommand, match="is not an e-mail address"):
            normalise_address(f"ada{space}x@example.org")
    # characters that are not spaces pass (a sample next to the spaces, and beyond)...
    for c in ["é", "_", "-"]:
        assert normalise_address(f"ada{c}@example.org") == f"ada{c}@example.org"
    # ...but invisible ones are refused by the identity rule (ADR 0065): "ada\u200b" would
    # be read as "ada" by a person
    for c in ["\u200b", "\u180e"]:
        with pytest.raises(NameRefused, match="invisible"):
            normalise_address(f"ada{c}@example.org")


def test_account_ids_are_remembered_and_bad_addresses_refused_every_time() -> None:
    first = account_id_for("Ada@Example.org")
    assert first == uuid.uuid5(NAMESPACE, "account:ada@example.org")
    assert account_id_for("Ada@Example.org") is first  # from memory
    assert account_id_for("ada@example.org") == first
    for _ in range(2):
        with pytest.raises(InvalidCommand):
            account_id_for("not an address")
