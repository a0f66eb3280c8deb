"""An extraction counts only once its bytes are written; no more than the policy's N ever
succeed, also concurrently; a failed one leaves no file and uses nothing up."""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path

import pytest

from adapters.embedded import Letterlog
from domain.errors import ExtractionRefused, InvalidCommand
from domain.service import Mailstore
from tests.factories import make_mail, run_threads

ADA = "ada@example.org"


@pytest.fixture
def store(tmp_path: Path):
    s = Letterlog.open(tmp_path / "data")
    yield s
    s.close()


def test_a_missing_output_directory_is_refused_before_anything_counts(store, tmp_path):
    d = store.deliver(account=ADA, raw=make_mail(), extract_limit=1)
    with pytest.raises(InvalidCommand, match="directory .*nowhere does not exist"):
        store.extract_to(d.message_id, tmp_path / "nowhere" / "x.eml")
    assert store.show(d.message_id)["extract_count"] == 0
    report = store.extract_to(d.message_id, tmp_path / "x.eml")
    assert (tmp_path / "x.eml").read_bytes() == make_mail() and report["count"] == 1
    assert store.show(d.message_id)["state"] == "expired"


def test_an_existing_file_is_replaced_only_with_force(store, tmp_path):
    d = store.deliver(account=ADA, raw=make_mail())
    target = tmp_path / "x.eml"
    target.write_bytes(b"keep me")
    with pytest.raises(InvalidCommand, match="exists"):
        store.extract_to(d.message_id, target)
    assert target.read_bytes() == b"keep me"
    store.extract_to(d.message_id, target, force=True)
    assert target.read_bytes() == make_mail()
    assert store.show(d.message_id)["extractions_to_date"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "x.eml"]  # no .part


class _BrokenPipe(io.RawIOBase):
    def write(self, data):  # noqa: ANN001, ARG002
        raise BrokenPipeError("reader went away")


def test_a_write_that_fails_releases_the_extraction(store):
    d = store.deliver(account=ADA, raw=make_mail(), extract_limit=1)
    with pytest.raises(BrokenPipeError):
        store.extract_to_stream(d.message_id, _BrokenPipe())
    shown = store.show(d.message_id)
    assert (shown["extract_count"], shown["state"]) == (0, "active")
    assert store.extract(d.message_id) == make_mail()


def test_concurrent_extractions_never_exceed_the_limit(store, tmp_path):
    d = store.deliver(account=ADA, raw=make_mail(), extract_limit=3)
    ok, refused = [], []

    def extract(n: int) -> None:
        try:
            ok.append(store.extract_to(d.message_id, tmp_path / f"{n}.eml"))
        except ExtractionRefused:
            refused.append(n)

    assert run_threads(extract) == []
    assert (len(ok), len(refused)) == (3, 5)
    assert len(list(tmp_path.glob("*.eml"))) == 3 and not list(tmp_path.glob(".*"))
    assert store.show(d.message_id)["extractions_to_date"] == 3


def test_a_lapsed_reservation_frees_its_extraction(mail: Mailstore, clock) -> None:
    d = mail.deliver(account=ADA, raw=make_mail(), extract_limit=1)
    stuck = mail.reserve_extraction(d.message_id)  # an extractor that crashed
    with pytest.raises(ExtractionRefused):
        mail.reserve_extraction(d.message_id)
    clock.advance(minutes=11)
    fresh = mail.reserve_extraction(d.message_id)
    mail.confirm_extraction(fresh)
    with pytest.raises(ExtractionRefused):
        mail.confirm_extraction(stuck)  # too late: the one extraction was taken
    assert mail.message(d.message_id).extract_count == 1


def test_extractions_to_date_and_the_last_date_survive_a_new_policy(mail: Mailstore,
                                                                     clock) -> None:
    d = mail.deliver(account=ADA, raw=make_mail(), extract_limit=2)
    b"".join(mail.extract(d.message_id))
    clock.advance(hours=1)
    b"".join(mail.extract(d.message_id))
    mail.set_policy(d.message_id, extract_limit=5)
    m = mail.message(d.message_id)
    assert (m.extract_count, m.extractions_total) == (0, 2)
    assert m.last_extracted_at == clock.now == m.internal_date + timedelta(hours=1)


def test_the_reservation_lapse_is_a_setting(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LETTERLOG_EXTRACTION_RESERVATION_SECONDS", "90")
    with Letterlog.open(tmp_path / "data") as store:
        d = store.deliver(account=ADA, raw=make_mail(), extract_limit=1)
        store.extract_to(d.message_id, tmp_path / "x.eml")
        [reserved] = [e for _, e in store.events()
                      if type(e).__qualname__ == "Message.ExtractionReserved"]
    lapse = reserved.until - reserved.timestamp  # the event's time is taken just after "now"
    assert timedelta(seconds=89) < lapse <= timedelta(seconds=90)


# -- body: a read of the content that is not an extraction, refused as extract refuses --------

BIG = make_mail("big", body="x" * 20_000)  # over the inline limit: from the payload store


@pytest.mark.parametrize("raw", [make_mail(), BIG], ids=["inline", "payload"])
def test_body_of_an_extractable_message_streams_it_and_does_not_count(store, raw):
    d = store.deliver(account=ADA, raw=raw, extract_limit=1)
    assert b"".join(store.body(ADA, "INBOX", d.uid)) == raw
    assert b"".join(store.body(ADA, "INBOX", d.uid)) == raw
    shown = store.show(d.message_id)
    assert shown["extract_count"] == 0 and shown["state"] == "active"
    assert store.extract(d.message_id) == raw  # the one extraction is still there


@pytest.mark.parametrize("raw", [make_mail(), BIG], ids=["inline", "payload"])
def test_body_after_the_limit_is_refused_as_extract_is(store, raw):
    d = store.deliver(account=ADA, raw=raw, extract_limit=1)
    store.extract(d.message_id)
    assert store.show(d.message_id)["state"] == "expired"
    with pytest.raises(ExtractionRefused) as by_extract:
        store.extract(d.message_id)
    with pytest.raises(ExtractionRefused) as by_body:
        store.body(ADA, "INBOX", d.uid)
    assert str(by_body.value) == str(by_extract.value)


def test_body_after_the_extract_until_date_is_refused(tmp_path):
    from datetime import UTC, datetime

    from tests.factories import Clock

    clock = Clock()
    clock.now = datetime.now(UTC)
    with Letterlog.open(tmp_path / "data") as s:
        s.mail.clock = clock
        d = s.deliver(account=ADA, raw=make_mail(), extract_until=clock.now + timedelta(hours=1))
        assert b"".join(s.body(ADA, "INBOX", d.uid)) == make_mail()
        clock.advance(hours=2)  # not expired by a purge run yet: the date alone refuses
        with pytest.raises(ExtractionRefused, match="extraction refused"):
            s.body(ADA, "INBOX", d.uid)
        with pytest.raises(ExtractionRefused):
            s.extract(d.message_id)
