"""Events stored before ADR 0040 keep their defects' text in the log; they are read without it.

``Message.Delivered``, ``UploadCompleted`` and ``Moved`` are at version 2: their facts'
defects name a class and a header, never text of the message. A store is written here as
letterlog wrote it before: the events at version 1 (no ``class_version``), their defects
quoting a malformed file name, and the read models projected from them; then it is opened
with the code of now.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import domain.delivery
import domain.delivery_fields
from adapters.embedded import Letterlog
from adapters.eventlog.reader import row_pages
from adapters.eventlog.transcoder import unpackb
from domain.message import Message
from domain.rfc5322.defect_upcasting import without_text
from tests.factories import make_mail

ADA = "ada@example.org"
SECRET = "89DJ08/LLmRvYw"  # the malformed file name's text, as an old defect quoted it
OLD_DEFECTS = [
    "InvalidHeaderDefect: content-disposition: invalid parameter InvalidParameter([Phrase("
    f"[Atom([ValueTerminal('filename==?koi8-r?B?{SECRET}==?=')])])])",
    f"FirstHeaderLineIsContinuationDefect: From: {SECRET} <james@makita.skynet>",
    "StartBoundaryNotFoundDefect",
]
NEW_DEFECTS = [without_text(d) for d in OLD_DEFECTS]


_FACTS_FOR_EVENT = domain.delivery.facts_for_event


def _old_facts(facts: Any) -> dict[str, Any]:
    return {**_FACTS_FOR_EVENT(facts), "defects": list(OLD_DEFECTS)}


@pytest.fixture
def old_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Any]:
    """A store written as before version 2: message A delivered, moved to Archive and copied
    to Copies, each event at version 1 with the old defects (also in the read models)."""
    data = tmp_path / "data"
    with monkeypatch.context() as old:
        old.setattr(domain.delivery_fields, "facts_for_event", _old_facts)
        for event_class in (Message.Delivered, Message.UploadCompleted, Message.Moved):
            old.setattr(event_class, "class_version", 1)
        with Letterlog.open(data) as store:
            store.create_mailbox(ADA, "Archive", create_account=True)
            store.create_mailbox(ADA, "Copies", create_account=True)
            a = store.deliver(account=ADA, raw=make_mail("A", message_id="<a@x>"))
            store.move(a.message_id, "Archive")
            assert store.show(a.message_id)["facts"]["defects"] == OLD_DEFECTS
    return data, a.message_id


def _stored(store: Letterlog, topic_suffix: str) -> list[dict[str, Any]]:
    return [unpackb(row[4]) for rows in row_pages(store.log) for row in rows
            if row[3].endswith(topic_suffix)]


def test_the_log_keeps_the_old_text(old_store):
    data, _ = old_store
    with Letterlog.open(data) as store:
        for suffix in ("Message.Delivered", "Message.Moved"):
            (state,) = _stored(store, suffix)
            assert "class_version" not in state and state["facts"]["defects"] == OLD_DEFECTS


def test_both_readers_read_old_events_without_the_text(old_store):
    data, _ = old_store
    with Letterlog.open(data) as store:
        events = [(p, e) for p, e in store.events()
                  if isinstance(e, Message.Delivered | Message.Moved)]
        assert len(events) == 2
        for position, fast in events:
            (note,) = store.log.recorder.select_notifications(position, 1)
            library = store.log.mapper.to_domain_event(note)
            assert fast.facts["defects"] == library.facts["defects"] == NEW_DEFECTS
            assert SECRET not in repr(fast.facts)


def test_new_events_of_an_old_message_are_written_without_the_text(old_store):
    data, message_id = old_store
    with Letterlog.open(data) as store:
        store.move(message_id, "INBOX")
        copy = store.copy(message_id, "Copies")
        moved, delivered = _stored(store, "Message.Moved")[-1], _stored(
            store, "Message.Delivered")[-1]
        assert delivered["copied_from"] == message_id
        for state in (moved, delivered):
            assert state["class_version"] == 4 and state["facts"]["defects"] == NEW_DEFECTS
        assert store.show(copy.message_id)["facts"]["defects"] == NEW_DEFECTS


def test_a_rebuild_drops_the_old_text_from_the_read_models(old_store):
    """Read models projected before the upgrade still hold the text (verify says so): a
    rebuild projects the events as they are read now; live and rebuilt then agree."""
    data, message_id = old_store
    with Letterlog.open(data) as store:
        assert store.show(message_id)["facts"]["defects"] == NEW_DEFECTS  # the aggregate
        assert _in_read_models(data, SECRET)
        assert any(r.differences for r in store.verify())  # live: the old text
        store.rebuild()
        store.move(message_id, "INBOX")
        assert store.show(message_id)["facts"]["defects"] == NEW_DEFECTS
        assert all(r.differences == [] and r.live_digest == r.rebuilt_digest
                   for r in store.verify())
    assert not _in_read_models(data, SECRET)


def _in_read_models(data: Path, text: str) -> bool:
    return any(text.encode() in path.read_bytes() for path in data.glob("tables.sqlite*"))
