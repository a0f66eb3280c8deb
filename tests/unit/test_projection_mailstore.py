"""The projectors on the real command side: ``domain.service.Mailstore`` on the in-memory
event store, its notification log decoded by the application's mapper, projected by the
runner into the in-memory and the SQLite table stores."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from adapters.tables.memory import InMemoryTableStore
from adapters.tables.sqlite import SqliteTableStore
from domain.service import Mailstore
from projections import keys
from projections import names as n
from projections.codec import decode_counters, decode_names
from projections.registry import TABLE_SPECS
from projections.runner import ProjectionRunner
from projections.tablestore import table_digest
from tests.factories import make_mail

ADA = "ada@example.org"


def logged(mail: Mailstore) -> list[tuple[int, Any]]:
    app = mail.app
    return [(item.id, app.mapper.to_domain_event(item))
            for item in app.recorder.select_notifications(start=1, limit=1_000_000)]


def project(mail: Mailstore, store: Any = None, **kw: Any) -> Any:
    store = store if store is not None else InMemoryTableStore()
    runner = ProjectionRunner(store, **kw)
    runner.create_tables()
    runner.apply_events(logged(mail))
    return store


def story(mail: Mailstore) -> dict[str, UUID]:
    """A little of everything the command side can do."""
    mail.create_mailbox(ADA, "Archive", create_account=True)
    first = mail.deliver(account=ADA, raw=make_mail("Plans", message_id="<p1@x>"),
                         labels=["work"]).message_id
    reply = mail.deliver(account=ADA, raw=make_mail("Re: Plans", message_id="<p2@x>",
                                                    in_reply_to="<p1@x>",
                                                    references="<p1@x>"),
                         labels=["work"]).message_id
    other = mail.deliver(account=ADA, raw=make_mail("Other", message_id="<o1@x>"),
                         flags=["\\Seen"], extract_limit=1).message_id
    big = mail.deliver(account=ADA, raw=make_mail("Big", message_id="<b1@x>",
                                                  body="x" * 20_000)).message_id
    mail.flag(first, ["\\Seen"])
    mail.label(reply, add=["urgent"], remove=["work"])
    mail.move(reply, "Archive")
    mail.copy(big, "Archive")
    b"".join(mail.extract(other))
    mail.delete(first)
    mail.restore(first)
    mail.delete(big)
    mail.expunge([big])
    mail.subscribe(ADA, "Archive")
    return {"first": first, "reply": reply, "other": other, "big": big}


def test_real_events_project_into_every_read_model(mail: Mailstore) -> None:
    ids = story(mail)
    store = project(mail)
    account = mail.account(ADA)
    inbox, archive = account.mailbox("INBOX")[0], account.mailbox("Archive")[0]

    rows = list(store.scan(n.MESSAGES, prefix=keys.messages_prefix(inbox)))
    assert [UUID(bytes=cells[n.DATA_MESSAGE]) for _, cells in rows] == [ids["other"],
                                                                       ids["first"]]
    assert [cells[n.META_STATE] for _, cells in rows] == [b"expired", b"active"]
    moved = next(c for _, c in store.scan(n.MESSAGES, prefix=keys.messages_prefix(archive))
                 if c[n.DATA_MESSAGE] == ids["reply"].bytes)
    assert decode_names(moved[n.META_LABELS]) == ["urgent"]
    body_event = json.loads(moved[n.DATA_FIELDS])["body_event"]  # the body is stored once
    assert n.DATA_BODY not in moved
    assert dict(logged(mail))[body_event].personal["body"].startswith(b"From: ada@example.org")

    thread = mail.message(ids["first"]).thread_id
    assert mail.message(ids["reply"]).thread_id == thread
    in_thread = [keys.thread_row_message(r)
                 for r, _ in store.scan(n.THREADS, prefix=keys.thread_prefix(thread))]
    assert in_thread == [ids["reply"], ids["first"]]

    boxes, labels = decode_counters(store.get(n.COUNTERS, keys.account_row(account.id)))
    size = {k: mail.message(v).size for k, v in ids.items()}
    assert boxes[inbox] == (2, 0, size["first"] + size["other"])
    assert boxes[archive][:2] == (2, 2)  # the reply and the copy of big, both unread
    assert labels["work"] == (1, 0, size["first"]) and labels["urgent"] == (1, 1, size["reply"])

    refs = store.get(n.PAYLOAD_REFS, keys.payload_row(mail.message(ids["big"]).address))
    assert len(refs) == 2  # the original and its copy share the stored payload
    assert store.get(n.SUBSCRIPTIONS, keys.account_row(account.id)) == {
        keys.subscription_column("Archive"): b"1"}


def test_live_on_sqlite_equals_a_fold_in_memory(mail: Mailstore, tmp_path: Any) -> None:
    story(mail)
    sqlite = SqliteTableStore(tmp_path / "tables.sqlite")
    try:
        project(mail, sqlite, batch_size=3)
        folded = InMemoryTableStore()
        runner = ProjectionRunner(folded)
        runner.create_tables()
        runner.apply_events(logged(mail), fold=True)
        for spec in TABLE_SPECS:
            assert table_digest(sqlite, spec.name) == table_digest(folded, spec.name), spec.name
    finally:
        sqlite.close()
