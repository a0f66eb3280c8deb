"""ADR 0098: ``import mbox`` reads and checks in a second process, and makes each message's
idempotency key from the SHA-256 its check computes. The keys are those every earlier
import gave (``importer.mbox_key``, a hash of its own), byte for byte: an mbox imported by
the older path, imported again, delivers nothing."""

from __future__ import annotations

import mailbox
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import adapters.cli.mbox_ahead
import adapters.embedded
from adapters.cli.import_mbox import mbox_messages
from adapters.cli.import_source import target_key
from adapters.cli.importer import run_import
from adapters.cli.mbox_ahead import MboxAhead, Reader
from adapters.embedded import Letterlog
from adapters.payloads.files import FilePayloadStore
from tests.factories import make_mail

ADA = "ada@example.org"


@pytest.fixture(autouse=True)
def two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reading process and the follower run only with two usable cores."""
    monkeypatch.setattr(adapters.embedded, "_usable_cores", lambda: 2)
    monkeypatch.setattr(adapters.cli.mbox_ahead, "_usable_cores", lambda: 2)


def _mbox(path: Path, count: int, bad: tuple[int, ...] = ()) -> Path:
    with path.open("wb") as f:
        for i in range(count):
            f.write(b"From ada@example.org Sun Mar  1 12:00:00 2026\n")
            raw = (b"\x00\x01 not a message\n" if i in bad else
                   make_mail(f"mbox {i}", message_id=f"<{i}@mbox>").replace(b"\r\n", b"\n"))
            f.write(raw + b"\n")
    return path


def _ahead_keys(path: Path, store: Letterlog, mailbox_name: str) -> list[tuple[str, bool]]:
    source = MboxAhead(path)
    first = mbox_messages(path)[1].__next__().key.split(":")[1]  # type: ignore[union-attr]
    reader = Reader(source, store, ADA, mailbox_name, first, 0, 7)
    try:
        return [(key, checked is not None) for entries, _ in reader.batches()
                for _, key, checked, _ in entries]
    finally:
        source.close()


@pytest.mark.parametrize("mailbox_name", ["INBOX", "Archive"])
def test_every_key_is_the_one_the_older_import_gave(tmp_path: Path, corpus: Path,
                                                    mailbox_name: str) -> None:
    path = tmp_path / "corpus.mbox"
    box = mailbox.mbox(str(path))
    for eml in sorted(corpus.glob("*.eml")):
        box.add(eml.read_bytes())
    box.add(b"\x00\x01 refused by the check\n")  # its key too (a re-import looks it up)
    box.flush()
    box.close()
    older = [target_key(m.key, mailbox_name) for m in mbox_messages(path)[1]]
    with Letterlog.open(tmp_path / "d", durability="normal") as store:
        got = _ahead_keys(path, store, mailbox_name)
    assert [key for key, _ in got] == older
    assert got[-1] == (older[-1], False) and all(ok for _, ok in got[:-1])


def test_an_mbox_imported_by_the_older_path_imported_again_delivers_nothing(
        tmp_path: Path) -> None:
    path = _mbox(tmp_path / "in.mbox", 23, bad=(5,))
    with Letterlog.open(tmp_path / "d", durability="normal") as store:
        total, items = mbox_messages(path)  # the path every earlier version took
        older = run_import(store, total, items, ADA, "INBOX", batch=4)
        assert (older["imported"], older["rejected"]) == (22, 1)
        head = store.max_position()
        source = MboxAhead(path)
        again = run_import(store, source.total, source, ADA, "INBOX", batch=4)
        source.close()
        assert (again["imported"], again["already_imported"]) == (0, 22)
        assert [r["message"] for r in again["rejections"]] == [f"{path}#6"]
        assert store.max_position() == head


def test_the_pipelined_import_lands_in_order_and_the_older_path_finds_it_all(
        tmp_path: Path) -> None:
    path = _mbox(tmp_path / "in.mbox", 30, bad=(0, 11))
    with Letterlog.open(tmp_path / "d", durability="normal") as store:
        source = MboxAhead(path)
        report = run_import(store, source.total, source, ADA, "INBOX", batch=4)
        source.close()
        assert (report["imported"], report["rejected"]) == (28, 2)
        listed = store.messages(ADA, limit=50)
        assert [m.subject for m in reversed(listed)] == [
            f"mbox {i}" for i in range(30) if i not in (0, 11)]
        assert [m.uid for m in listed] == list(range(28, 0, -1))
        head = store.max_position()
        total, items = mbox_messages(path)
        again = run_import(store, total, items, ADA, "INBOX", batch=4)
        assert (again["imported"], again["already_imported"]) == (0, 28)
        assert store.max_position() == head
        assert all(r.identical for r in store.verify())


def test_a_resumed_import_reads_from_the_first_message_that_did_not_land(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _mbox(tmp_path / "in.mbox", 20)
    with Letterlog.open(tmp_path / "d", durability="normal") as store:
        _, items = mbox_messages(path)
        run_import(store, 9, [next(items) for _ in range(9)], ADA, "INBOX", batch=4)
        starts: list[int] = []
        real = Reader.__init__

        def spy(self: Reader, *args: object) -> None:
            real(self, *args)  # type: ignore[arg-type]
            starts.append(self.start)

        monkeypatch.setattr(Reader, "__init__", spy)
        source = MboxAhead(path)
        report = run_import(store, source.total, source, ADA, "INBOX", batch=4)
        source.close()
        assert (report["imported"], report["already_imported"]) == (11, 9)
        assert starts == [9]
        assert sorted(m.subject for m in store.messages(ADA, limit=50)) == sorted(
            f"mbox {i}" for i in range(20))


def test_on_one_core_the_same_steps_run_in_this_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(adapters.cli.mbox_ahead, "_usable_cores", lambda: 1)

    def no_fork(self: Reader) -> None:
        raise AssertionError("forked on one core")

    monkeypatch.setattr(Reader, "in_a_process", no_fork)
    path = _mbox(tmp_path / "in.mbox", 12, bad=(3,))
    with Letterlog.open(tmp_path / "d", durability="normal") as store:
        source = MboxAhead(path)
        report = run_import(store, source.total, source, ADA, "INBOX", batch=5)
        source.close()
        assert (report["imported"], report["rejected"]) == (11, 1)
        total, items = mbox_messages(path)
        again = run_import(store, total, items, ADA, "INBOX", batch=5)
        assert (again["imported"], again["already_imported"]) == (0, 11)


_LARGE = (1, 8, 9, 17)


def _large(i: int) -> bytes:
    return make_mail(f"large {i}", message_id=f"<large{i}@mbox>",
                     body=f"line {i} " * 3000 + "\n").replace(b"\r\n", b"\n")


def _import_with_large(tmp_path: Path) -> None:
    """An mbox of 20 messages, 4 of them large, imported in batches of 6: every message
    lands, each large one byte for byte, and one payload file each."""
    large = {i: _large(i) for i in _LARGE}
    path = tmp_path / "in.mbox"
    with path.open("wb") as f:
        for i in range(20):
            raw = large.get(i) or make_mail(f"mbox {i}", message_id=f"<{i}@mbox>").replace(
                b"\r\n", b"\n")
            f.write(b"From ada@example.org Sun Mar  1 12:00:00 2026\n" + raw + b"\n")
    with Letterlog.open(tmp_path / "d", durability="normal") as store:
        source = MboxAhead(path)
        report = run_import(store, source.total, source, ADA, "INBOX", batch=6)
        source.close()
        assert report["imported"] == 20 and source.payloads_written
        listed = {m.subject: m for m in store.messages(ADA, limit=30)}
        for i, raw in large.items():
            m = listed[f"large {i}"]
            assert store.payloads.exists(store.mail.message(m.message_id).address)
            assert b"".join(store.body(ADA, "INBOX", m.uid)) == raw
        assert len(list(store.payloads.list())) == len(large)


def test_the_reading_process_writes_the_large_payloads_and_this_one_writes_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ADR 0104: the forked reader writes (and fsyncs) a batch's large payloads through a
    payload store it opens itself; this process's append only touches them."""
    importing = os.getpid()
    put_many = FilePayloadStore.put_many

    def only_in_the_reader(self: FilePayloadStore, payloads: Sequence[bytes]) -> list[Any]:
        assert os.getpid() != importing, "the importing process wrote a payload"
        return put_many(self, payloads)

    monkeypatch.setattr(FilePayloadStore, "put_many", only_in_the_reader)
    _import_with_large(tmp_path)


def test_payloads_the_reading_process_cannot_write_are_written_by_the_append(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    importing = os.getpid()
    put_many = FilePayloadStore.put_many

    def full_in_the_reader(self: FilePayloadStore, payloads: Sequence[bytes]) -> list[Any]:
        if os.getpid() != importing:
            raise OSError(28, "No space left on device")
        return put_many(self, payloads)

    monkeypatch.setattr(FilePayloadStore, "put_many", full_in_the_reader)
    _import_with_large(tmp_path)
