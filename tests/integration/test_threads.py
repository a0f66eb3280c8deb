"""Several threads sharing one ``Letterlog`` object: every committed command reports success,
nothing is lost or duplicated, and the read models equal a rebuild from the log."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.embedded import Letterlog
from tests.factories import in_processes, make_mail, run_threads

ADA = "ada@example.org"
THREADS = 8


# A race that shows in one run out of five needs ~14 runs to be caught with 95% certainty
# (the quick suite runs the first; the slow suite all fifteen).
@pytest.mark.parametrize("run", [pytest.param(i, marks=[pytest.mark.slow] if i else [])
                                 for i in range(15)])
def test_eight_threads_delivering_25_each_all_succeed_and_are_listed(tmp_path: Path,
                                                                      run: int) -> None:
    store = Letterlog.open(tmp_path / "data")
    uids: list[int] = []

    def deliver(worker: int) -> None:
        for i in range(25):
            d = store.deliver(account=ADA, raw=make_mail(f"t{worker}-{i}",
                                                         message_id=f"<{worker}.{i}@x>"))
            uids.append(d.uid)

    assert run_threads(deliver) == []
    assert sorted(uids) == list(range(1, THREADS * 25 + 1))
    listed = store.messages(ADA, limit=500)
    assert [m.uid for m in listed] == list(range(THREADS * 25, 0, -1))
    assert [r.table for r in store.verify() if not r.identical] == []
    store.close()


def test_eight_threads_adding_40_keywords_to_one_message_keep_all_320(tmp_path: Path) -> None:
    store = Letterlog.open(tmp_path / "data")
    d = store.deliver(account=ADA, raw=make_mail())

    def add(worker: int) -> None:
        for i in range(40):
            assert store.flag(d.message_id, [f"k{worker}x{i}"]).changed

    assert run_threads(add) == []
    assert len(store.mail.message(d.message_id).flags) == THREADS * 40
    listed = store.messages(ADA)[0]
    assert len(listed.flags) == THREADS * 40
    assert [r.table for r in store.verify() if not r.identical] == []
    store.close()


def test_threads_adding_and_removing_keywords_converge(tmp_path: Path) -> None:
    """Each thread adds its keywords and removes every other one: what is left is exactly
    the kept half, in the aggregate and in the read model."""
    store = Letterlog.open(tmp_path / "data")
    d = store.deliver(account=ADA, raw=make_mail())

    def churn(worker: int) -> None:
        for i in range(20):
            store.flag(d.message_id, [f"w{worker}k{i}"])
            if i % 2:
                store.flag(d.message_id, [f"w{worker}k{i}"], mode="remove")

    assert run_threads(churn) == []
    kept = {f"w{w}k{i}" for w in range(THREADS) for i in range(0, 20, 2)}
    assert store.mail.message(d.message_id).flags == kept
    assert set(store.messages(ADA)[0].flags) == kept
    assert [r.table for r in store.verify() if not r.identical] == []
    store.close()


def _deliver_in_threads(args: tuple[Path, int]) -> list[int]:
    data, process = args
    store = Letterlog.open(data)
    uids: list[int] = []

    def deliver(worker: int) -> None:
        for i in range(10):
            uids.append(store.deliver(account=ADA, raw=make_mail(f"p{process}t{worker}-{i}")).uid)

    errors = run_threads(deliver, 4)
    store.close()
    assert errors == []
    return uids


@pytest.mark.slow
def test_processes_with_threads_each_deliver_everything_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    Letterlog.open(data).close()
    results = in_processes(_deliver_in_threads, [(data, p) for p in range(2)])
    assert sorted(u for r in results for u in r) == list(range(1, 81))
    store = Letterlog.open(data)
    assert [m.uid for m in store.messages(ADA, limit=100)] == list(range(80, 0, -1))
    assert [r.table for r in store.verify() if not r.identical] == []
    store.close()


def test_a_committed_delivery_is_reported_even_when_projecting_it_fails(tmp_path: Path) -> None:
    """The read models fail once (as a locked table store would): the delivery still
    returns its result, and the read models catch up from the log."""
    store = Letterlog.open(tmp_path / "data")
    runner = store.projections.runner
    real = runner.apply_events
    failures = [RuntimeError("tables are locked")]

    def flaky(events, **kw):
        if failures:
            raise failures.pop()
        return real(events, **kw)

    runner.apply_events = flaky
    d = store.deliver(account=ADA, raw=make_mail())
    assert d.uid == 1 and failures == []
    assert [m.uid for m in store.messages(ADA)] == [1]
    store.close()
