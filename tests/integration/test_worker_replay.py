"""What a stream worker replays when a rebuild switched tables in under it (the projector's
handover, tests/unit/test_stream_catalog.py): the events of the range, read from the event
log its settings name, with their sealed personal parts opened, as the projectors need them."""

from __future__ import annotations

from adapters.bootstrap import scaleout as bootstrap
from adapters.config.settings import StreamOptions, load_settings
from adapters.embedded import Letterlog
from adapters.streaming.worker import WorkerState
from adapters.tables.memory import InMemoryTableStore
from domain.message import Message
from tests.factories import make_mail


def test_a_worker_replays_a_range_of_the_log_its_settings_name(tmp_path):
    with Letterlog.open(tmp_path) as mail:
        for i in range(3):
            mail.deliver(account="ada@example.org", raw=make_mail(f"Plan {i}",
                                                                  message_id=f"<{i}@x>"))
        head = mail.max_position()
    state = WorkerState(load_settings(data=tmp_path), StreamOptions(), bootstrap,
                        store_factory=InMemoryTableStore)
    assert state.log is None  # not opened until a gap needs it
    replayed = list(state._replay(2, head))
    assert [position for position, _ in replayed] == list(range(2, head + 1))
    delivered = [e for _, e in replayed if isinstance(e, Message.Delivered)]
    subjects = [e.personal["envelope"]["subject"] for e in delivered]
    assert subjects == ["Plan 0", "Plan 1", "Plan 2"][-len(subjects):] and subjects
