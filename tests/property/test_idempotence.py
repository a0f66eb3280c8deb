"""Replay equals live (the idempotence rule, ADR 0006): random histories, applied once,
applied again with duplicates and with the accounts' events interleaved differently, and
folded in a rebuild, all leave every table with the same digest."""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.tables.memory import InMemoryTableStore
from adapters.tables.sqlite import SqliteTableStore
from projections.registry import TABLE_SPECS
from projections.runner import ProjectionRunner
from projections.tablestore import TableDigest, table_digest
from tests.history import History

ACCOUNTS = ("ada@example.org", "bob@example.org", "cy@example.org")
NAMES = ("INBOX", "Archive", "Lists", "Lists/old")
FLAGS = ("\\Seen", "\\Flagged", "$Forwarded")
LABELS = ("work", "home", "later")


DELIVER = st.tuples(
    st.just("deliver"), st.integers(0, 2), st.integers(0, 3),
    st.lists(st.sampled_from(FLAGS), max_size=2), st.lists(st.sampled_from(LABELS), max_size=2),
    st.integers(1, 30_000), st.integers(0, 3),
)
COMMAND = st.one_of(
    DELIVER,
    st.tuples(st.just("flag"), st.integers(0, 99), st.lists(st.sampled_from(FLAGS), max_size=2),
              st.sampled_from(["add", "remove", "replace"])),
    st.tuples(st.just("label"), st.integers(0, 99), st.lists(st.sampled_from(LABELS), max_size=2),
              st.lists(st.sampled_from(LABELS), max_size=2)),
    st.tuples(st.just("move"), st.integers(0, 99), st.integers(0, 3)),
    st.tuples(st.just("copy"), st.integers(0, 99), st.integers(0, 3)),
    st.tuples(st.just("delete"), st.integers(0, 99)),
    st.tuples(st.just("restore"), st.integers(0, 99)),
    st.tuples(st.just("expunge"), st.integers(0, 99)),
    st.tuples(st.just("extract"), st.integers(0, 99)),
    st.tuples(st.just("policy"), st.integers(0, 99), st.integers(0, 3)),
    st.tuples(st.just("mailbox"), st.integers(0, 2), st.integers(1, 3),
              st.sampled_from(["create", "rename", "delete", "subscribe", "unsubscribe"])),
    st.tuples(st.just("upload"), st.integers(0, 2), st.integers(0, 99)),
    st.tuples(st.just("tick"), st.integers(1, 3000)),
)


def run(commands: list[tuple[Any, ...]]) -> History:
    """Play commands on a ``History``, skipping those its current state does not allow."""
    h = History()
    for address in ACCOUNTS[:2]:
        h.account(address)
    for cmd in commands:
        op, args = cmd[0], cmd[1:]
        msgs = sorted(h.messages, key=lambda m: m.int)
        pick = h.messages[msgs[args[0] % len(msgs)]] if msgs and op not in (
            "deliver", "mailbox", "upload", "tick") else None
        listed = pick is not None and pick.state in ("active", "expired")
        if op == "deliver":
            acc, box, flags, labels, size, policy = args
            address = ACCOUNTS[acc]
            name = NAMES[box]
            if name not in h.account(address).mailboxes:
                name = "INBOX"
            pol = [None, {"kind": "count", "limit": 1, "until": None},
                   {"kind": "until", "limit": None, "until": h.now + timedelta(hours=2)},
                   None][policy]
            h.deliver(address, name, flags=flags, labels=labels, size=size,
                      inline=size <= 10_240, policy=pol)
        elif op == "flag" and listed:
            assert pick is not None
            h.flag(pick.id, args[1], args[2])
        elif op == "label" and listed:
            assert pick is not None
            h.label(pick.id, add=args[1], remove=args[2])
        elif op in ("move", "copy") and listed:
            assert pick is not None
            boxes = _account_boxes(h, pick.account)
            name = NAMES[args[1]]
            if name in boxes:
                (h.move if op == "move" else h.copy)(pick.id, name)
        elif op in ("delete", "restore", "expunge", "extract") and pick is not None:
            getattr(h, op)(pick.id)
        elif op == "policy" and listed:
            assert pick is not None
            choice = args[1]
            h.set_policy(pick.id, limit=2 if choice == 1 else None,
                         until=h.now + timedelta(hours=choice - 2) if choice >= 2 else None)
        elif op == "mailbox":
            _mailbox_command(h, ACCOUNTS[args[0]], NAMES[args[1]], args[2])
        elif op == "upload":
            _upload_command(h, ACCOUNTS[args[0]], args[1])
        elif op == "tick":
            h.tick(minutes=args[0])
    return h


def _account_boxes(h: History, account_id: Any) -> dict[str, Any]:
    return next(a.mailboxes for a in h.accounts.values() if a.id == account_id)


def _mailbox_command(h: History, address: str, name: str, action: str) -> None:
    boxes = h.account(address).mailboxes
    if action == "create" and name not in boxes:
        h.create_mailbox(address, name)
    elif action == "rename" and name in boxes and name + "~" not in boxes:
        h.rename_mailbox(address, name, name + "~")
    elif action == "delete" and name in boxes:
        h.delete_mailbox(address, name)
    elif action == "subscribe":
        h.subscribe(address, name)
    elif action == "unsubscribe":
        h.unsubscribe(address, name)


def _upload_command(h: History, address: str, which: int) -> None:
    pending = [m for m in h.messages.values() if m.state == "incomplete"]
    if pending and which % 2:
        m = pending[which % len(pending)]
        if m.mailbox in h.mailboxes and not h.mailboxes[m.mailbox].deleted:
            h.append_chunk(m.id, 20_000)
            h.complete_upload(m.id)
    else:
        h.begin_upload(address)


def digests(store: InMemoryTableStore) -> dict[str, TableDigest]:
    return {spec.name: table_digest(store, spec.name) for spec in TABLE_SPECS}


def fresh() -> tuple[InMemoryTableStore, ProjectionRunner]:
    store = InMemoryTableStore()
    runner = ProjectionRunner(store, batch_size=7)
    runner.create_tables()
    return store, runner


HISTORIES = st.lists(COMMAND, min_size=1, max_size=60).map(run)
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(h=HISTORIES, data=st.data())
def test_reapplying_and_reinterleaving_leave_every_table_unchanged(h: History, data: Any) -> None:
    live, runner = fresh()
    runner.apply_events(h.events)
    expected = digests(live)

    # The same events, the accounts interleaved differently (each account's order kept),
    # earlier stretches applied again, tracking forgotten before every batch.
    queues: dict[Any, list[tuple[int, Any]]] = {}
    for item in h.events:
        queues.setdefault(h.account_of(item[1]), []).append(item)
    order: list[tuple[int, Any]] = []
    while queues:
        account = data.draw(st.sampled_from(sorted(queues, key=str)))
        take = data.draw(st.integers(1, 5))
        order.extend(queues[account][:take])
        del queues[account][:take]
        if not queues[account]:
            del queues[account]
        if order and data.draw(st.booleans()):
            start = data.draw(st.integers(0, len(order) - 1))
            order.extend(order[start : start + data.draw(st.integers(1, 8))])
    store, again = fresh()
    size = data.draw(st.integers(1, 20))
    for i in range(0, len(order), size):
        again.rewind(0)
        again.apply_events(order[i : i + size])
    assert digests(store) == expected

    # Everything once more, on top of the live tables.
    runner.rewind(0)
    runner.apply_events(h.events)
    assert digests(live) == expected


@SETTINGS
@given(h=HISTORIES, cap=st.integers(1, 200))
def test_a_fold_rebuild_has_the_digests_of_the_live_tables(h: History, cap: int) -> None:
    live, runner = fresh()
    runner.apply_events(h.events)
    rebuilt = InMemoryTableStore()
    folder = ProjectionRunner(rebuilt, fold_max_cells=cap)  # small caps: several flushes
    folder.create_tables()
    folder.apply_events(h.events, fold=True)
    assert digests(rebuilt) == digests(live)


@settings(SETTINGS, max_examples=30)
@given(h=HISTORIES, cap=st.integers(1, 300))
def test_a_fold_loaded_into_fresh_sqlite_tables_has_the_digests_of_the_live_tables(
    h: History, cap: int
) -> None:
    live, runner = fresh()
    runner.apply_events(h.events)
    with tempfile.TemporaryDirectory() as tmp, SqliteTableStore(Path(tmp) / "t") as rebuilt:
        folder = ProjectionRunner(rebuilt, fold_max_cells=cap, physical=lambda t: t + "__g1")
        folder.create_tables()  # small caps: the first flush loads, the later ones merge
        folder.apply_events(h.events, fold=True)
        assert {spec.name: table_digest(rebuilt, spec.name + "__g1")
                for spec in TABLE_SPECS} == digests(live)


# -- the same properties on events from the real command side -----------------------------


def mailstore_events(commands: list[tuple[Any, ...]]) -> list[tuple[int, Any]]:
    """Play commands on a real ``Mailstore`` (in-memory event store); refused ones are
    skipped (the domain raises a named error and writes nothing)."""
    from adapters.eventlog.store import MailLog
    from adapters.payloads.memory import InMemoryPayloadStore
    from domain.errors import LetterlogError, MailboxNotFound
    from domain.service import Mailstore
    from tests.factories import Clock, make_mail

    clock = Clock()
    mail = Mailstore(MailLog(env={"PERSISTENCE_MODULE": "eventsourcing.popo"}),
                     InMemoryPayloadStore(), clock=clock, inline_limit=400)
    delivered: list[Any] = []
    for address in ACCOUNTS[:2]:
        mail.create_mailbox(address, "Archive", create_account=True)
    for i, cmd in enumerate(commands):
        op, args = cmd[0], cmd[1:]
        target = delivered[args[0] % len(delivered)] if delivered and op not in (
            "deliver", "mailbox", "upload", "tick") else None
        try:
            if op == "deliver":
                acc, box, flags, labels, size, policy = args
                raw = make_mail(f"m{i}", message_id=f"<{i}@x>", body="x" * (size % 900),
                                in_reply_to=f"<{i - 1}@x>" if i % 3 == 0 else None)
                fields = {"account": ACCOUNTS[acc], "raw": raw, "flags": flags, "labels": labels,
                          "extract_limit": 1 if policy == 1 else None,
                          "extract_until": clock.now + timedelta(hours=2) if policy == 2 else None}
                try:
                    delivery = mail.deliver(mailbox=NAMES[box], **fields)
                except MailboxNotFound:
                    delivery = mail.deliver(mailbox="INBOX", **fields)
                delivered.append(delivery.message_id)
            elif target is None:
                if op == "mailbox":
                    address, name, action = ACCOUNTS[args[0]], NAMES[args[1]], args[2]
                    if action == "create":
                        mail.create_mailbox(address, name, create_account=True)
                    elif action == "rename":
                        mail.rename_mailbox(address, name, name + "~")
                    elif action == "delete":
                        mail.delete_mailbox(address, name)
                    else:
                        getattr(mail, action)(address, name)
                elif op == "tick":
                    clock.advance(minutes=args[0])
            elif op == "flag":
                mail.flag(target, args[1], args[2])
            elif op == "label":
                mail.label(target, add=args[1], remove=args[2])
            elif op == "move":
                mail.move(target, NAMES[args[1]])
            elif op == "copy":
                delivered.append(mail.copy(target, NAMES[args[1]]).message_id)
            elif op in ("delete", "restore"):
                getattr(mail, op)(target)
            elif op == "expunge":
                mail.expunge([target])
            elif op == "extract":
                b"".join(mail.extract(target))
            elif op == "policy":
                mail.set_policy(target, extract_limit=2 if args[1] == 1 else None,
                                extract_until=clock.now + timedelta(hours=args[1] - 2)
                                if args[1] >= 2 else None)
        except LetterlogError:
            pass
    app = mail.app
    return [(item.id, app.mapper.to_domain_event(item))
            for item in app.recorder.select_notifications(start=1, limit=1_000_000)]


def account_of(event: Any, known: dict[Any, Any]) -> Any:
    account = getattr(event, "account_id", None)
    if account is None:  # Account events name it by their id; chunks by their message
        account = known.get(event.originator_id, event.originator_id)
    known[event.originator_id] = account
    return account


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(commands=st.lists(st.one_of(DELIVER, COMMAND), min_size=1, max_size=40),
       data=st.data())
def test_real_histories_replay_reinterleaved_and_folded_to_the_live_tables(
    commands: list[tuple[Any, ...]], data: Any
) -> None:
    events = mailstore_events(commands)
    live, runner = fresh()
    runner.apply_events(events)
    expected = digests(live)

    known: dict[Any, Any] = {}
    queues: dict[Any, list[tuple[int, Any]]] = {}
    for item in events:
        queues.setdefault(account_of(item[1], known), []).append(item)
    order: list[tuple[int, Any]] = []
    while queues:
        account = data.draw(st.sampled_from(sorted(queues, key=str)))
        take = data.draw(st.integers(1, 6))
        order.extend(queues[account][:take])
        del queues[account][:take]
        if not queues[account]:
            del queues[account]
        if data.draw(st.booleans()):
            start = data.draw(st.integers(0, len(order) - 1))
            order.extend(order[start : start + data.draw(st.integers(1, 8))])
    store, again = fresh()
    for i in range(0, len(order), 5):
        again.rewind(0)
        again.apply_events(order[i : i + 5])
    assert digests(store) == expected

    runner.rewind(0)  # and everything once more on top of the live tables
    runner.apply_events(events)
    assert digests(live) == expected

    rebuilt = InMemoryTableStore()
    folder = ProjectionRunner(rebuilt, fold_max_cells=data.draw(st.integers(1, 100)))
    folder.create_tables()
    folder.apply_events(events, fold=True)
    assert digests(rebuilt) == expected
