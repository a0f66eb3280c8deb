"""Several OS processes writing one mailbox through PostgreSQL.

(The domain suite itself runs on PostgreSQL from ``tests/unit/test_domain.py``: it is marked
``every_backend``.)
"""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path
from typing import Any

import pytest

from adapters.config.settings import postgres_env_from_dsn
from adapters.embedded import Letterlog
from adapters.eventlog.store import MailLog, postgres_env
from domain.errors import ExtractionRefused
from tests.factories import make_mail, on_backends

ADA = "ada@example.org"


@pytest.mark.services
def test_processes_opening_one_new_postgres_database_at_once_all_start(pg_dsn: str,
                                                                     tmp_path: Path) -> None:
    # eventsourcing re-creates its functions on start-up; unserialised, simultaneous starts
    # fail with "tuple concurrently updated" (a CI failure before the schema lock existed)
    with _pool(6) as pool:
        counts = pool.starmap(_open_and_count, [(pg_dsn, str(tmp_path / "vault.sqlite"))] * 12)
    assert counts == [0] * 12


def _open_and_count(dsn: str, vault: str) -> int:
    app = MailLog(env=postgres_env(postgres_env_from_dsn(dsn), vault))
    try:
        return len(list(app.recorder.select_notifications(start=1, limit=10)))
    finally:
        app.close()


# --------------------------------------------------------------------------- processes


def _deliver(args: tuple[Path, str, int, int]) -> list[tuple[str, int]]:
    data, dsn, worker, count = args
    store = Letterlog.open(data, event_store="postgres", postgres_dsn=dsn)
    out = []
    for i in range(count):
        d = store.deliver(account=ADA, raw=make_mail(f"w{worker}-{i}",
                                                     message_id=f"<{worker}.{i}@x>"))
        out.append((str(d.message_id), d.uid))
    store.close()
    return out


def _extract(args: tuple[Path, str, Any, int]) -> int:
    data, dsn, message_id, attempts = args
    store = Letterlog.open(data, event_store="postgres", postgres_dsn=dsn)
    ok = 0
    for _ in range(attempts):
        try:
            store.extract(message_id)
            ok += 1
        except ExtractionRefused:
            pass
    store.close()
    return ok


def _pool(n: int) -> Any:
    return mp.get_context("spawn").Pool(n)


@pytest.mark.services
@pytest.mark.slow
def test_processes_delivering_to_one_mailbox_on_postgres_lose_and_duplicate_nothing(
        tmp_path: Path, pg_dsn: str) -> None:
    data = tmp_path / "data"
    Letterlog.open(data, event_store="postgres", postgres_dsn=pg_dsn).close()
    workers, each = 4, 25
    with _pool(workers) as pool:
        results = pool.map(_deliver, [(data, pg_dsn, w, each) for w in range(workers)])
    uids = [uid for r in results for _, uid in r]
    ids = {mid for r in results for mid, _ in r}
    assert len(ids) == workers * each
    assert sorted(uids) == list(range(1, workers * each + 1))
    for r in results:  # within one process, later deliveries get higher UIDs
        assert [u for _, u in r] == sorted(u for _, u in r)
    with Letterlog.open(data, event_store="postgres", postgres_dsn=pg_dsn) as store:
        inbox = store.mail.mailbox(store.mail.account(ADA).mailbox("INBOX")[0])
        assert inbox.uidnext == workers * each + 1
        delivered = [e for _, e in store.events() if type(e).__name__ == "Delivered"]
        assert sorted(str(e.originator_id) for e in delivered) == sorted(ids)


@pytest.mark.services
@pytest.mark.slow
def test_concurrent_extractions_on_postgres_never_exceed_the_limit(
        tmp_path: Path, pg_dsn: str) -> None:
    data = tmp_path / "data"
    with Letterlog.open(data, event_store="postgres", postgres_dsn=pg_dsn) as store:
        d = store.deliver(account=ADA, raw=make_mail(), extract_limit=5)
    with _pool(4) as pool:
        successes = pool.map(_extract, [(data, pg_dsn, d.message_id, 4)] * 4)
    assert sum(successes) == 5


@on_backends("sqlite", "postgres")  # positions are looked up in a durable store
def test_a_retried_keyed_delivery_reports_the_first_modseq(mail: Any) -> None:
    """The duplicate's MODSEQ is the log position of the first delivery's event, looked up
    in the event store (SQLite rowid, PostgreSQL notification_id)."""
    first = mail.deliver(account=ADA, raw=make_mail(), idempotency_key="k1")
    mail.flag(first.message_id, ["\\Seen"])
    again = mail.deliver(account=ADA, raw=make_mail(), idempotency_key="k1")
    assert (again.message_id, again.uid, again.modseq) == (first.message_id, first.uid,
                                                          first.modseq)
    assert again.duplicate and again.position > first.position
