"""Every message of the shared corpus delivers and extracts byte-exact (mbox files split)."""

from __future__ import annotations

import pytest

from adapters.embedded import Letterlog
from tests.factories import corpus_messages

pytestmark = pytest.mark.slow




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
