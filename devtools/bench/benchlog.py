"""The cached benchmark log and ways to read it back.

``bench_log(events, accounts=None)`` builds (once; cached in ``~/.cache/letterlog/bench-logs/``,
or ``$LETTERLOG_BENCH_CACHE``, keyed by size, number of accounts, seed, ``LOG_SCHEMA`` and a
fingerprint of the event classes) an event store of at least ``events`` events through the
real aggregates (``Account.open``, ``Mailbox.create``, ``Mailbox.allocate_uids``,
``Message.deliver`` and the message commands), saved through the eventsourcing application's
event store (``app.events.put``, what ``app.save`` records with) in batches of ~1000 events in
the order they happened.
The history is ``devtools.bench.synthetic.LogSimulator``'s.

``open_reader`` opens it as a ``Letterlog`` on the log alone; ``select_unpack`` and
``mapper_events`` are the floors and the reference the readers are measured against.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from devtools.bench.common import progress_bars, rate
from devtools.bench.synthetic import FOLDERS, LogSimulator

LOG_SCHEMA = "bench-log-v2"  # v2: personal parts compressed (ADR 0014)
"""Bump when the generator changes what it writes (old cached logs are then ignored)."""

SAVE_BATCH = 1000


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "letterlog" / "bench-logs"
    return Path(os.environ.get("LETTERLOG_BENCH_CACHE") or default).expanduser()


def _fingerprint() -> str:
    from projections.registry import DOMAIN_EVENTS

    h = hashlib.sha256(LOG_SCHEMA.encode())
    for cls in sorted(DOMAIN_EVENTS, key=lambda c: f"{c.__module__}:{c.__qualname__}"):
        h.update(f"{cls.__module__}:{cls.__qualname__}".encode())
        h.update(",".join(sorted(getattr(cls, "__dataclass_fields__", {}))).encode())
    return h.hexdigest()[:10]


def default_accounts(events: int) -> int:
    """The accounts of a log of ``events`` events when none are asked for: 6 for 100k events,
    64 from 960k up."""
    return max(4, min(64, events // 15_000))


def cache_key(events: int, accounts: int | None = None, seed: int = 1) -> str:
    """The cache directory's name of a log: every parameter of its shape is in it (``accounts``
    resolved, so ``None`` and the count it stands for share a log)."""
    n = default_accounts(events) if accounts is None else accounts
    return f"{LOG_SCHEMA}-{_fingerprint()}-{events}-a{n}-s{seed}"


def bench_log(events: int, accounts: int | None = None, *,
              seed: int = 1) -> tuple[Path, dict[str, Any]]:
    """The cached log of at least ``events`` events over ``accounts`` accounts (``None``:
    ``default_accounts(events)``): ``(events.sqlite path, its meta)``."""
    if accounts is not None and accounts < 1:
        raise ValueError(f"bench_log: accounts must be at least 1, not {accounts}")
    n = default_accounts(events) if accounts is None else accounts
    root = cache_dir()
    key = cache_key(events, n, seed)
    final = root / key
    meta_path = final / "meta.json"
    if meta_path.exists():
        return final / "events.sqlite", {**json.loads(meta_path.read_text()), "cached": True}
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=root))
    try:
        meta = _generate(tmp / "events.sqlite", events, seed, n)
        meta["key"] = key
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
        try:
            tmp.rename(final)
        except OSError:  # another process built it meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final / "events.sqlite", {**json.loads(meta_path.read_text()), "cached": False}


def _generate(path: Path, events: int, seed: int, accounts: int) -> dict[str, Any]:
    from adapters.eventlog.store import MailLog, sqlite_env

    app = MailLog(env=sqlite_env(str(path), "normal"))
    sim = LogSimulator(accounts=accounts, seed=seed)
    kinds: Counter[str] = Counter()
    saved = 0
    t0 = time.perf_counter()
    pending: list[Any] = []
    with progress_bars() as progress:
        task = progress.add_task(f"generating a {events:,}-event log", total=events)
        while saved < events:
            sim.step()
            pending.extend(sim.take())
            if len(pending) >= SAVE_BATCH or saved + len(pending) >= events:
                for e in pending:
                    kinds[type(e).__qualname__] += 1
                # the application's event store, as ``app.save`` records them (``save`` itself
                # would add ~150 us per event or aggregate: a runtime Protocol isinstance check)
                app.events.put(pending)
                saved += len(pending)
                pending = []
                progress.update(task, completed=saved)
    seconds = time.perf_counter() - t0
    app.close()
    return {"events": saved, "messages_delivered": sim.delivered, "accounts": len(sim.accounts),
            "mailboxes": len(sim.accounts) * len(FOLDERS), "log_schema": LOG_SCHEMA,
            "event_kinds": dict(kinds.most_common()), "generated_in_s": round(seconds, 1),
            "generated_events_per_s": rate(saved, seconds), "seed": seed}


def open_reader(events_path: Path) -> Any:
    """A ``Letterlog`` on the log alone (no read models opened, nothing caught up)."""
    from adapters.bootstrap.store import letterlog
    from adapters.config.settings import load_settings
    from adapters.embedded import Letterlog
    from adapters.eventlog.store import open_log, sqlite_env
    from adapters.payloads.memory import InMemoryPayloadStore

    settings = load_settings(data=events_path.parent, durability="normal", event_store="sqlite")
    log = open_log(sqlite_env(str(events_path), "normal"))
    return letterlog(settings, facade=Letterlog, log=log, payloads=InMemoryPayloadStore(),
                     read_models=False)


def range_reader(events_path: Path) -> tuple[Callable[[int, int], Iterator[Any]],
                                              Callable[[], None]]:
    """The log at ``events_path`` opened in the calling process, as a rebuild's child opens
    it (``adapters.readside.rangefold.Reader``): ``(events(start, stop), close)``."""
    reader = open_reader(events_path)
    return (lambda start, stop: reader.events(start, stop)), reader.close


def select_unpack(events_path: Path, progress: Callable[[int], None] | None = None) -> int:
    """Events read with one plain ``SELECT`` and their state unpacked by msgpack (with
    letterlog's extension types), building no event object: what any rebuild of this log
    costs at least. Returns how many were read. The log's key store must be open (an
    ``open_reader`` of the same log): sealed parts are opened as they are unpacked."""
    from adapters.eventlog.transcoder import unpackb

    con = sqlite3.connect(f"file:{events_path}?mode=ro", uri=True)
    try:
        n = 0
        for (state,) in con.execute("SELECT state FROM stored_events ORDER BY rowid"):
            unpackb(state)
            n += 1
            if progress is not None and n % 50_000 == 0:
                progress(n)
    finally:
        con.close()
    return n


def mapper_events(reader: Any, batch: int = 1000) -> Iterator[tuple[int, Any]]:
    """The log read the eventsourcing library's way, as ``Letterlog.events`` did before
    ``adapters.eventlog.reader``: ``select_notifications`` pages, ``Mapper.to_domain_event`` per
    event. The reference the fast reader is measured against."""
    recorder, mapper = reader.log.recorder, reader.log.mapper
    pos = 1
    while True:
        found = recorder.select_notifications(start=pos, limit=batch)
        if not found:
            return
        for n in found:
            yield n.id, mapper.to_domain_event(n)
        pos = found[-1].id + 1


def warm(path: Path) -> None:
    """Reads the file once so that neither measured pass pays for a cold page cache."""
    with open(path, "rb") as fh:
        while fh.read(1 << 24):
            pass
