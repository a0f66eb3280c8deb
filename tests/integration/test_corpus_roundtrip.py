"""Every message of the shared corpus delivers and extracts byte-exact (mbox files split)."""

from __future__ import annotations

import mailbox
from pathlib import Path

import pytest

from adapters.embedded import Letterlog

pytestmark = pytest.mark.slow


def corpus_messages(corpus: Path):
    for path in sorted(corpus.iterdir()):
        if path.suffix == ".mbox":
            box = mailbox.mbox(str(path), create=False)
            for key in box.keys():  # noqa: SIM118 - iterating a mailbox yields messages
                yield f"{path.name}#{key}", box.get_bytes(key)
        elif path.is_file() and path.name != "MANIFEST.tsv" and not path.name.startswith("."):
            yield path.name, path.read_bytes()


def test_whole_corpus_delivers_and_extracts_byte_exact(corpus, tmp_path):
    store = Letterlog.open(tmp_path / "data", durability="normal")
    messages = list(corpus_messages(corpus))
    assert len(messages) >= 100
    delivered = {}
    for name, raw in messages:
        delivered[name] = (store.deliver(account="corpus@example.org", raw=raw), raw)
    mismatches = [n for n, (d, raw) in delivered.items() if store.extract(d.message_id) != raw]
    assert mismatches == []
    uids = sorted(d.uid for d, _ in delivered.values())
    assert uids == list(range(1, len(messages) + 1))
