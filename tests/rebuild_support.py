"""What the tests of the rebuild over several processes share (ADR 0113): a history with
every kind of change the projections fold, the tables' digests, the run directories left."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from projections.registry import ALL
from projections.tablestore import table_digest
from tests.factories import make_mail

ADA = "ada@example.org"
BOB = "bob@example.org"


def history(store: Any) -> None:
    """Every kind of change the projections fold: deliveries to two accounts, mailboxes
    made, renamed and deleted, moves, flags, labels, deletes and restores, expunges,
    subscriptions, rights granted."""
    ids = [store.deliver(account=ADA if i % 3 else BOB,
                         raw=make_mail(f"m{i}", message_id=f"<{i}@x>"),
                         labels=["work"] if i % 2 else []).message_id
           for i in range(40)]
    store.create_mailbox(ADA, "Archive")
    store.create_mailbox(ADA, "Old")
    store.create_mailbox(BOB, "Archive")
    for i in range(0, 40, 4):
        store.flag(ids[i], ["\\Seen"])
    for i in range(1, 40, 6):
        store.move(ids[i], "Archive")
    store.label(ids[5], add=["home"], remove=["work"])
    store.delete(ids[7])
    store.restore(ids[7])
    store.delete(ids[8])
    store.expunge([ids[10], ids[11]])
    store.subscribe(ADA, "Archive")
    store.acl_set(ADA, "Archive", BOB, "lr")
    store.rename_mailbox(ADA, "Old", "Older")
    store.delete_mailbox(ADA, "Older")
    # the second half of the log changes the first's messages
    for i, j in zip(range(12, 40, 5), (0, 2, 3, 14, 20, 22), strict=True):
        store.flag(ids[i], ["\\Flagged"])
        store.move(ids[j], "Archive")


TABLES = sorted({t.name for p in ALL for t in p.tables})


def digests(store: Any) -> dict[str, object]:
    host = store.read_side()
    return {table: table_digest(host.tables, host.physical(table)) for table in TABLES}


def run_dirs(store: Any) -> list[Path]:
    return sorted(Path(store.settings.data).glob(".rebuild-runs-*"))
