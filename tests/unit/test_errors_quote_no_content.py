"""A projector failing on an event is reported (logs, dead letters) without the value it
failed on: a ``UnicodeError``'s ``repr`` quotes the whole subject or sender."""

from __future__ import annotations

import uuid

import pytest

from adapters.tables.memory import InMemoryTableStore
from domain.errors import CorruptEvent
from domain.message import Message
from projections.registry import Projection
from projections.runner import ProjectionRunner


def test_a_failing_projector_is_reported_without_the_text_it_failed_on():
    marker = f"subject{uuid.uuid4().hex}"

    def project(event, position, read):
        return (marker.encode() + b"\xff").decode("utf-8")  # raises, holding the marker

    with pytest.raises(UnicodeDecodeError) as raised:
        project(None, 1, None)
    assert marker in repr(raised.value)  # what the report used to quote

    event = object.__new__(Message.FlagsChanged)
    object.__setattr__(event, "originator_id", uuid.uuid4())
    object.__setattr__(event, "originator_version", 2)
    runner = ProjectionRunner(InMemoryTableStore(), [Projection("fails", (), project)])
    runner.create_tables()
    with pytest.raises(CorruptEvent) as reported:
        runner.apply_events([(1, event)])
    text = str(reported.value)
    assert "projection 'fails' failed: UnicodeDecodeError" in text and "position 1" in text
    assert marker not in text
