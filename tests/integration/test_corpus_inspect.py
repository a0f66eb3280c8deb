"""Every message of the shared mail corpus is inspected and stored byte-exact.

The corpus lives in ``../shared/corpus/mail`` (MANIFEST.tsv says what each file exercises);
``*.mbox`` files are split with stdlib ``mailbox`` into their raw messages.
"""

from __future__ import annotations

import csv
import hashlib
import mailbox
import os
import re
from pathlib import Path

import pytest

from adapters.payloads.files import FilePayloadStore
from adapters.payloads.memory import InMemoryPayloadStore
from domain.rfc5322 import MessageFacts, inspect_message, prescan_structure

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "mail"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def corpus_messages() -> list[tuple[str, Path, int | None]]:
    """(id, file, mbox key or None) for every message in the corpus."""
    if not CORPUS.is_dir():
        return []
    found: list[tuple[str, Path, int | None]] = []
    for path in sorted(CORPUS.iterdir()):
        if path.suffix == ".mbox":
            box = mailbox.mbox(path, create=False)
            found += [(f"{path.name}#{key}", path, key) for key in box.iterkeys()]
            box.close()
        elif path.suffix == ".eml":
            found.append((path.name, path, None))
    return found


def read_raw(path: Path, key: int | None) -> bytes:
    if key is None:
        return path.read_bytes()
    box = mailbox.mbox(path, create=False)
    try:
        return box.get_bytes(key)  # the message without its "From " separator line
    finally:
        box.close()


def manifest() -> dict[str, dict[str, str]]:
    with open(CORPUS / "MANIFEST.tsv", newline="", encoding="utf-8") as file:
        return {row["file"]: row for row in csv.DictReader(file, delimiter="\t")}


MESSAGES = corpus_messages()


def test_the_corpus_is_there() -> None:
    if not MESSAGES:
        if IN_CI:
            pytest.fail(f"the mail corpus is missing at {CORPUS}")
        pytest.skip(f"no mail corpus at {CORPUS}")
    assert len(MESSAGES) >= 125


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> FilePayloadStore:
    return FilePayloadStore(tmp_path_factory.mktemp("payloads"), durable=False)


@pytest.mark.slow
@pytest.mark.parametrize(("path", "key"), [m[1:] for m in MESSAGES], ids=[m[0] for m in MESSAGES])
def test_every_corpus_message_is_inspected_and_stored_byte_exact(
    path: Path, key: int | None, store: FilePayloadStore
) -> None:
    raw = read_raw(path, key)
    facts = inspect_message(raw)
    assert (facts.size, facts.sha256) == (len(raw), hashlib.sha256(raw).hexdigest())
    assert prescan_structure(raw) == (facts.part_count, facts.depth)
    for payloads in (store, InMemoryPayloadStore()):
        ref = payloads.put(raw)
        assert b"".join(payloads.open(ref.address)) == raw
        assert (
            payloads.read_range(ref.address, len(raw) // 3, len(raw) // 2)
            == (raw[len(raw) // 3 : len(raw) // 2])
        )


@pytest.mark.slow
@pytest.mark.parametrize(
    "path", [m[1] for m in MESSAGES if m[2] is None], ids=[m[0] for m in MESSAGES if m[2] is None]
)
def test_the_facts_agree_with_the_corpus_manifest(path: Path) -> None:
    row = manifest()[path.name]
    facts = inspect_message(path.read_bytes())
    assert (facts.size, facts.sha256) == (int(row["size_bytes"]), row["sha256"])
    assert facts_in_manifest_terms(facts) == expected_from_manifest(row["exercises"])


def facts_in_manifest_terms(facts: MessageFacts) -> dict[str, object]:
    return {
        "eol": facts.line_ending,
        "mime": (facts.depth, facts.part_count),
        "attachments": len(facts.attachment_names),
        "no Message-ID": facts.envelope.message_id is None,
        "no Date": facts.envelope.date is None,
        "no From": facts.envelope.from_ == "",
    }


def expected_from_manifest(exercises: str) -> dict[str, object]:
    eol = re.search(r"EOL=(\w+)", exercises)
    mime = re.search(r"MIME depth (\d+), (\d+) parts", exercises)
    attachments = re.search(r"(\d+) attachment\(s\)", exercises)
    return {
        "eol": eol[1] if eol else None,
        "mime": (int(mime[1]), int(mime[2])) if mime else (0, 1),
        "attachments": int(attachments[1]) if attachments else 0,
        **{absent: absent in exercises for absent in ("no Message-ID", "no Date", "no From")},
    }
