"""Reading the past: ``--as-of P`` folds one account's events up to P in this process."""

from __future__ import annotations

import pytest

from adapters.embedded import Letterlog
from domain.errors import InvalidCommand, NotFound
from tests.factories import make_mail

ADA = "ada@example.org"


def _snapshot(store: Letterlog) -> tuple[int, list, dict]:
    return (store.max_position(), store.messages(ADA, "INBOX"),
            store.mailbox_status(ADA, "INBOX"))


@pytest.fixture
def history(tmp_path):
    """A store and what ``list`` and ``status`` showed at three past positions."""
    store = Letterlog.open(tmp_path / "data")
    seen = []
    delivered = [store.deliver(account=ADA, raw=make_mail(f"m{i}", message_id=f"<{i}@x>"))
                 for i in range(4)]
    store.deliver(account="grace@example.org", raw=make_mail("other"))
    seen.append(_snapshot(store))
    store.flag(delivered[0].message_id, ["\\Seen"])
    store.create_mailbox(ADA, "Archive")
    store.move(delivered[1].message_id, "Archive")
    seen.append(_snapshot(store))
    store.delete(delivered[2].message_id)
    store.deliver(account=ADA, raw=make_mail("late", message_id="<late@x>"))
    seen.append(_snapshot(store))
    store.expunge([delivered[2].message_id])
    store.label(delivered[3].message_id, add=["work"])
    yield store, seen
    store.close()


def test_a_mailbox_listed_at_three_past_positions_equals_what_list_showed_then(history):
    store, seen = history
    for position, listed, status in seen:
        past = store.reading(as_of=position, account=ADA)
        assert past.messages(ADA, "INBOX") == listed
        assert past.mailbox_status(ADA, "INBOX") == status
        assert status["position"] == position
    assert [len(listed) for _, listed, _ in seen] == [4, 3, 3]


def test_status_reports_the_position_the_read_model_reflects(history):
    store, _ = history
    assert store.mailbox_status(ADA, "INBOX")["position"] == store.max_position()


def test_as_of_past_the_head_or_an_unknown_view_is_a_named_error(history):
    store, _ = history
    with pytest.raises(InvalidCommand, match="--as-of"):
        store.reading(as_of=store.max_position() + 1, account=ADA)
    with pytest.raises(NotFound, match="no view named 'nope'"):
        store.reading(view="nope")


def test_an_embedded_view_is_read_only_and_stays_at_its_position(history):
    store, seen = history
    position, listed, status = seen[1]
    built = store.build_view("then", None, position)
    assert built["position"] == position
    store.deliver(account=ADA, raw=make_mail("after the view"))
    view = store.reading(view="then")
    assert view.messages(ADA, "INBOX") == listed
    assert view.mailbox_status(ADA, "INBOX") == status
