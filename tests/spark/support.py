"""Spark test helpers: a store filled with mail across accounts (and a mailbox hierarchy), and
the skip (or failure under CI) when pyspark is missing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.services.servers import in_ci


def _need_pyspark() -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        if in_ci():
            pytest.fail(f"pyspark is not installed: {e}", pytrace=False)
        pytest.skip(f"pyspark is not installed: {e}")


def make_store(data: Path, messages: int = 30, *, hierarchy: bool = False,
               **settings: Any) -> None:
    """A data directory whose log holds every kind of command (``fill``)."""
    from adapters.embedded import Letterlog

    with Letterlog.open(data, **settings) as store:
        fill(store, messages, hierarchy=hierarchy)


def fill(store: Any, messages: int = 30, *, hierarchy: bool = False,
         accounts: list[str] | None = None) -> None:
    """Every kind of command on a few accounts (delivered, flagged, labelled, moved,
    copied, deleted, restored, expunged, erased, purged), through the embedded API;
    ``hierarchy``: mailbox trees renamed and deleted too (``_hierarchy``)."""
    from tests.factories import make_mail

    accounts = accounts or ["ada@example.org", "grace@example.org", "linus@example.org"]
    for account in accounts:
        store.create_mailbox(account, "Archive", "archive", create_account=True)
        store.subscribe(account, "Archive")
    done = []
    for i in range(messages):
        account = accounts[i % len(accounts)]
        raw = make_mail(f"Subject {i}", message_id=f"<m{i}@example.org>",
                        body=("x" * (i * 997 % 30000)) + "\r\n")
        done.append(store.deliver(account=account, raw=raw, labels=["work"] if i % 4 else []))
    for i, d in enumerate(done):
        if i % 3 == 0:
            store.flag(d.message_id, ["\\Seen"])
        if i % 5 == 0:
            store.label(d.message_id, add=["later"], remove=["work"])
        if i % 7 == 0:
            store.move(d.message_id, "Archive")
        elif i % 11 == 0:
            store.delete(d.message_id)
        elif i % 13 == 0:
            store.copy(d.message_id, "Archive")
    store.delete(done[1].message_id)
    store.restore(done[1].message_id)
    store.delete(done[2].message_id)
    store.expunge([done[2].message_id])
    if hierarchy:
        _hierarchy(store, accounts[0])
    if len(accounts) >= 3:
        _access(store, accounts[:3])
    # the lifecycle: one message erased, the expunged one purged; their keys are destroyed,
    # so a replay reads their sealed parts as shredded and must still equal the live tables
    store.erase_message(done[3].message_id)
    store.purge(datetime.now(UTC) + timedelta(days=31))


def _access(store: Any, accounts: list[str]) -> None:
    """Rights (RFC 4314) and virtual roots: entries set, widened and narrowed, a group's and
    a negative one, one deleted, one going with its deleted mailbox; roots set, one
    deleted."""
    ada, grace, linus = accounts
    store.acl_set(ada, "Archive", grace, "lr")
    store.acl_set(ada, "Archive", grace, "+wi")
    store.acl_set(ada, "Archive", "$team", "lrs")
    store.acl_set(ada, "Archive", "-" + linus, "l")
    store.acl_set(ada, "Archive", "anyone", "l")
    store.acl_set(grace, "Archive", ada, "lrswipkxtea")
    store.acl_delete(ada, "Archive", "$team")
    store.create_mailbox(linus, "Shared")
    store.acl_set(linus, "Shared", "authenticated", "lr")
    store.delete_mailbox(linus, "Shared")
    store.set_root(grace, f"{ada}/Archive")
    store.set_root(linus, linus)
    store.delete_root(linus)


def _hierarchy(store: Any, ada: str) -> None:
    from tests.factories import make_mail

    # the hierarchy: a tree renamed, its top deleted (\Noselect), a leaf deleted with its
    # messages (no counters cell left), then the \Noselect top removed
    for name in ("Projects", "Projects/a", "Projects/a/b"):
        store.create_mailbox(ada, name)
        store.deliver(account=ada, mailbox=name, raw=make_mail(f"in {name}"))
    store.rename_mailbox(ada, "Projects", "Done")
    store.delete_mailbox(ada, "Done")
    store.delete_mailbox(ada, "Done/a/b")
    store.delete_mailbox(ada, "Done/a")
    store.delete_mailbox(ada, "Done")
    store.create_mailbox(ada, "Done/c")
    store.deliver(account=ada, mailbox="Done/c", raw=make_mail("in Done/c"))
    store.create_mailbox(ada, "Done")
    store.delete_mailbox(ada, "Done")  # \Noselect, above Done/c
