"""Snapshots: long streams are not replayed from the start, and a snapshot taken from the
aggregate in hand (MailLog._take_snapshots) is the state a replay of the log gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eventsourcing.application import project_aggregate

from adapters.eventlog.store import open_log, sqlite_env
from adapters.payloads.memory import InMemoryPayloadStore
from domain.mailbox import Mailbox
from domain.service import Mailstore
from tests.factories import make_mail


def _state(aggregate: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(aggregate).items() if k != "_pending_events"}


def test_a_long_mailbox_stream_is_snapshotted_as_a_replay_would_build_it(tmp_path: Path) -> None:
    path = str(tmp_path / "events.sqlite")
    log = open_log(sqlite_env(path, "normal"))
    mail = Mailstore(log, InMemoryPayloadStore(), log_head=log.head)
    for n in range(230):
        mail.deliver(account="ada@example.org", raw=make_mail(f"m{n}", message_id=None))
    inbox_id = mail.account("ada@example.org").mailbox("INBOX")[0]
    assert mail.mailbox(inbox_id).version == 231  # Created, then one event per delivery

    snapshots = list(log.snapshots.get(inbox_id, desc=True))  # type: ignore[union-attr]
    assert [s.originator_version for s in snapshots] == [200]
    # The snapshot equals the state a replay of the first 200 events gives.
    replayed = project_aggregate(None, log.events.get(inbox_id, lte=200))
    from_snapshot = project_aggregate(None, snapshots)
    assert isinstance(replayed, Mailbox) and isinstance(from_snapshot, Mailbox)
    assert _state(from_snapshot) == _state(replayed)
    log.close()

    # Another process loads the mailbox from the snapshot and only the events after it.
    fresh = open_log(sqlite_env(path, "normal"))
    asked: list[Any] = []
    get = fresh.repository.event_store.get

    def recording_get(originator_id: Any, **kw: Any) -> Any:
        asked.append(kw.get("gt"))
        return get(originator_id, **kw)

    fresh.repository.event_store.get = recording_get  # type: ignore[method-assign]
    loaded = fresh.repository.get(inbox_id)
    assert asked == [200]
    assert _state(loaded) == _state(project_aggregate(None, get(inbox_id)))
    assert loaded.uidnext == 231
    fresh.close()
