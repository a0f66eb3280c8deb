"""Read-your-writes: every command's result carries the log position of its last event (or,
when it changed nothing, the position it decided on)."""

from __future__ import annotations

from pathlib import Path

from adapters.embedded import Letterlog
from tests.factories import make_mail

ADA = "ada@example.org"


def _position(result: object) -> int:
    return result["position"] if isinstance(result, dict) else result.position  # type: ignore


def test_every_command_reports_the_log_position_it_left(tmp_path: Path) -> None:
    store = Letterlog.open(tmp_path / "data")
    d = store.deliver(account=ADA, raw=make_mail())
    commands = [
        lambda: d,
        lambda: store.flag(d.message_id, ["\\Seen"]),
        lambda: store.flag(d.message_id, ["\\Seen"]),  # no change
        lambda: store.label(d.message_id, add=["work"]),
        lambda: store.create_mailbox(ADA, "Archive"),
        lambda: store.move(d.message_id, "Archive"),
        lambda: store.copy(d.message_id, "INBOX"),
        lambda: store.set_policy(d.message_id, extract_limit=3),
        lambda: store.subscribe(ADA, "Archive"),
        lambda: store.rename_mailbox(ADA, "Archive", "Old"),
        lambda: store.delete(d.message_id),
        lambda: store.restore(d.message_id),
        lambda: store.extract_to(d.message_id, tmp_path / "x.eml"),
        lambda: store.unsubscribe(ADA, "Old"),
        lambda: store.expunge([d.message_id]),
        lambda: store.erase_message(d.message_id),
        lambda: store.purge(),
    ]
    seen = []
    for command in commands:
        result = command()
        assert _position(result) == store.max_position(), command
        seen.append(_position(result))
    assert seen == sorted(seen) and seen[0] >= 1
    store.close()
