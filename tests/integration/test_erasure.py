"""The erasure test: after a purge (or an erasure), nothing of a message can be recovered from
any file under the data directory: events, WAL files, tables, payloads, keys."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from adapters.embedded import Letterlog
from tests.erasure_support import (
    ACCOUNT,
    deliver_marked,
    files_holding,
    files_holding_any_form,
    marked_mail,
    opened_by_a_fresh_reader,
)


@pytest.fixture
def data(tmp_path):
    return tmp_path / "data"


def test_the_log_never_holds_personal_data_in_plain_text(data):
    with Letterlog.open(data) as store:
        _, markers = deliver_marked(store)
        holding = files_holding(data, markers)
    assert not any(name.startswith(("events.sqlite", "keys.sqlite")) for name in holding)
    assert any(name.startswith("tables.sqlite") for name in holding)  # the read model has it


def test_a_purged_message_leaves_no_byte_of_its_markers_in_any_file(data):
    with Letterlog.open(data) as store:
        ids, markers = deliver_marked(store)
        assert files_holding(data, markers)  # the check can fail
        for message_id in ids:
            store.delete(message_id)
        report = store.purge(datetime.now(UTC) + timedelta(days=31)).as_dict()
        assert report["purged"] == 2 and report["payloads_freed"] == 1
        assert files_holding_any_form(data, markers) == {}
        store.rebuild()
        assert all(r.identical for r in store.verify())
    assert files_holding_any_form(data, markers) == {}
    assert opened_by_a_fresh_reader(data, markers) == []


def test_erasing_an_account_leaves_no_byte_of_its_markers_in_any_file(data):
    with Letterlog.open(data) as store:
        _, markers = deliver_marked(store)
        other = store.deliver(account="keep@example.org", raw=marked_mail("k", attachment=True)[0])
        assert opened_by_a_fresh_reader(data, markers)  # the check can fail
        result = store.erase_account(ACCOUNT)
        assert len(result["purged"]) == 2 and result["payload_bytes_freed"] > 10 * 1024
        assert result["keys_destroyed"] == 2
        assert files_holding_any_form(data, markers) == {}
        assert store.extract(other.message_id)  # someone else's mail is untouched
        store.rebuild()
        assert all(r.identical for r in store.verify())
        assert store.show(uuid.UUID(result["purged"][0]))["envelope"] == {}
    assert files_holding_any_form(data, markers) == {}
    assert opened_by_a_fresh_reader(data, markers) == []


def test_an_erased_message_leaves_no_byte_of_its_smtp_envelope_in_any_file(data):
    """The MTA's envelope (lda, lmtp) is sealed with the message: erasing it erases them."""
    envelope = {k: f"{k}{uuid.uuid4().hex[:12]}" for k in ("sender", "queue", "orig")}
    markers = [v.encode() for v in envelope.values()]
    with Letterlog.open(data) as store:
        d = store.deliver(account=ACCOUNT, raw=marked_mail("e", attachment=False)[0],
                          envelope={"sender": f"{envelope['sender']}@example.net",
                                    "queue_id": envelope["queue"],
                                    "original_recipient": f"{envelope['orig']}@example.org",
                                    "via": "lda"})
        assert store.show(d.message_id)["smtp_envelope"]["queue_id"] == envelope["queue"]
        assert not any(n.startswith("events.sqlite") for n in files_holding(data, markers))
        assert opened_by_a_fresh_reader(data, markers) == markers  # the check can fail
        assert store.erase_message(d.message_id)["keys_destroyed"] == 1
        assert store.show(d.message_id)["smtp_envelope"] == {}
    assert files_holding_any_form(data, markers) == {}
    assert opened_by_a_fresh_reader(data, markers) == []


def test_an_idempotency_key_is_kept_only_as_its_hash(data):
    """A caller's idempotency key may carry personal data (an address, a subject): the log,
    which erasure cannot rewrite, holds only its SHA-256; the key still works."""
    marker = f"key{uuid.uuid4().hex[:12]}"
    raw = marked_mail("i", attachment=False)[0]
    with Letterlog.open(data) as store:
        first = store.deliver(account=ACCOUNT, raw=raw, idempotency_key=f"{marker}@example.org")
        again = store.deliver(account=ACCOUNT, raw=raw, idempotency_key=f"{marker}@example.org")
        assert again.message_id == first.message_id
    assert not any(n.startswith("events.sqlite")
                   for n in files_holding(data, [marker.encode()]))










def test_the_forensic_scan_finds_markers_in_every_form_it_claims(tmp_path):
    """The scanner itself can fail: a marker plain, base64 at any alignment, or zstd
    compressed is found; nothing is found in a file without it."""
    import base64

    import zstandard

    marker = f"mark{uuid.uuid4().hex}".encode()
    for i, blob in enumerate([b"x" + marker, base64.b64encode(b"ab" + marker + b"cd"),
                              base64.b64encode(b"a" + marker), base64.b64encode(marker),
                              b"junk" + zstandard.ZstdCompressor().compress(b"q" * 99 + marker)]):
        (tmp_path / f"f{i}").write_bytes(blob)
    (tmp_path / "clean").write_bytes(b"nothing here" * 100)
    assert sorted(files_holding_any_form(tmp_path, [marker])) == [f"f{i}" for i in range(5)]
