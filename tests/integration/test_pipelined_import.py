"""ADR 0027: during an import a second process projects while this one appends; when the
import returns the read models are current and equal to a rebuild."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import pytest

import adapters.embedded
from adapters.cli import follower
from adapters.cli.import_source import SourceMessage
from adapters.cli.importer import run_import
from adapters.embedded import Letterlog
from tests.factories import make_mail

ADA = "ada@example.org"


def _items(n: int, tag: str = "") -> list[SourceMessage]:
    return [SourceMessage(f"m{i}", make_mail(f"subject{tag} {i}", message_id=f"<{i}{tag}@x>"),
                          key=f"k{tag}{i}") for i in range(n)]


@pytest.fixture
def two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """The follower runs only with two usable cores; make the tests independent of the box."""
    monkeypatch.setattr(adapters.embedded, "_usable_cores", lambda: 2)


@pytest.mark.usefixtures("two_cores")
def test_an_import_projected_by_a_second_process_is_current_when_it_returns(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    items = _items(60)
    with Letterlog.open(tmp_path / "d", durability="normal") as store:
        report = run_import(store, len(items), items, ADA, "INBOX", batch=7)
        assert report["imported"] == 60
        listed = store.messages(ADA, limit=100)
        assert [m.subject for m in listed][:3] == ["subject 59", "subject 58", "subject 57"]
        assert len(listed) == 60
        assert store.projections.runner.position() == store.max_position()
        assert all(r.identical for r in store.verify())
    assert "projecting process exited" not in caplog.text


@pytest.mark.usefixtures("two_cores")
def test_inside_the_block_this_process_does_not_project_the_follower_does(
        tmp_path: Path) -> None:
    with Letterlog.open(tmp_path / "d", durability="normal") as store:
        store.deliver(account=ADA, raw=make_mail("before", message_id="<b@y>"))
        before = store.projections.runner.position()
        with store.projecting_in_a_second_process() as following:
            assert following
            for i in range(5):
                store.deliver(account=ADA, raw=make_mail(f"s{i}", message_id=f"<{i}@y>"))
            assert store.projections.runner.position() == before  # not projected here
        # the follower's work, read back from the tables (this process only catches up)
        assert [m.subject for m in store.messages(ADA, limit=10)] == [
            "s4", "s3", "s2", "s1", "s0", "before"]
        store.deliver(account=ADA, raw=make_mail("after", message_id="<after@y>"))
        assert store.messages(ADA, limit=1)[0].subject == "after"  # projected here again
        assert all(r.identical for r in store.verify())


@pytest.mark.usefixtures("two_cores")
def test_a_follower_that_dies_leaves_the_projection_to_this_process(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with Letterlog.open(tmp_path / "d", durability="normal") as store:
        with (caplog.at_level(logging.WARNING, logger="letterlog"),
              store.projecting_in_a_second_process() as following):
            assert following
            store.deliver(account=ADA, raw=make_mail("one", message_id="<1@z>"))
            store._follower.proc.kill()
            store._follower.proc.wait()
            store.deliver(account=ADA, raw=make_mail("two", message_id="<2@z>"))
            # the wake-up failed, so this delivery was projected here
            assert store.messages(ADA, limit=1)[0].subject == "two"
        assert "projecting process exited" in caplog.text
        assert [m.subject for m in store.messages(ADA, limit=5)] == ["two", "one"]
        assert all(r.identical for r in store.verify())


def test_no_follower_on_one_core_or_without_embedded_read_models(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(adapters.embedded, "_usable_cores", lambda: 1)
    with (Letterlog.open(tmp_path / "d", durability="normal") as store,
          store.projecting_in_a_second_process() as following):
        assert not following
        store.deliver(account=ADA, raw=make_mail("here", message_id="<h@z>"))
        assert store.messages(ADA, limit=1)[0].subject == "here"  # projected at once
    monkeypatch.setattr(adapters.embedded, "_usable_cores", lambda: 2)
    with (Letterlog.open(tmp_path / "d", read_models=False) as writer,
          writer.projecting_in_a_second_process() as following):
        assert not following


@pytest.fixture
def slow_follower(monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower that has not yet reached this process's commands: never woken, so the
    commands of the block are projected by nobody until something catches up."""
    monkeypatch.setattr(Letterlog, "_wake_follower", lambda self: True)


@pytest.mark.usefixtures("two_cores", "slow_follower")
def test_a_query_inside_the_block_shows_every_command_this_process_made(
        tmp_path: Path) -> None:
    """ADR 0037: a long-lived process delivering one message at a time reads its writes."""
    with Letterlog.open(tmp_path / "d", durability="normal") as store:
        with store.projecting_in_a_second_process() as following:
            assert following
            store.deliver(account=ADA, raw=make_mail("first", message_id="<f@q>"))
            before = store.projections.runner.position()
            d = store.deliver(account=ADA, raw=make_mail("second", message_id="<s@q>"))
            assert store.projections.runner.position() == before  # nobody projected it yet
            assert [m.subject for m in store.messages(ADA, limit=5)] == ["second", "first"]
            assert store.projections.runner.position() == d.position
        assert all(r.identical for r in store.verify())


@pytest.mark.usefixtures("two_cores", "slow_follower")
def test_deleting_a_mailbox_inside_the_block_expunges_what_was_just_delivered_to_it(
        tmp_path: Path) -> None:
    with Letterlog.open(tmp_path / "d", durability="normal") as store:
        store.create_mailbox(ADA, "Archive", create_account=True)
        with store.projecting_in_a_second_process() as following:
            assert following
            ids = [store.deliver(account=ADA, mailbox="Archive",
                                 raw=make_mail(f"a{i}", message_id=f"<a{i}@q>")).message_id
                   for i in range(3)]
            change = store.delete_mailbox(ADA, "Archive")
            assert change.extra["expunged"] == 3
        assert [store.show(i)["state"] for i in ids] == ["expunged"] * 3
        assert all(r.identical for r in store.verify())


def test_the_projecting_process_checkpoints_the_read_models_while_it_waits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Having projected ``CHECKPOINT_EVERY`` events, the follower copies the read models'
    write-ahead log into their file as soon as nothing waits to be projected, before its
    input ends (ADR 0111): the file grows while it still follows, where only the last
    connection's close used to copy it."""
    monkeypatch.setattr(follower, "CHECKPOINT_EVERY", 50)
    data = tmp_path / "d"
    Letterlog.open(data, durability="normal").close()  # the store and its empty tables
    tables = data / "tables.sqlite"
    with Letterlog.open(data, durability="normal", read_models=False) as store:
        store.deliver_many([{"account": ADA, "raw": make_mail(f"s{i}", message_id=f"<w{i}@x>")}
                            for i in range(120)])
        settings = store.settings.model_dump_json()
    empty = tables.stat().st_size
    wakeups, wake = os.pipe()
    projected: list[int] = []
    following = threading.Thread(target=lambda: projected.append(
        follower.follow(settings, wakeups)))
    following.start()
    try:
        os.write(wake, b"x")  # the log has grown
        deadline = time.monotonic() + 60
        while tables.stat().st_size <= empty:  # copied into the file: a checkpoint ran
            assert following.is_alive() and time.monotonic() < deadline, "no checkpoint"
            time.sleep(0.01)
    finally:
        os.close(wake)  # end of input: it catches up once more and returns
        following.join(60)
        os.close(wakeups)
    assert projected and projected[0] >= 120
    with Letterlog.open(data, durability="normal") as store:
        assert len(store.messages(ADA, limit=200)) == 120
        assert all(r.identical for r in store.verify())
