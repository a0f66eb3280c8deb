"""Dead letters an operator can act on: show (record, error, every attempt), discard (one,
several or all; recorded with who, when and why), redrive (applied once, then closed)."""

from __future__ import annotations

import pytest

from adapters.readside.verification import verify_tables
from adapters.streaming.deadletters import (
    NoSuchDeadLetter,
    discard,
    get_dead_letter,
    list_closed,
    list_dead_letters,
    parse_id,
)
from adapters.streaming.projector import StreamProjector
from adapters.streaming.redrive import redrive
from adapters.tables.memory import InMemoryTableStore
from domain.errors import InvalidCommand
from projections.registry import ALL
from projections.runner import identity
from tests.stream_support import (
    TOPIC,
    Log,
    assert_equal_to_fold,
    failing_at,
    messages_event,
    poison,
    story,
)


@pytest.fixture
def history() -> Log:
    h = Log()
    story(h.mail)
    return h


def dead_lettered(history, projections=ALL, extra=()):
    store = InMemoryTableStore()
    projector = StreamProjector(store, [TOPIC], projections, attempts=2, sleep=lambda s: None)
    projector.create_tables()
    projector.apply(history.records() + list(extra))
    return store


def digest(store, history):
    return {r.table: r.live_digest for r in verify_tables(store, identity, history.events, ALL,
                                                          history.head)}


def test_an_id_is_topic_partition_at_offset_and_anything_else_is_named():
    assert parse_id("letterlog-events/2@41") == ("letterlog-events", 2, 41)
    with pytest.raises(InvalidCommand, match="topic/partition@offset"):
        parse_id("letterlog-events/2/41")


def test_show_gives_the_record_its_error_and_every_attempt(history):
    at = messages_event(history)
    store = dead_lettered(history, failing_at(at))
    [letter] = list_dead_letters(store)
    redrive(store, projections=failing_at(at))  # still broken: one more attempt
    shown = get_dead_letter(store, letter.id).details()
    assert shown["id"] == letter.id and "malformed event" in shown["error"]
    assert shown["event"]["position"] == at and shown["event"]["class"]
    assert bytes.fromhex(shown["value_hex"]) == letter.value
    assert [(a["by"].split(" ")[0], a["tries"]) for a in shown["attempts"]] == [
        ("worker", 2), ("redrive", 1)]
    assert shown["tries"] == 3


def test_show_of_an_undecodable_record_says_why(history):
    store = dead_lettered(history, extra=[poison(10**6)])
    [letter] = list_dead_letters(store)
    assert "not a letterlog event" in get_dead_letter(store, letter.id).details()["event"][
        "undecodable"]


def test_an_unknown_id_is_a_clear_error(history):
    store = dead_lettered(history)
    with pytest.raises(NoSuchDeadLetter, match="no dead letter 'letterlog-events/0@7'"):
        get_dead_letter(store, f"{TOPIC}/0@7")


def test_discard_is_recorded_with_who_when_and_why(history):
    store = dead_lettered(history, extra=[poison(10**6), poison(10**6 + 1)])
    first, second = list_dead_letters(store)
    discard(store, [first.id], reason="test garbage")
    assert [d.id for d in list_dead_letters(store)] == [second.id]
    [closed] = list_closed(store)
    assert closed.id == first.id and closed.value == first.value
    assert closed.closed is not None and closed.closed["outcome"] == "discarded"
    assert closed.closed["reason"] == "test garbage" and "@" in closed.closed["closed_by"]
    assert get_dead_letter(store, first.id).closed == closed.closed  # show finds it still


def test_discard_with_an_unknown_id_discards_nothing(history):
    store = dead_lettered(history, extra=[poison(10**6)])
    [letter] = list_dead_letters(store)
    with pytest.raises(NoSuchDeadLetter):
        discard(store, [letter.id, f"{TOPIC}/0@5"])
    assert list_dead_letters(store) == [letter] and list_closed(store) == []


def test_discard_all_closes_every_open_one(history):
    store = dead_lettered(history, failing_at(messages_event(history)), extra=[poison(10**6)])
    assert len(discard(store, None)) == 2
    assert list_dead_letters(store) == []
    assert {d.closed["outcome"] for d in list_closed(store)} == {"discarded"}


def test_redrive_of_a_record_that_now_succeeds_applies_it_once(history):
    # a delivery whose row is still there at the end of the story (one expunged, moved or
    # purged later, or in a mailbox deleted later, would hide a missing row)
    gone = {e.originator_id for _, e in history.events() if type(e).__qualname__ in
            ("Message.Expunged", "Message.Moved", "Message.Purged")}
    first = [p for p, e in history.events() if type(e).__qualname__ == "Message.Delivered"
             and e.originator_id not in gone][-1]
    store = dead_lettered(history, failing_at(first))
    assert digest(store, history)["messages"] != digest(dead_lettered(history), history)[
        "messages"]  # the message's row is missing
    report = redrive(store)  # the projector is fixed
    assert (report["redriven"], report["failed"]) == (1, 0)
    assert_equal_to_fold(store, history)
    [closed] = list_closed(store)
    assert closed.position == first and closed.closed["outcome"] == "redriven"
    before = digest(store, history)
    assert redrive(store) == {"redriven": 0, "failed": 0, "details": []}
    assert digest(store, history) == before
