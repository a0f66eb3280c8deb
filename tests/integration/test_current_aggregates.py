"""The current-aggregates cache (domain.current, ADR 0011): skips reloading while this process
is the only writer, and never decides on a stale aggregate when another writer appended."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.eventlog.store import open_log, sqlite_env
from adapters.payloads.memory import InMemoryPayloadStore
from domain.errors import InvalidCommand, MailboxNotFound
from domain.service import Mailstore
from tests.factories import make_mail


def _store(path: Path) -> Mailstore:
    log = open_log(sqlite_env(str(path), "normal"))
    return Mailstore(log, InMemoryPayloadStore(), log_head=log.head)


@pytest.fixture
def two_writers(tmp_path: Path) -> tuple[Mailstore, Mailstore]:
    path = tmp_path / "events.sqlite"
    return _store(path), _store(path)


def test_a_single_writer_reuses_what_it_saved(tmp_path: Path) -> None:
    mail = _store(tmp_path / "events.sqlite")
    mail.deliver(account="ada@example.org", raw=make_mail("one"))
    hits = mail.current.hits
    for n in range(5):
        mail.deliver(account="ada@example.org", raw=make_mail(f"n{n}", message_id=None))
    # Each delivery reads the account and its INBOX: both came from the cache.
    assert mail.current.hits - hits == 10
    assert [d.uid for d in [mail.deliver(account="ada@example.org", raw=make_mail("x"))]] == [7]


def test_another_writer_invalidates_the_cache(two_writers: tuple[Mailstore, Mailstore]) -> None:
    a, b = two_writers
    a.deliver(account="ada@example.org", raw=make_mail("one"))
    a.deliver(account="ada@example.org", raw=make_mail("two"))  # a's cache is warm
    drops = a.current.drops
    assert b.deliver(account="ada@example.org", raw=make_mail("three")).uid == 3
    # a sees b's append: no stale INBOX, so no UID is handed out twice.
    assert a.deliver(account="ada@example.org", raw=make_mail("four")).uid == 4
    assert a.current.drops == drops + 1


def test_a_rename_by_another_writer_is_seen(two_writers: tuple[Mailstore, Mailstore]) -> None:
    a, b = two_writers
    a.create_mailbox("ada@example.org", "Work", create_account=True)
    a.deliver(account="ada@example.org", mailbox="Work", raw=make_mail("one"))
    b.rename_mailbox("ada@example.org", "Work", "Job")
    with pytest.raises(MailboxNotFound):
        a.deliver(account="ada@example.org", mailbox="Work", raw=make_mail("two"))
    assert a.deliver(account="ada@example.org", mailbox="Job", raw=make_mail("three")).uid == 2


def test_interleaved_writers_never_reuse_a_uid(two_writers: tuple[Mailstore, Mailstore]) -> None:
    a, b = two_writers
    uids = [(a if n % 3 else b).deliver(account="ada@example.org",
                                        raw=make_mail(f"m{n}", message_id=None)).uid
            for n in range(30)]
    assert uids == list(range(1, 31))


def test_a_failed_command_leaves_the_cached_aggregate_unchanged(tmp_path: Path) -> None:
    mail = _store(tmp_path / "events.sqlite")
    d = mail.deliver(account="ada@example.org", raw=make_mail("one"))
    mail.flag(d.message_id, ["\\Seen"])
    with pytest.raises(InvalidCommand):
        mail.flag(d.message_id, ["\\Seen", "bad flag"], "replace")
    assert mail.message(d.message_id).flags == {"\\Seen"}
    assert mail.deliver(account="ada@example.org", raw=make_mail("two")).uid == 2


def test_a_stale_decision_fails_its_save_and_is_retried(
        two_writers: tuple[Mailstore, Mailstore]) -> None:
    """b appends between a's head check and a's save: the version check rejects a's save,
    the retry reloads, and both deliveries get distinct UIDs."""
    a, b = two_writers
    a.deliver(account="ada@example.org", raw=make_mail("one"))
    original = a.current.begin
    interfered = []

    def begin_then_interfere() -> None:
        original()
        if not interfered:
            interfered.append(b.deliver(account="ada@example.org", raw=make_mail("b")).uid)

    a.current.begin = begin_then_interfere  # type: ignore[method-assign]
    mine = a.deliver(account="ada@example.org", raw=make_mail("a")).uid
    assert sorted([mine, *interfered]) == [2, 3]


def test_an_aggregate_changed_after_its_save_is_not_handed_out(tmp_path: Path) -> None:
    mail = _store(tmp_path / "events.sqlite")
    d = mail.deliver(account="ada@example.org", raw=make_mail("one"))
    saved = mail.message(d.message_id)
    mail.flag(d.message_id, ["\\Seen"])  # the cache now holds the aggregate flag() saved
    kept = mail.current._cache[d.message_id]
    assert kept.change_flags(frozenset({"\\Flagged"}))  # an event, never saved
    assert mail.message(d.message_id).flags == {"\\Seen"} != saved.flags


def test_threads_sharing_one_store_never_reuse_a_uid(tmp_path: Path) -> None:
    import threading

    mail = _store(tmp_path / "events.sqlite")
    mail.deliver(account="ada@example.org", raw=make_mail("first"))
    uids: list[int] = []
    errors: list[BaseException] = []

    def deliver(n: int) -> None:
        try:
            for i in range(15):
                d = mail.deliver(account="ada@example.org", raw=make_mail(f"t{n}-{i}"))
                uids.append(d.uid)
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=deliver, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(uids) == list(range(2, 62))


def test_what_was_absent_is_remembered_only_while_nobody_else_writes(
        two_writers: tuple[Mailstore, Mailstore]) -> None:
    """An aggregate found missing (a delivery key not yet claimed) is not looked up again
    while the log stays where this writer left it, and is found once another writer made
    it: a retry of the other writer's delivery is a duplicate here too."""
    from domain.delivery_key import delivery_key_id
    from domain.values import account_id_for

    a, b = two_writers
    a.deliver(account="ada@example.org", raw=make_mail("one"))
    key = delivery_key_id(account_id_for("ada@example.org"), "mta-7")
    assert a.uow.run(lambda: a.uow.claim_of(key)) is None
    assert a.uow.run(lambda: a.current.absent(key))  # remembered, the log unmoved
    first = b.deliver(account="ada@example.org", raw=make_mail("two"), idempotency_key="mta-7")
    again = a.deliver(account="ada@example.org", raw=make_mail("two"), idempotency_key="mta-7")
    assert again.duplicate and again.message_id == first.message_id
    assert not a.uow.run(lambda: a.current.absent(key))


def test_an_aggregate_this_writer_creates_is_no_longer_absent(tmp_path: Path) -> None:
    mail = _store(tmp_path / "events.sqlite")
    mail.deliver(account="ada@example.org", raw=make_mail("one"))
    first = mail.deliver(account="ada@example.org", raw=make_mail("two"), idempotency_key="k")
    again = mail.deliver(account="ada@example.org", raw=make_mail("two"), idempotency_key="k")
    assert again.duplicate and (again.message_id, again.uid) == (first.message_id, first.uid)
    assert mail.deliver(account="ada@example.org", raw=make_mail("three")).uid == 3
