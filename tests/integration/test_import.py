"""Batched import: each message checked once, on its own; the batch delivered in order in
one append; a bad message is reported alone."""

from __future__ import annotations

from pathlib import Path

from adapters.embedded import Letterlog
from adapters.cli.importer import SourceMessage, run_import
from tests.conftest import make_mail

ADA = "ada@example.org"


def _items(n: int) -> list[SourceMessage]:
    items = [SourceMessage(f"m{i}", make_mail(f"subject {i}", message_id=f"<{i}@x>"),
                           ("\\Seen",) * (i % 2)) for i in range(n)]
    items[4] = SourceMessage("bad", b"\x00\x01\x02 not a message")
    items[7] = SourceMessage("bad flag", items[7].raw, ("no spaces allowed",))
    return items


def test_import_delivers_in_order_and_reports_bad_messages_alone(tmp_path: Path) -> None:
    store = Letterlog.open(tmp_path / "d", durability="normal")
    try:
        items = _items(11)
        report = run_import(store, len(items), items, ADA, "INBOX", batch=3)
        assert (report["imported"], report["rejected"]) == (9, 2)
        assert [r["message"] for r in report["rejections"]] == ["bad", "bad flag"]
        listed = store.messages(ADA, limit=20)
        assert [m.uid for m in listed] == list(range(9, 0, -1))
        expected = [f"subject {i}" for i in range(11) if i not in (4, 7)]
        assert [m.subject for m in reversed(listed)] == expected
        seen = [m.uid for m in reversed(listed) if "\\Seen" in m.flags]
        assert seen == [uid for uid, i in enumerate((i for i in range(11) if i not in (4, 7)),
                                                    start=1) if i % 2]
        assert all(r.identical for r in store.verify())
    finally:
        store.close()
