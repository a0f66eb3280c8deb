"""A delivery with an idempotency key stores the message once per account: a retry, from
this process, another process or after a restart, answers with the first result."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.embedded import Letterlog
from domain.errors import IdempotencyKeyReused, InvalidCommand
from tests.factories import in_processes, make_mail, run_threads

ADA = "ada@example.org"


def test_a_retried_delivery_stores_nothing_and_answers_with_the_first_result(
        tmp_path: Path) -> None:
    store = Letterlog.open(tmp_path / "data")
    first = store.deliver(account=ADA, raw=make_mail("one"), idempotency_key="q-1")
    store.flag(first.message_id, ["\\Seen"])  # the log moves on; the answer does not
    head = store.max_position()
    again = store.deliver(account=ADA, raw=make_mail("one"), idempotency_key="q-1")
    assert store.max_position() == head  # nothing appended
    assert (again.message_id, again.uid, again.modseq) == (first.message_id, first.uid,
                                                          first.modseq)
    assert again.duplicate and not first.duplicate and again.position == head > first.position
    assert [m.uid for m in store.messages(ADA)] == [1]
    store.close()


def test_the_key_is_per_account_and_other_keys_deliver(tmp_path: Path) -> None:
    store = Letterlog.open(tmp_path / "data")
    a = store.deliver(account=ADA, raw=make_mail(), idempotency_key="k")
    b = store.deliver(account="bob@example.org", raw=make_mail(), idempotency_key="k")
    c = store.deliver(account=ADA, raw=make_mail(), idempotency_key="k2")
    assert len({a.message_id, b.message_id, c.message_id}) == 3
    assert not (a.duplicate or b.duplicate or c.duplicate)
    store.close()


def test_a_batch_delivers_each_key_once(tmp_path: Path) -> None:
    store = Letterlog.open(tmp_path / "data")
    store.deliver(account=ADA, raw=make_mail("old"), idempotency_key="old")
    out = store.deliver_many([
        {"account": ADA, "raw": make_mail("a"), "idempotency_key": "a"},
        {"account": ADA, "raw": make_mail("old"), "idempotency_key": "old"},
        {"account": ADA, "raw": make_mail("a"), "idempotency_key": "a"},
        {"account": ADA, "raw": make_mail("b")},
    ])
    assert [d.duplicate for d in out] == [False, True, True, False]
    assert out[2].message_id == out[0].message_id and out[1].uid == 1
    assert sorted(m.uid for m in store.messages(ADA)) == [1, 2, 3]
    store.close()


def test_the_first_result_survives_a_restart_and_a_move(tmp_path: Path) -> None:
    store = Letterlog.open(tmp_path / "data")
    store.create_mailbox(ADA, "Archive", create_account=True)
    first = store.deliver(account=ADA, raw=make_mail(), idempotency_key="mta-42")
    store.move(first.message_id, "Archive")
    store.close()
    store = Letterlog.open(tmp_path / "data")
    again = store.deliver(account=ADA, raw=make_mail(), idempotency_key="mta-42")
    assert (again.message_id, again.mailbox_id, again.uid) == (
        first.message_id, first.mailbox_id, first.uid)
    assert store.messages(ADA) == []  # still only the one message, in Archive
    store.close()


def test_a_bad_key_is_refused_naming_the_field(tmp_path: Path) -> None:
    store = Letterlog.open(tmp_path / "data")
    for bad in ("", "line\nbreak", "x" * 513):
        with pytest.raises(InvalidCommand, match="idempotency_key"):
            store.deliver(account=ADA, raw=make_mail(), idempotency_key=bad)
    store.close()


def test_threads_racing_with_one_key_store_one_message(tmp_path: Path) -> None:
    store = Letterlog.open(tmp_path / "data")
    results = []

    def deliver(_: int) -> None:
        results.append(store.deliver(account=ADA, raw=make_mail(), idempotency_key="race"))

    assert run_threads(deliver) == []
    assert len({(d.message_id, d.uid) for d in results}) == 1 and len(results) == 8
    assert [m.uid for m in store.messages(ADA)] == [1]
    store.close()


def _deliver_keyed(args: tuple[Path, int]) -> list[tuple[str, int]]:
    data, worker = args
    store = Letterlog.open(data)
    out = [(str(d.message_id), d.uid) for d in (
        store.deliver(account=ADA, raw=make_mail(f"m{i}"), idempotency_key=f"key-{i}")
        for i in range(10))]
    store.close()
    return out


@pytest.mark.slow
def test_processes_delivering_the_same_keys_store_each_message_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    Letterlog.open(data).close()
    results = in_processes(_deliver_keyed, [(data, w) for w in range(3)])
    assert results[0] == results[1] == results[2]
    store = Letterlog.open(data)
    assert sorted(m.uid for m in store.messages(ADA, limit=50)) == list(range(1, 11))
    assert [r.table for r in store.verify() if not r.identical] == []
    store.close()


def test_a_key_reused_for_other_bytes_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    store = Letterlog.open(tmp_path / "data")
    store.deliver(account=ADA, raw=make_mail("one"), idempotency_key="q-1")
    head = store.max_position()
    with pytest.raises(IdempotencyKeyReused, match="idempotency_key: 'q-1'"):
        store.deliver(account=ADA, raw=make_mail("two"), idempotency_key="q-1")
    with pytest.raises(IdempotencyKeyReused):  # within one batch too
        store.deliver_many([{"account": ADA, "raw": make_mail("three"), "idempotency_key": "b"},
                            {"account": ADA, "raw": make_mail("four"), "idempotency_key": "b"}])
    assert store.max_position() == head
    assert [m.subject for m in store.messages(ADA)] == ["one"]
    store.close()
