"""Batched import: each message checked once, on its own; the batch delivered in order in
one append; a bad message is reported alone."""

from __future__ import annotations

from pathlib import Path

from adapters.cli.import_source import SourceMessage
from adapters.cli.importer import COMPACT_ABOVE, _compacted, run_import
from adapters.embedded import Letterlog
from tests.factories import make_mail

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


def _mbox(path: Path, count: int) -> Path:
    with path.open("wb") as f:
        for i in range(count):
            f.write(b"From ada@example.org Sun Mar  1 12:00:00 2026\n")
            f.write(make_mail(f"mbox {i}", message_id=f"<{i}@mbox>").replace(b"\r\n", b"\n"))
            f.write(b"\n")
    return path


def _import(store: Letterlog, messages) -> dict:
    total, items = messages
    return run_import(store, total, items, ADA, "INBOX", batch=3)


def test_importing_an_mbox_again_imports_nothing_new(tmp_path: Path) -> None:
    from adapters.cli.import_mbox import mbox_messages

    source = _mbox(tmp_path / "in.mbox", 7)
    store = Letterlog.open(tmp_path / "d", durability="normal")
    first = _import(store, mbox_messages(source))
    head = store.max_position()
    again = _import(store, mbox_messages(source))
    assert (first["imported"], again["imported"], again["already_imported"]) == (7, 0, 7)
    assert store.max_position() == head
    assert len(store.messages(ADA, limit=20)) == 7
    store.close()


def test_an_interrupted_import_resumes_where_it_stopped(tmp_path: Path) -> None:
    from adapters.cli.import_mbox import mbox_messages

    source = _mbox(tmp_path / "in.mbox", 10)
    store = Letterlog.open(tmp_path / "d", durability="normal")
    _, items = mbox_messages(source)
    partial = [next(items) for _ in range(4)]  # the import stopped after four messages
    run_import(store, 4, partial, ADA, "INBOX", batch=3)
    store.close()
    store = Letterlog.open(tmp_path / "d", durability="normal")  # a new process, later
    report = _import(store, mbox_messages(source))
    assert (report["imported"], report["already_imported"]) == (6, 4)
    subjects = [m.subject for m in reversed(store.messages(ADA, limit=20))]
    assert subjects == [f"mbox {i}" for i in range(10)]
    store.close()


def test_what_landed_out_of_order_is_not_imported_twice(tmp_path: Path) -> None:
    """Only a prefix of landed messages is looked up before parsing; one that landed after
    a gap is found claimed by its delivery (the batch's append is refused, then retried)."""
    from adapters.cli.import_mbox import mbox_messages

    source = _mbox(tmp_path / "in.mbox", 8)
    store = Letterlog.open(tmp_path / "d", durability="normal")
    _, items = mbox_messages(source)
    landed = list(items)[5:7]
    run_import(store, 2, landed, ADA, "INBOX")
    report = _import(store, mbox_messages(source))
    assert (report["imported"], report["already_imported"]) == (6, 2)
    subjects = sorted(m.subject for m in store.messages(ADA, limit=20))
    assert subjects == sorted(f"mbox {i}" for i in range(8))
    store.close()


def test_importing_a_maildir_again_imports_nothing_new(tmp_path: Path) -> None:
    import mailbox

    from adapters.cli.import_source import maildir_messages

    box = mailbox.Maildir(str(tmp_path / "md"), create=True)
    for i in range(5):
        box.add(make_mail(f"md {i}", message_id=f"<{i}@md>"))
    store = Letterlog.open(tmp_path / "d", durability="normal")
    first = _import(store, maildir_messages(tmp_path / "md"))
    again = _import(store, maildir_messages(tmp_path / "md"))
    assert (first["imported"], again["imported"], again["already_imported"]) == (5, 0, 5)
    assert len(store.messages(ADA, limit=20)) == 5
    store.close()


def test_maildir_folders_with_special_use_names_get_their_roles(tmp_path: Path) -> None:
    import mailbox

    from adapters.cli.import_source import maildir_messages

    box = mailbox.Maildir(str(tmp_path / "md"), create=True)
    box.add(make_mail("inbox", message_id="<i@md>"))
    for folder in ("Sent Items", "Trash", "Spam", "Projects", "Archive.2024"):
        box.add_folder(folder).add(make_mail(folder, message_id=f"<{folder}@md>"))
    store = Letterlog.open(tmp_path / "d", durability="normal")
    # the account's trash role is taken
    store.create_mailbox(ADA, "Old trash", "trash", create_account=True)
    assert _import(store, maildir_messages(tmp_path / "md"))["imported"] == 6
    roles = {m["name"]: m["role"] for m in store.mailbox_list(ADA)}
    assert roles == {"INBOX": "inbox", "Old trash": "trash", "Sent Items": "sent",
                     "Trash": "", "Spam": "junk", "Projects": "", "Archive/2024": ""}
    store.close()


def _large(i: int) -> bytes:
    body = (f"line {i} " * 4000).encode()  # well above the 10 KiB inline limit
    return make_mail(f"large {i}", message_id=f"<large{i}@x>") + body


class _AheadFails:
    """A store whose write-ahead of payloads fails (a full disk for a moment, say)."""

    def __init__(self, store: Letterlog) -> None:
        self.store = store
        self.calls = 0

    def __getattr__(self, name: str):
        return getattr(self.store, name)

    def store_payloads(self, items) -> None:
        self.calls += 1
        raise OSError(28, "No space left on device")


def test_large_payloads_written_ahead_are_delivered_and_read_back_byte_exact(
        tmp_path: Path) -> None:
    items = [SourceMessage(f"m{i}", _large(i) if i % 2 else make_mail(f"small {i}",
                                                                      message_id=f"<s{i}@x>"),
                           key=f"k{i}") for i in range(9)]
    with Letterlog.open(tmp_path / "d", durability="normal") as store:
        report = run_import(store, len(items), items, ADA, "INBOX", batch=2)
        assert report["imported"] == 9
        listed = {m.subject: m for m in store.messages(ADA, limit=20)}
        for i in range(1, 9, 2):
            m = listed[f"large {i}"]
            # large: stored as a payload file, under its own address (ADR 0099)
            assert store.payloads.exists(store.mail.message(m.message_id).address)
            assert b"".join(store.body(ADA, "INBOX", m.uid)) == items[i].raw
        assert all(r.identical for r in store.verify())


def test_a_failed_write_ahead_leaves_the_payloads_to_the_delivery(tmp_path: Path) -> None:
    items = [SourceMessage(f"m{i}", _large(i), key=f"k{i}") for i in range(5)]
    with Letterlog.open(tmp_path / "d", durability="normal") as store:
        failing = _AheadFails(store)
        report = run_import(failing, len(items), items, ADA, "INBOX", batch=2)
        assert failing.calls == 3  # one per batch, every one failed
        assert report["imported"] == 5
        listed = store.messages(ADA, limit=10)
        assert all(store.payloads.exists(store.mail.message(m.message_id).address)
                   for m in listed)
        assert sorted(b"".join(store.body(ADA, "INBOX", m.uid)) for m in listed) == \
            sorted(i.raw for i in items)


def test_a_payload_written_ahead_is_written_once_and_not_hashed_again_by_the_delivery(
        tmp_path: Path, monkeypatch) -> None:
    """ADR 0104: the write-ahead thread hands its written items to the delivery, which
    touches each payload at its address instead of putting (hashing, looking up) it again."""
    items = [SourceMessage(f"m{i}", _large(i) if i % 2 else make_mail(f"small {i}",
                                                                      message_id=f"<s{i}@x>"),
                           key=f"k{i}") for i in range(9)]
    with Letterlog.open(tmp_path / "d", durability="normal") as store:
        put, touch = store.payloads.put, store.payloads.touch
        written: list[bytes] = []
        touched: list[str] = []

        def counted_put(data: bytes):
            written.append(data)
            return put(data)

        def counted_touch(address: str) -> bool:
            touched.append(address)
            return touch(address)

        monkeypatch.setattr(store.payloads, "put", counted_put)
        monkeypatch.setattr(store.payloads, "touch", counted_touch)
        report = run_import(store, len(items), items, ADA, "INBOX", batch=2)
        assert report["imported"] == 9
        assert sorted(written) == sorted(items[i].raw for i in range(1, 9, 2))
        listed = {m.subject: m for m in store.messages(ADA, limit=20)}
        assert sorted(touched) == sorted(
            store.mail.message(listed[f"large {i}"].message_id).address for i in range(1, 9, 2))


def test_an_import_into_a_fresh_store_leaves_its_read_models_pages_full(
        tmp_path: Path) -> None:
    """Each batch's rows go in in key order (ADR 0111): a fresh import leaves under a
    quarter of the read models' file empty, so it is not rewritten, and every view verifies."""
    items = [SourceMessage(f"m{i}", make_mail(f"subject {i}", message_id=f"<c{i}@x>"),
                           key=f"c{i}") for i in range(400)]
    with Letterlog.open(tmp_path / "d", durability="normal") as store:
        report = run_import(store, len(items), items, ADA, "INBOX", batch=50)
        assert report["read_models_compacted"] is None
        slack = store.read_model_slack()
        assert slack is not None and slack <= COMPACT_ABOVE
        assert all(r.identical for r in store.verify())
        assert [m.subject for m in store.messages(ADA, limit=2)] == ["subject 399",
                                                                     "subject 398"]


def test_an_import_compacts_read_models_it_left_mostly_empty(tmp_path: Path) -> None:
    """Read models a delivery at a time, newest first, are about half empty: an import that
    wrote at least half of the file compacts them (ADR 0030); one that wrote less leaves
    the file alone."""
    with Letterlog.open(tmp_path / "d", durability="normal") as store:
        for i in range(300):
            store.deliver(account=ADA, raw=make_mail(f"single {i}", message_id=f"<s{i}@x>"))
        slack = store.read_model_slack()
        assert slack is not None and slack > COMPACT_ABOVE
        written = store.read_model_bytes()
        assert written is not None
        compacted = _compacted(store, before=written // 2)
        assert compacted is not None
        assert compacted["bytes_after"] < 0.8 * compacted["bytes_before"]
        assert store.read_model_bytes() == compacted["bytes_after"]
        assert (store.read_model_slack() or 1.0) < 0.15
        assert all(r.identical for r in store.verify())
        more = [SourceMessage("late", make_mail("late", message_id="<late@x>"), key="late")]
        assert run_import(store, 1, more, ADA, "INBOX")["read_models_compacted"] is None
        assert store.messages(ADA, limit=1)[0].subject == "late"
