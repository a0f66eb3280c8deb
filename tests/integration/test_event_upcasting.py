"""Events stored in an older shape are upcast as they are read, and project as new ones do.

``Message.Extracted`` is at version 2 (``reservation_id`` and ``at`` were added). A version 1
event (stored without them, and without ``class_version``) is written here as raw msgpack to
a real SQLite log, beside a version 2 one made by the domain, then the store is reopened.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent

from adapters.embedded import Letterlog
from adapters.eventlog.reader import row_pages
from adapters.eventlog.transcoder import MsgpackTranscoder, unpackb
from domain.message import ARRIVAL_FIELDS, Message
from projections.registry import ALL, DOMAIN_EVENTS
from tests.factories import make_mail

ADA = "ada@example.org"
ADDED_IN_V2 = ("reservation_id", "at")


def _no_rows(table: str, row: bytes) -> dict[bytes, bytes]:  # noqa: ARG001
    return {}


def _raw_state(log: Any, position: int) -> dict[str, Any]:
    rows = next(row_pages(log, position, position))
    state: dict[str, Any] = unpackb(rows[0][4])
    return state


@pytest.fixture
def old_and_new(tmp_path: Path) -> tuple[Path, Message.Extracted, int, int]:
    """A store where message A's extraction was stored by the domain (version 2) and message
    B's as a version 1 event (raw msgpack without the fields version 2 added). Returns the
    data directory, B's event as the domain made it, and the positions of both."""
    data = tmp_path / "data"
    with Letterlog.open(data) as store:
        a = store.deliver(account=ADA, raw=make_mail("A", message_id="<a@x>"), extract_limit=1)
        b = store.deliver(account=ADA, raw=make_mail("B", message_id="<b@x>"), extract_limit=1)
        store.extract(a.message_id)
        new_position = store.max_position()
        message = store.mail.uow.message(b.message_id)
        message.extract(store.mail.clock())
        (event,) = message.collect_events()
        stored = store.log.mapper.to_stored_event(event)
        state = unpackb(stored.state)
        for name in (*ADDED_IN_V2, "class_version"):
            del state[name]
        store.log.recorder.insert_events([StoredEvent(
            originator_id=stored.originator_id, originator_version=stored.originator_version,
            topic=stored.topic, state=MsgpackTranscoder().encode(state))])
        old_position = store.max_position()
    assert isinstance(event, Message.Extracted)
    return data, event, new_position, old_position


def test_the_old_event_is_stored_without_the_fields_version_2_added(old_and_new):
    data, _, new_position, old_position = old_and_new
    with Letterlog.open(data) as store:
        new, old = _raw_state(store.log, new_position), _raw_state(store.log, old_position)
    assert new["class_version"] == 2 and set(ADDED_IN_V2) <= new.keys()
    assert not ({"class_version", *ADDED_IN_V2} & old.keys())


def test_an_old_extraction_is_read_back_upcast_by_both_readers(old_and_new):
    data, made, _, old_position = old_and_new
    with Letterlog.open(data) as store:
        ((_, fast),) = store.events(old_position, old_position)
        (note,) = store.log.recorder.select_notifications(old_position, 1)
        library = store.log.mapper.to_domain_event(note)
    for event in (fast, library):
        assert type(event) is Message.Extracted
        assert (event.reservation_id, event.at) == (None, None)
        assert (event.count, event.remaining, event.state) == (1, 0, "expired")
        assert event.timestamp == made.timestamp
    assert fast.__dict__ == library.__dict__


def test_an_upcast_event_projects_as_a_new_one(old_and_new):
    data, made, _, old_position = old_and_new
    with Letterlog.open(data) as store:
        ((_, upcast),) = store.events(old_position, old_position)
    for projection in ALL:
        assert projection.project(upcast, old_position, _no_rows) == \
            projection.project(made, old_position, _no_rows), projection.name


def test_a_store_with_an_old_extraction_reads_and_rebuilds_as_if_it_were_new(old_and_new):
    data, made, _, _ = old_and_new
    with Letterlog.open(data) as store:
        shown = store.show(made.originator_id)
        listed = {m.message_id: m.state for m in store.messages(ADA)}
        reports = store.verify()
    assert (shown["extract_count"], shown["extractions_to_date"]) == (1, 1)
    assert shown["last_extracted_at"] == made.timestamp.isoformat()  # no `at`: its timestamp
    assert shown["state"] == "expired"
    assert listed[made.originator_id] == "expired" and set(listed.values()) == {"expired"}
    assert reports and all(r.differences == [] and r.live_digest == r.rebuilt_digest
                           for r in reports)


def test_every_versioned_event_has_an_upcaster_for_each_older_version():
    versions = {c: getattr(c, "class_version", 1) for c in DOMAIN_EVENTS}
    versioned = {c for c, v in versions.items() if v > 1}
    assert Message.Extracted in versioned
    for event_class in versioned:
        for step in range(1, versions[event_class]):
            assert callable(getattr(event_class, f"upcast_v{step}_v{step + 1}", None))


def test_delivered_and_upload_completed_carry_the_same_fields():
    def declared(cls: type) -> list[str]:
        base = fields(Message.Event)
        return [f.name for f in fields(cls) if f not in base and f.name != "originator_topic"]

    assert declared(Message.Delivered) == declared(Message.UploadCompleted) == \
        list(ARRIVAL_FIELDS)
