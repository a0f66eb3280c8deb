"""Several OS processes on one data directory: no delivery lost or duplicated, UIDs distinct
and increasing, and a count-limited message never extracted more often than allowed."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

from adapters.embedded import Letterlog
from domain.errors import ExtractionRefused
from tests.factories import make_mail

pytestmark = pytest.mark.slow
ADA = "ada@example.org"


def _deliver(args):
    data, worker, count = args
    store = Letterlog.open(data)
    out = []
    for i in range(count):
        d = store.deliver(account=ADA, raw=make_mail(f"w{worker}-{i}",
                                                     message_id=f"<{worker}.{i}@x>"))
        out.append((str(d.message_id), d.uid))
    store.close()
    return out


def _extract(args):
    data, message_id, attempts = args
    store = Letterlog.open(data)
    ok = 0
    for _ in range(attempts):
        try:
            store.extract(message_id)
            ok += 1
        except ExtractionRefused:
            pass
    store.close()
    return ok


def _pool(n):
    return mp.get_context("spawn").Pool(n)


def test_processes_delivering_to_one_mailbox_lose_and_duplicate_nothing(tmp_path: Path):
    data = tmp_path / "data"
    Letterlog.open(data).close()
    workers, each = 4, 25
    with _pool(workers) as pool:
        results = pool.map(_deliver, [(data, w, each) for w in range(workers)])
    uids = [uid for r in results for _, uid in r]
    ids = {mid for r in results for mid, _ in r}
    assert len(ids) == workers * each
    assert sorted(uids) == list(range(1, workers * each + 1))
    for r in results:  # within one process, later deliveries get higher UIDs
        assert [u for _, u in r] == sorted(u for _, u in r)
    store = Letterlog.open(data)
    assert store.mail.account(ADA) and store.mail.mailbox(
        store.mail.account(ADA).mailbox("INBOX")[0]).uidnext == workers * each + 1
    # the read models the four processes built between them (each projecting what it had
    # just saved, or reading the log after a gap) equal a rebuild from the log
    listed = store.messages(ADA, limit=workers * each + 10)
    assert [m.uid for m in listed] == list(range(workers * each, 0, -1))
    assert [r.table for r in store.verify() if not r.identical] == []
    store.close()


def test_concurrent_extractions_never_exceed_the_limit(tmp_path: Path):
    data = tmp_path / "data"
    store = Letterlog.open(data)
    d = store.deliver(account=ADA, raw=make_mail(), extract_limit=5)
    store.close()
    with _pool(4) as pool:
        successes = pool.map(_extract, [(data, d.message_id, 4)] * 4)
    assert sum(successes) == 5
