"""The erasure test's markers and scanners: a message whose every part carries a unique marker,
and the files under a data directory that still hold one (plain, base64 or in a zstd frame)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterable, Iterator
from email.message import EmailMessage
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from adapters.embedded import Letterlog
from adapters.eventlog.keyvault import unwrap
from adapters.eventlog.sealing import NONCE

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


Needles = dict[bytes, list[tuple[bytes, bytes]]]


def needles(forms: Iterable[tuple[bytes, bytes]]) -> Needles:
    """``(form, marker)`` pairs by the form's first 4 bytes: a search makes one pass over a
    file per distinct start (markers made alike share a few) instead of one per form."""
    out: Needles = {}
    for form, marker in forms:
        out.setdefault(form[:4], []).append((form, marker))
    return out


def markers_in(data: bytes, index: Needles) -> set[bytes]:
    """The markers one of whose forms occurs in ``data``: every occurrence of each start,
    then the forms that begin with it checked there (as exact as ``form in data``)."""
    hits: set[bytes] = set()
    for start, forms in index.items():
        at = data.find(start)
        while at >= 0:
            for form, marker in forms:
                if marker not in hits and data.startswith(form, at):
                    hits.add(marker)
            at = data.find(start, at + 1)
    return hits


def files_holding(root: Path, markers: list[bytes]) -> dict[str, list[bytes]]:
    """Every file under ``root`` with the markers found in it."""
    index = needles((m, m) for m in markers)
    found: dict[str, list[bytes]] = {}
    for path, data in every_file(root):
        hit = markers_in(data, index)
        if hit:
            found[str(path.relative_to(root))] = [m for m in markers if m in hit]
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


def deliver_marked(store: Letterlog, account: str = ACCOUNT,
                   ) -> tuple[list[uuid.UUID], list[bytes]]:
    small, small_markers = marked_mail("s", attachment=False)  # inline: body in the event
    large, large_markers = marked_mail("l", attachment=True)  # in the payload store
    assert len(small) < 10 * 1024 < len(large)
    ids = [store.deliver(account=account, raw=raw).message_id for raw in (small, large)]
    store.ensure_mailbox(account, "Archive")  # a deployment's second case finds it
    store.move(ids[0], "Archive")  # the personal data is in a second event too
    return ids, small_markers + large_markers


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
    index = needles((f, m) for m in markers for f in encoded_forms(m))
    found: dict[str, list[bytes]] = {}
    for path, data in every_file(root):
        hit = markers_in(data + decompressed_frames(data), index)
        if hit:
            found[str(path.relative_to(root))] = [m for m in markers if m in hit]
    return found


# -- the attacker with the deployment's keys (the crash tests) ---------------------------------
def around(blob: bytes, needle: bytes, before: int, after: int, width: int) -> set[bytes]:
    """Every ``width``-byte window starting up to ``before`` bytes before and ``after``
    bytes after each occurrence of ``needle`` in ``blob``."""
    out: set[bytes] = set()
    seen: set[bytes] = set()  # the bytes around an occurrence seen before: the same windows
    at = blob.find(needle)
    while at >= 0:
        lo, hi = max(0, at - before), min(len(blob) - width, at + after)
        context = blob[lo:hi + width]
        if hi >= lo and context not in seen:
            seen.add(context)
            out.update(context[i:i + width] for i in range(hi - lo + 1))
        at = blob.find(needle, at + 1)
    return out


def opens(kek: bytes, key_id: uuid.UUID, wrapped: bytes) -> bool:
    """Whether ``kek`` unwraps ``wrapped`` as the data key ``key_id``."""
    try:
        unwrap(kek, key_id, wrapped)
        return True
    except (InvalidTag, ValueError):
        return False


def any_opens(keks: Iterable[bytes], key_id: uuid.UUID, wrapped: Iterable[bytes]) -> bool:
    """Whether any of ``keks`` unwraps any of ``wrapped`` as the data key ``key_id``:
    ``opens`` for every pair, ``unwrap``'s AES-GCM (the nonce first, the key id as
    associated data) built once per KEK, as the attacker tries hundreds of thousands of
    pairs (a pair that opens is confirmed by ``unwrap`` itself; the crash tests' keys that
    must open, before the repair, check that this finds them)."""
    sealed = [(bytes(w[:NONCE]), bytes(w[NONCE:]), w) for w in wrapped]
    aad = key_id.bytes
    for kek in keks:
        try:
            aead = AESGCM(kek)
        except ValueError:
            continue
        for nonce, body, w in sealed:
            try:
                aead.decrypt(nonce, body, aad)
            except (InvalidTag, ValueError):
                continue
            if opens(kek, key_id, w):
                return True
    return False


def killed(p: subprocess.CompletedProcess[bytes]) -> None:
    """The process died of SIGKILL (the test fault point), not of anything else."""
    assert p.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), (
        p.returncode, p.stderr.decode()[-2000:])
