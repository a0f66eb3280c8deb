"""Counters folded by position range as mergeable parts (``projections.counters``, ADR
0061): for every way of cutting a real log into ranges, the parts merged in log order give
exactly the mutations a fold of the whole history gives (``CounterFold``). No Spark here."""

from __future__ import annotations

import random
from typing import Any

import pytest

from adapters.embedded import Letterlog
from projections import names as n
from projections.counters import (
    CounterFold,
    CounterPartialFold,
    CounterRow,
    counter_mutations,
    merge_counter_parts,
)
from tests.factories import make_mail
from tests.spark.support import fill


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[int, Any]]:
    data = tmp_path_factory.mktemp("counter-parts") / "data"
    with Letterlog.open(data) as store:
        fill(store, 40, hierarchy=True)
        account = "ada@example.org"
        store.create_mailbox(account, "Doomed")
        doomed = [store.deliver(account=account, raw=make_mail(f"D {i}",
                                message_id=f"<d{i}@example.org>")) for i in range(4)]
        for d in doomed:
            store.move(d.message_id, "Doomed")
        store.flag(doomed[0].message_id, ["\\Seen"])
        store.delete(doomed[1].message_id)
        store.restore(doomed[1].message_id)
        store.delete(doomed[1].message_id)
        store.delete_mailbox(account, "Doomed")
        return list(store.events())


def _whole(events: list[tuple[int, Any]]) -> list[Any]:
    fold = CounterFold()
    for position, event in events:
        fold.project(event, position, lambda table, row: {})
    return sorted(fold.drain(), key=_key)


def _merged(events: list[tuple[int, Any]], cuts: list[int]) -> list[Any]:
    rows: dict[bytes, CounterRow] = {}
    bounds = [0, *cuts, len(events)]
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        part = CounterPartialFold()
        for position, event in events[lo:hi]:
            part.project(event, position)
        for key, found in part.parts.items():
            merge_counter_parts(rows.setdefault(key, CounterRow()), found)
    return sorted((m for key, row in rows.items()
                   for m in counter_mutations(n.COUNTERS, key, row)), key=_key)


def _key(m: Any) -> tuple[Any, ...]:
    return (type(m).__name__, m.row, m.column, m.version, getattr(m, "value", b""))


def test_the_log_holds_what_makes_a_range_depend_on_the_ranges_before(events):
    names = {type(e).__qualname__ for _, e in events}
    assert {"Message.Deleted", "Message.Restored", "Message.Expunged", "Message.Purged",
            "Mailbox.Deleted", "Message.FlagsChanged", "Message.Moved"} <= names


def test_one_range_is_the_whole_fold(events):
    assert _merged(events, []) == _whole(events)


def test_every_single_cut_merges_to_the_whole_fold(events):
    whole = _whole(events)
    for cut in range(1, len(events)):
        assert _merged(events, [cut]) == whole, f"cut at event {cut}"


def test_many_ranges_merge_to_the_whole_fold(events):
    whole = _whole(events)
    pick = random.Random(61)
    for ranges in (2, 3, 5, 8, 16, len(events) // 2, len(events)):
        for _ in range(20):
            cuts = sorted(pick.sample(range(1, len(events)), ranges - 1))
            assert _merged(events, cuts) == whole, cuts
