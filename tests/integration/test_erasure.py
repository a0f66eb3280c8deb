"""The erasure test: after a purge (or an erasure), nothing of a message can be recovered from
any file under the data directory: events, WAL files, tables, payloads, keys."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path

import pytest

from adapters.embedded import Letterlog

ACCOUNT = "erasure@example.org"


def marked_mail(tag: str, *, attachment: bool) -> tuple[bytes, list[bytes]]:
    """A message whose subject, From address, body, attachment name and attachment (over
    10 KiB) each carry a unique marker; and the markers."""
    m = {k: f"{k}{tag}{uuid.uuid4().hex[:12]}" for k in ("subj", "from", "body", "name", "blob")}
    msg = EmailMessage()
    msg["From"] = f"{m['from']}@example.org"
    msg["To"] = ACCOUNT
    msg["Subject"] = m["subj"]
    msg.set_content(f"Hello, {m['body']}.\n")
    markers = [m["subj"], m["from"], m["body"]]
    if attachment:
        msg.add_attachment((m["blob"] + " ") * 1200, filename=f"{m['name']}.txt")
        markers += [m["name"], m["blob"]]
    return msg.as_bytes(), [x.encode() for x in markers]


def every_file(root: Path) -> Iterator[tuple[Path, bytes]]:
    """Each file under ``root`` and its bytes, as an attacker with a copy reads them (a file
    that vanishes while this reads, as a server's cleaner deletes it, holds nothing any
    more; one a server keeps from other users is left out)."""
    for path in sorted(root.rglob("*")):
        if path.is_file():
            try:
                yield path, path.read_bytes()
            except (FileNotFoundError, PermissionError):
                continue


def files_holding(root: Path, markers: list[bytes]) -> dict[str, list[bytes]]:
    """Every file under ``root`` with the markers found in it."""
    found: dict[str, list[bytes]] = {}
    for path, data in every_file(root):
        hits = [m for m in markers if m in data]
        if hits:
            found[str(path.relative_to(root))] = hits
    return found


OPEN_EVERY_SEALED_PART = """
import sys
from adapters.embedded import Letterlog
with Letterlog.open(sys.argv[1], read_models=False) as store:
    for _, event in store.events():
        part = getattr(event, "personal", None)
        if part is not None and not part.shredded:
            sys.stdout.write(repr(dict(part.data)))
"""


def opened_by_a_fresh_reader(data: Path, markers: list[bytes]) -> list[bytes]:
    """The markers a new process reads from the log with the key store it finds beside it:
    the attacker who has the files. Bytes gone from the disk are not enough; the sealed
    parts must not open (their keys destroyed), and nothing held in memory can help."""
    out = subprocess.run([sys.executable, "-c", OPEN_EVERY_SEALED_PART, str(data)],
                         capture_output=True, check=True).stdout
    return [m for m in markers if m in out]


def deliver_marked(store: Letterlog) -> tuple[list[uuid.UUID], list[bytes]]:
    small, small_markers = marked_mail("s", attachment=False)  # inline: body in the event
    large, large_markers = marked_mail("l", attachment=True)  # in the payload store
    assert len(small) < 10 * 1024 < len(large)
    ids = [store.deliver(account=ACCOUNT, raw=raw).message_id for raw in (small, large)]
    store.create_mailbox(ACCOUNT, "Archive")
    store.move(ids[0], "Archive")  # the personal data is in a second event too
    return ids, small_markers + large_markers


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


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def encoded_forms(marker: bytes) -> list[bytes]:
    """``marker`` as it would sit in a file: plain, and base64 at each of the three byte
    alignments (the middle of an encoded run, as in a MIME part)."""
    import base64

    forms = [marker]
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + marker)
        forms.append(encoded[4 * ((pad + 2) // 3) if pad else 0:][:-4])
    return [f for f in forms if len(f) >= 8]


def decompressed_frames(data: bytes) -> bytes:
    """Every zstd frame found anywhere in ``data`` (the personal parts, payload chunks),
    decompressed: what an attacker reads out of a file without any key."""
    import zstandard

    out = []
    at = data.find(ZSTD_MAGIC)
    while at >= 0:
        with contextlib.suppress(zstandard.ZstdError):
            out.append(zstandard.ZstdDecompressor().decompressobj().decompress(data[at:]))
        at = data.find(ZSTD_MAGIC, at + 1)
    return b"".join(out)


def files_holding_any_form(root: Path, markers: list[bytes]) -> dict[str, list[bytes]]:
    """``files_holding`` for the markers plain, base64-encoded, and inside any zstd frame."""
    found: dict[str, list[bytes]] = {}
    for path, data in every_file(root):
        data += decompressed_frames(data)
        hits = [m for m in markers if any(f in data for f in encoded_forms(m))]
        if hits:
            found[str(path.relative_to(root))] = hits
    return found


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
