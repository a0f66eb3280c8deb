"""Saved views honour erasure: a purge or an erasure removes the message from every view (its
rows and everything they held), the view stays readable and consistent with itself; views
can be listed and dropped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from adapters.embedded import Letterlog
from domain.errors import NotFound
from tests.erasure_support import (
    ACCOUNT,
    files_holding,
    files_holding_any_form,
    marked_mail,
)

OTHER = "keep@example.org"


@pytest.fixture
def data(tmp_path):
    return tmp_path / "data"


def subjects(store: Letterlog, view: str, account: str = ACCOUNT,
             mailbox: str = "INBOX") -> list[str]:
    return [m.subject or "" for m in store.reading(view=view).messages(account, mailbox)]


def listed_totals(store: Letterlog, view: str, account: str) -> dict[str, int]:
    """What the view's listings add up to, per mailbox (messages): its counters must agree."""
    past = store.reading(view=view)
    return {name: len(past.messages(account, name)) for name in ("INBOX", "Archive")}


def test_erasing_an_account_removes_its_messages_from_a_saved_view(data):
    with Letterlog.open(data) as store:
        raw, markers = marked_mail("v", attachment=True)
        erased = store.deliver(account=ACCOUNT, raw=raw, labels=["work"])
        kept = store.deliver(account=OTHER, raw=marked_mail("k", attachment=False)[0])
        store.build_view("snap", None, store.max_position())
        assert len(subjects(store, "snap")) == 1
        assert any(n.startswith("tables.sqlite") for n in files_holding(data, markers))
        result = store.erase_account(ACCOUNT)
        assert result["purged"] == [str(erased.message_id)]
        assert files_holding_any_form(data, markers) == {}
        assert subjects(store, "snap") == []  # the view still opens, without the message
        counters = store.reading(view="snap").counters(ACCOUNT)
        assert counters["mailboxes"]["INBOX"]["messages"] == 0
        assert counters["labels"]["work"]["messages"] == 0
        assert store.reading(view="snap").label_messages(ACCOUNT, "work") == []
        assert len(subjects(store, "snap", OTHER)) == 1  # someone else's mail stays
        [view] = store.views()
        assert view.erased_to == result["position"]  # every purge in the log applied to it
        assert store.extract(kept.message_id)
    assert files_holding_any_form(data, markers) == {}


def test_a_view_loses_the_rows_the_message_had_at_its_position_not_now(data):
    """Moved and relabelled after the view was saved: the erasure's own event names the new
    place; the view's rows are where the message was at the view's position."""
    with Letterlog.open(data) as store:
        raw, markers = marked_mail("m", attachment=False)
        moved = store.deliver(account=ACCOUNT, raw=raw, labels=["old"])
        stays = store.deliver(account=ACCOUNT, raw=marked_mail("s", attachment=False)[0])
        store.flag(stays.message_id, ["\\Seen"])
        store.build_view("before", None, store.max_position())
        store.create_mailbox(ACCOUNT, "Archive")
        store.move(moved.message_id, "Archive")
        store.label(moved.message_id, add=["new"], remove=["old"])
        store.erase_message(moved.message_id)
        assert files_holding_any_form(data, markers) == {}
        past = store.reading(view="before")
        assert [m.message_id for m in past.messages(ACCOUNT, "INBOX")] == [
            stays.message_id]
        assert past.label_messages(ACCOUNT, "old") == []
        inbox = past.counters(ACCOUNT)["mailboxes"]["INBOX"]
        assert (inbox["messages"], inbox["unread"]) == (1, 0)  # what the listing shows


def test_a_purge_run_removes_the_purged_messages_from_every_view(data):
    with Letterlog.open(data) as store:
        raw, markers = marked_mail("p", attachment=True)
        gone = store.deliver(account=ACCOUNT, raw=raw)
        store.deliver(account=ACCOUNT, raw=marked_mail("q", attachment=False)[0])
        store.build_view("first", None, store.max_position())
        store.delete(gone.message_id)
        store.build_view("second", None, store.max_position())  # deleted: no listing row
        assert len(subjects(store, "first")) == 2 and len(subjects(store, "second")) == 1
        report = store.purge(datetime.now(UTC) + timedelta(days=31)).as_dict()
        assert report["purged"] == 1
        assert files_holding_any_form(data, markers) == {}
        assert len(subjects(store, "first")) == 1 and len(subjects(store, "second")) == 1
        assert store.reading(view="first").counters(ACCOUNT)["mailboxes"]["INBOX"][
            "messages"] == 1


def test_a_view_built_after_an_erasure_as_at_a_position_before_it_has_none_of_it(data):
    with Letterlog.open(data) as store:
        raw, markers = marked_mail("b", attachment=False)
        erased = store.deliver(account=ACCOUNT, raw=raw)
        store.deliver(account=ACCOUNT, raw=marked_mail("c", attachment=False)[0])
        then = store.max_position()
        store.erase_message(erased.message_id)
        store.build_view("then", None, then)
        assert [m.message_id for m in store.reading(view="then").messages(ACCOUNT, "INBOX")
                if m.message_id == erased.message_id] == []
        assert store.reading(view="then").counters(ACCOUNT)["mailboxes"]["INBOX"][
            "messages"] == 1
        assert files_holding_any_form(data, markers) == {}


def test_erasing_from_views_twice_changes_nothing(data):
    """Applying the same purges again (a crash before ``v:erased`` moved on) must not count a
    message out of the counters twice."""
    with Letterlog.open(data) as store:
        for i in range(3):
            store.deliver(account=ACCOUNT, raw=marked_mail(f"t{i}", attachment=False)[0])
        first = store.deliver(account=ACCOUNT, raw=marked_mail("x", attachment=False)[0])
        store.build_view("snap", None, store.max_position())
        store.erase_message(first.message_id)
        before = store.reading(view="snap").counters(ACCOUNT)
        assert before["mailboxes"]["INBOX"]["messages"] == 3
        tables = store.projections.tables
        from projections import names as n
        from projections.tablestore import Put
        tables.apply([Put(n.VIEWS, b"snap", n.V_ERASED, b"1", 2**60)])  # forget it was done
        assert store.erase_from_views()["views"] == ["snap"]  # applied again ...
        assert store.reading(view="snap").counters(ACCOUNT) == before  # ... to no effect


def test_views_are_listed_with_their_tables_and_size_and_dropped(data):
    with Letterlog.open(data) as store:
        store.deliver(account=ACCOUNT, raw=marked_mail("l", attachment=False)[0])
        assert store.views() == []
        store.build_view("a", None, 1)
        store.build_view("b", ["counters"], store.max_position())
        listed = {v.name: v for v in store.views()}
        assert sorted(listed) == ["a", "b"]
        assert listed["a"].position == 1 and listed["b"].projections == ("counters",)
        assert listed["b"].tables == ("counters__v_b", "tracking__v_b")
        assert listed["a"].bytes and listed["a"].bytes > listed["b"].bytes > 0
        from adapters.readside.views import erased_view_tables
        to_compact = erased_view_tables(store.projections.tables)  # with the live ones (HBase)
        assert {"messages__v_a", "counters__v_a", "payload_refs__v_a", "counters__v_b"} <= set(
            to_compact) and "mailboxes__v_a" not in to_compact and len(to_compact) == 7
        before = store.projections.tables.list_tables()
        with pytest.raises(NotFound, match="no view named 'nope'"):
            store.drop_view("nope")
        assert store.projections.tables.list_tables() == before  # nothing dropped
        dropped = store.drop_view("a")
        assert dropped.name == "a" and "messages__v_a" in dropped.tables
        assert [v.name for v in store.views()] == ["b"]
        assert not any(t.endswith("__v_a") for t in store.projections.tables.list_tables())
        with pytest.raises(NotFound, match="no view named 'a'"):
            store.reading(view="a")
        store.build_view("a", None, 2)  # the name can be used again
        assert {v.name: v.position for v in store.views()} == {"a": 2, "b": listed["b"].position}


def test_dropping_a_view_leaves_no_byte_of_what_only_it_held(data):
    """A view is the only copy of a message expunged since: dropping it must not leave
    the rows in the file's free pages or its WAL."""
    with Letterlog.open(data) as store:
        raw, markers = marked_mail("d", attachment=False)
        d = store.deliver(account=ACCOUNT, raw=raw)
        store.build_view("old", None, store.max_position())
        store.expunge([d.message_id])  # the live row goes; the view keeps its copy
        markers = markers[:2]  # subject and sender: the read models' copy (the body is not)
        assert any(n.startswith("tables.sqlite") for n in files_holding(data, markers))
        store.projections.tables.checkpoint("TRUNCATE")
        assert any(n.startswith("tables.sqlite") for n in files_holding(data, markers))
        store.drop_view("old")
        assert not any(n.startswith("tables.sqlite") for n in files_holding(data, markers))
