"""``letterlog bench project|rebuild|query``: the read side against raw SQLite, in the same run.

Each benchmark returns (and the CLI prints) one JSON object holding letterlog's numbers, the
raw baseline measured in the same run on the same machine, their ratio and the target:

* ``bench_project``: catch-up projection. A ``ProjectionRunner`` (every projection, live
  mode, default batch size) applies a realistic log to a fresh ``SqliteTableStore``
  (``synchronous=NORMAL``, the embedded default). Baseline: the very cells the runner wrote
  (captured from ``apply``), inserted with plain ``executemany`` upserts into ``WITHOUT ROWID``
  tables, one transaction per runner batch, same pragmas. Decoding the log is timed apart.
* ``bench_rebuild``: one process folds the whole log (read + decode from the SQLite event
  store, ``fold=True``) into a fresh table store. Baseline: reading and decoding the same log
  (``Letterlog.events``) with no projection.
* ``bench_query``: p50/p99 of the newest-50 listing, a random page (``before_uid``) and the
  counters reads in a 100k-message mailbox, through the query functions and through what a
  user calls, the ``Letterlog`` API (``messages``, ``mailbox_status``, ``counters``).
  Baseline: raw ``SELECT``s of the same cells on the same file (the listing columns of 50
  rows; the counters row's count family ``c``, without its soft-delete markers).

The log
-------
``bench_log(events)`` builds (once; cached in ``~/.cache/letterlog/bench-logs/``, or
``$LETTERLOG_BENCH_CACHE``, keyed by size, ``LOG_SCHEMA`` and a fingerprint of the event
classes) an event store of at least ``events`` events through the real aggregates
(``Account.open``, ``Mailbox.create``, ``Mailbox.allocate_uids``, ``Message.deliver`` and the
message commands), saved through the eventsourcing application's event store
(``app.events.put``, what ``app.save`` records with) in batches of ~1000 events in the order
they happened. The activity model is a simulated clock: every tick delivers a
group of 1-3 messages (MTAs deliver one at a time; each group allocates its UIDs) to one of
several accounts (some much busier than others), and each message gets a fate drawn when it
arrives, played out over the following ticks:

======================  =========================================================
delivered to            INBOX 85 %, Sent 10 % (already ``\\Seen``), a filed folder 5 %
read (``\\Seen``)        80 % of INBOX mail, 40 % of filed mail
answered / flagged      10 % of read mail / 5 % (half unflagged later)
extracted (downloaded)  2 % of read mail
labelled                15 % (a fifth of those get a second label, a tenth lose one)
moved                   12 % (mostly to Archive)
soft-deleted            15 % of INBOX, 30 % of filed mail; 60 % of those expunged later,
                        3 % restored
======================  =========================================================

Bodies are small and inline (plain text, 0.3-3 KB, unique: their own headers), with
envelopes and facts exactly as ``inspect_message`` describes such a message; 8 % carry an
attachment and live in the payload store (not inline; a third share one payload). That gives
about three events per message, a mailbox-like mix (see ``meta.json`` next to the log).
"""

from __future__ import annotations

import bisect
import cProfile
import gc
import hashlib
import json
import math
import os
import pstats
import random
import shutil
import sqlite3
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from io import StringIO
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from uuid import UUID

from domain.account import Account
from domain.mailbox import Mailbox
from domain.message import Arrival, Message
from domain.service import new_message_id, thread_id_for
from domain.values import Role

LOG_SCHEMA = "bench-log-v2"  # v2: personal parts compressed (ADR 0014)
"""Bump when the generator changes what it writes (old cached logs are then ignored)."""

SAVE_BATCH = 1000
SYNCHRONOUS = "NORMAL"  # the embedded default for tables (and durability=normal for the log)
TARGET_PROJECT_RATIO = 0.30
TARGET_REBUILD_EVENTS_PER_S = 100_000
TARGET_LISTING_P99_MS = 2.0
TARGET_LISTING_P99_VS_RAW = 2.0  # letterlog's newest-50 p99 at most twice the raw SELECT's
TARGET_COUNTERS_P99_MS = 1.0
_DOMAIN = "example.org"
QUERY_ACCOUNT = f"bench@{_DOMAIN}"  # owns the big INBOX of ``bench_query``


# -- progress (rich, on stderr) ------------------------------------------------------------------


@contextmanager
def _progress() -> Iterator[Any]:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(f"{task.speed or 0:>9,.0f}/s", style="progress.data.speed")

    console = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), Rate(),
                  TimeElapsedColumn(), console=console, transient=True,
                  disable=not console.is_terminal) as progress:
        yield progress


def _counted(items: Iterable[Any], progress: Any, task: Any, every: int = 5000) -> Iterator[Any]:
    done = 0
    for item in items:
        yield item
        done += 1
        if done % every == 0:
            progress.update(task, completed=done)
    progress.update(task, completed=done)


def _rate(n: int | float, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else float("inf")


class _Clock:
    """Wall and process CPU time of a phase: a CPU share well below 1 means the machine was
    busy with other work while we measured (compare ratios, not absolutes, then)."""

    def __init__(self) -> None:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        self.wall = self.cpu = 0.0

    def stop(self) -> float:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = time.process_time() - self.cpu0
        return self.wall

    @property
    def share(self) -> float:
        return round(self.cpu / self.wall, 2) if self.wall > 0 else 0.0


def _load() -> float:
    return round(os.getloadavg()[0], 2)


# -- realistic mail ------------------------------------------------------------------------------

_FIRST = ("Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Margaret", "Ken", "Frances",
          "John", "Radia", "Leslie", "Hedy", "Dennis", "Karen", "Tim", "Sophie", "Linus")
_LAST = ("Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Hamilton", "Thompson",
         "Allen", "Backus", "Perlman", "Lamport", "Lamarr", "Ritchie", "Jones", "Berners-Lee",
         "Wilson", "Torvalds")
_TEXT = (
    "mailbox quarterly report review merge release schedule budget design meeting draft "
    "storage event replay projection cluster region shard purge invoice contract lunch "
    "friday deadline proposal customer feedback roadmap hiring offsite travel expense "
    "benchmark latency throughput index label thread archive backup restore the a of to "
    "and we please thanks attached see below next week update status plan team"
)
_WORDS = _TEXT.split()
LABELS = ("work", "travel", "finance", "family", "receipts", "important", "later")
_POLICY = {"kind": "indefinite", "limit": None, "until": None}
_PLAIN_FACTS = {"content_type": "text/plain", "part_count": 1, "depth": 0,
                "has_attachments": False, "defects": [], "line_ending": "CRLF"}


def _wrap(words: list[str]) -> str:
    lines, line = [], ""
    for w in words:
        if len(line) + len(w) + 1 > 72:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}" if line else w
    lines.append(line)
    return "\r\n".join(lines)


@dataclass
class Mail:
    """What ``domain.delivery.delivery_fields`` would record for one message (minus placement)."""

    size: int
    sha256: str
    inline: bool
    thread_id: UUID
    facts: dict[str, Any]
    personal: dict[str, Any]
    raw: bytes | None


class MailFactory:
    """Synthesises messages whose envelope and facts equal ``inspect_message``'s (tested), fast
    enough for a million events (the email parser would take minutes)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.paragraphs = [
            _wrap([rng.choice(_WORDS) for _ in range(rng.randint(20, 120))]).capitalize() + "."
            for _ in range(400)
        ]
        self.people = [f"{f} {s} <{f.lower()}.{s.lower()}@{d}>"
                       for f in _FIRST for s in _LAST[:6]
                       for d in ("example.com", "example.net")]
        self.shared_payload = hashlib.sha256(b"letterlog bench shared attachment").hexdigest()
        self.seq = 0

    def subject(self) -> str:
        rng = self.rng
        return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 7))).capitalize()

    def make(self, account_id: UUID, to: str, when: datetime, *, sender: str | None = None,
             reply_to: tuple[str, list[str]] | None = None, subject: str | None = None,
             attachment: bool = False) -> Mail:
        rng = self.rng
        self.seq += 1
        mid = f"<{self.seq}.{rng.getrandbits(40):010x}@{_DOMAIN}>"
        sender = sender or rng.choice(self.people)
        cc = [p.split("<")[1].rstrip(">")
              for p in rng.sample(self.people, rng.choice((0, 0, 0, 1, 2)))]
        subject = subject or self.subject()
        sent_at = (when - timedelta(seconds=rng.randint(1, 600))).replace(microsecond=0)
        date = format_datetime(sent_at)
        references: list[str] = []
        in_reply_to = None
        if reply_to is not None:
            subject = "Re: " + reply_to[0]
            references = reply_to[1][-10:]
            in_reply_to = references[-1]
        head = [f"From: {sender}", f"To: {to}"]
        if cc:
            head.append(f"Cc: {', '.join(cc)}")
        head += [f"Subject: {subject}", f"Date: {date}", f"Message-ID: {mid}"]
        if in_reply_to:
            head += [f"In-Reply-To: {in_reply_to}", f"References: {' '.join(references)}"]
        head += ["MIME-Version: 1.0", "Content-Type: text/plain; charset=utf-8",
                 "Content-Transfer-Encoding: 7bit"]
        header = ("\r\n".join(head) + "\r\n\r\n").encode()
        body = ("\r\n\r\n".join(rng.sample(self.paragraphs, rng.randint(1, 4))) + "\r\n").encode()
        envelope = {
            "subject": subject, "from": sender, "to": [to], "cc": cc, "date": date,
            "sent_at": sent_at,
            "message_id": mid, "in_reply_to": in_reply_to, "references": references,
        }
        facts_env = SimpleNamespace(references=references, in_reply_to=in_reply_to,
                                    message_id=mid)
        message_id_for_thread = UUID(int=self.seq)  # only used when there is no Message-ID
        thread_id = thread_id_for(account_id, SimpleNamespace(envelope=facts_env),  # type: ignore[arg-type]
                                  message_id_for_thread)
        if attachment:
            size = rng.randint(40_000, 2_000_000)
            sha = (self.shared_payload if rng.random() < 1 / 3
                   else hashlib.sha256(mid.encode()).hexdigest())
            facts = {"content_type": "multipart/mixed", "part_count": 3, "depth": 1,
                     "has_attachments": True, "defects": [], "line_ending": "CRLF",
                     "header_bytes": len(header)}
            name = rng.choice(("report.pdf", "slides.pptx", "photo.jpg", "invoice.pdf"))
            personal = {"envelope": envelope, "attachment_names": [name], "body": None}
            return Mail(size, sha, False, thread_id, facts, personal, None)
        raw = header + body
        facts = dict(_PLAIN_FACTS, defects=[], header_bytes=len(header))
        personal = {"envelope": envelope, "attachment_names": [], "body": raw}
        return Mail(len(raw), hashlib.sha256(raw).hexdigest(), True, thread_id, facts,
                    personal, raw)


def deliver(mailbox: Any, mails: list[tuple[Mail, UUID, list[str], list[str]]],
            when: datetime) -> list[Any]:
    """Allocates UIDs in ``mailbox`` and delivers ``(mail, message id, flags, labels)``."""
    first = mailbox.allocate_uids([mid for _, mid, _, _ in mails])
    out = []
    for n, (mail, message_id, flags, labels) in enumerate(mails):
        out.append(Message.deliver(message_id, Arrival(
            account_id=mailbox.account_id, mailbox_id=mailbox.id, uid=first + n,
            uidvalidity=mailbox.uidvalidity, size=mail.size, sha256=mail.sha256,
            inline=mail.inline, internal_date=when, flags=sorted(flags), labels=sorted(labels),
            policy=dict(_POLICY), thread_id=mail.thread_id, facts=mail.facts,
            personal=mail.personal,
        )))
    return out


# -- the simulated mailboxes ---------------------------------------------------------------------

_FOLDERS = (("INBOX", "inbox"), ("Sent", "sent"), ("Drafts", "drafts"), ("Trash", "trash"),
            ("Archive", "archive"), ("Lists", ""), ("Receipts", ""))


@dataclass
class _Account:
    agg: Any
    address: str
    boxes: dict[str, Any]
    threads: deque[tuple[str, list[str]]] = field(default_factory=lambda: deque(maxlen=64))


@dataclass
class _Live:
    msg: Any
    account: _Account
    actions: list[tuple[str, str | None, int]]
    next: int = 0


class LogSimulator:
    """Produces a realistic event history, in the order it happened (see the module doc)."""

    def __init__(self, accounts: int, seed: int = 1,
                 start: datetime = datetime(2024, 1, 8, 7, 0, tzinfo=UTC)) -> None:
        self.rng = random.Random(seed)
        self.mail = MailFactory(self.rng)
        self.now = start
        self.tick = 0
        self.out: list[Any] = []
        self.due: dict[int, list[_Live]] = {}
        self.accounts = [self._open(i) for i in range(accounts)]
        # a few busy accounts, a long tail of quiet ones
        self.weights = [1.0 / (1 + i) ** 0.8 for i in range(accounts)]
        self.delivered = 0

    def _open(self, i: int) -> _Account:
        f, s = _FIRST[i % len(_FIRST)], _LAST[(i // len(_FIRST)) % len(_LAST)]
        address = f"{f.lower()}.{s.lower()}{i}@{_DOMAIN}"
        agg = Account.open(address)
        boxes = {}
        for name, role in _FOLDERS:
            mailbox_id, uidvalidity = agg.register_mailbox(name, Role(role))
            boxes[name] = Mailbox.create(mailbox_id, agg.id, name, role, uidvalidity)
            agg.subscribe(name)
        self.out.extend(agg.collect_events())
        for box in boxes.values():
            self.out.extend(box.collect_events())
        return _Account(agg, address, boxes)

    def _emit(self, *aggregates: Any) -> None:
        for agg in aggregates:
            self.out.extend(agg.collect_events())

    def step(self) -> None:
        """One tick: a delivery group, then the actions due now."""
        rng = self.rng
        self.tick += 1
        self.now += timedelta(seconds=rng.randint(20, 160))
        acct = rng.choices(self.accounts, self.weights)[0]
        r = rng.random()
        folder = "INBOX" if r < 0.85 else "Sent" if r < 0.95 else rng.choice(("Lists", "Receipts"))
        group = []
        count = rng.choice((1, 1, 1, 1, 2, 2, 3))
        for _ in range(count):
            reply = rng.choice(acct.threads) if acct.threads and rng.random() < 0.35 else None
            if folder == "Sent":
                mail = self.mail.make(acct.agg.id, rng.choice(self.mail.people), self.now,
                                      sender=acct.address, reply_to=reply)
            else:
                mail = self.mail.make(acct.agg.id, acct.address, self.now, reply_to=reply,
                                      attachment=rng.random() < 0.08)
            env = mail.personal["envelope"]
            if reply is not None:
                reply[1].append(env["message_id"])
            else:
                acct.threads.append((env["subject"], [env["message_id"]]))
            flags = ["\\Seen"] if folder == "Sent" else []
            labels = ["receipts"] if folder == "Receipts" else []
            if labels:
                acct.agg.define_labels(frozenset(labels))
            group.append((mail, new_message_id(), flags, labels))
        msgs = deliver(acct.boxes[folder], group, self.now)
        self._emit(acct.agg, acct.boxes[folder], *msgs)
        self.delivered += len(msgs)
        for msg in msgs:
            actions = self._fate(folder)
            if actions:
                self._schedule(_Live(msg, acct, actions))
        for live in self.due.pop(self.tick, ()):
            self._act(live)
            live.next += 1
            if live.next < len(live.actions):
                self._schedule(live)

    def _schedule(self, live: _Live) -> None:
        at = self.tick + live.actions[live.next][2]
        self.due.setdefault(at, []).append(live)

    def _fate(self, folder: str) -> list[tuple[str, str | None, int]]:
        rng = self.rng
        r = rng.random
        acts: list[tuple[str, str | None, int]] = []

        def later(lo: int, hi: int) -> int:
            return rng.randint(lo, hi)

        if folder == "Sent":
            if r() < 0.02:
                acts.append(("delete", None, later(50, 3000)))
            return acts
        filed = folder != "INBOX"
        if r() < (0.40 if filed else 0.80):
            acts.append(("flag", "\\Seen", later(1, 400)))
            if r() < 0.10:
                acts.append(("flag", "\\Answered", later(1, 200)))
            if r() < 0.02:
                acts.append(("extract", None, later(1, 200)))
        if r() < 0.05:
            acts.append(("flag", "\\Flagged", later(1, 300)))
            if r() < 0.5:
                acts.append(("unflag", "\\Flagged", later(100, 3000)))
        if r() < 0.15:
            acts.append(("label", rng.choice(LABELS), later(1, 500)))
            if r() < 0.2:
                acts.append(("label", rng.choice(LABELS), later(1, 800)))
            if r() < 0.1:
                acts.append(("unlabel", None, later(100, 2000)))
        if r() < 0.12 and not filed:
            acts.append(("move", rng.choice(("Archive", "Archive", "Archive", "Lists")),
                         later(50, 2000)))
        if r() < (0.30 if filed else 0.15):
            acts.append(("delete", None, later(20, 3000)))
            x = r()
            if x < 0.03:
                acts.append(("restore", None, later(10, 500)))
            elif x < 0.63:
                acts.append(("expunge", None, later(10, 4000)))
        return acts

    def _act(self, live: _Live) -> None:
        kind, arg, _ = live.actions[live.next]
        msg, acct = live.msg, live.account
        listed = msg.is_listed
        if kind == "flag" and listed:
            msg.change_flags(msg.flags | {arg})
        elif kind == "unflag" and listed:
            msg.change_flags(msg.flags - {arg})
        elif kind == "label" and listed:
            new = msg.labels | {arg}
            acct.agg.define_labels(new)
            msg.change_labels(new)
            self._emit(acct.agg)
        elif kind == "unlabel" and listed and msg.labels:
            msg.change_labels(msg.labels - {sorted(msg.labels)[0]})
        elif kind == "move" and listed:
            target = acct.boxes[arg]
            if target.id != msg.mailbox_id:
                uid = target.allocate_uids([msg.id])
                msg.move(target.id, uid, target.uidvalidity)
                self._emit(target)
        elif kind == "extract" and msg.state == "active":
            msg.extract(self.now)
        elif kind == "delete" and listed:
            msg.soft_delete(self.now + timedelta(days=30))
        elif kind == "restore" and msg.state == "deleted":
            msg.restore(self.now)
        elif kind == "expunge" and msg.state != "expunged":
            msg.expunge(self.now)
        self._emit(msg)

    def take(self) -> list[Any]:
        out, self.out = self.out, []
        return out


# -- the cached log ------------------------------------------------------------------------------


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


def bench_log(events: int, *, seed: int = 1) -> tuple[Path, dict[str, Any]]:
    """The cached log of at least ``events`` events: ``(events.sqlite path, its meta)``."""
    root = cache_dir()
    key = f"{LOG_SCHEMA}-{_fingerprint()}-{events}-s{seed}"
    final = root / key
    meta_path = final / "meta.json"
    if meta_path.exists():
        return final / "events.sqlite", {**json.loads(meta_path.read_text()), "cached": True}
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=root))
    try:
        meta = _generate(tmp / "events.sqlite", events, seed)
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


def _generate(path: Path, events: int, seed: int) -> dict[str, Any]:
    from adapters.eventlog.store import MailLog, sqlite_env

    app = MailLog(env=sqlite_env(str(path), "normal"))
    sim = LogSimulator(accounts=max(4, min(64, events // 15_000)), seed=seed)
    kinds: Counter[str] = Counter()
    saved = 0
    t0 = time.perf_counter()
    pending: list[Any] = []
    with _progress() as progress:
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
            "mailboxes": len(sim.accounts) * len(_FOLDERS), "log_schema": LOG_SCHEMA,
            "event_kinds": dict(kinds.most_common()), "generated_in_s": round(seconds, 1),
            "generated_events_per_s": _rate(saved, seconds), "seed": seed}


def open_reader(events_path: Path) -> Any:
    """A ``Letterlog`` on the log alone (no read models opened, nothing caught up)."""
    from adapters.bootstrap import letterlog
    from adapters.eventlog.store import open_log, sqlite_env
    from adapters.payloads.memory import InMemoryPayloadStore
    from adapters.settings import load_settings

    settings = load_settings(data=events_path.parent, durability="normal", event_store="sqlite")
    log = open_log(sqlite_env(str(events_path), "normal"))
    return letterlog(settings, log=log, payloads=InMemoryPayloadStore(), read_models=False)


def select_unpack(events_path: Path, progress: Callable[[int], None] | None = None) -> int:
    """Events read with one plain ``SELECT`` and their state unpacked by msgpack (with
    letterlog's extension types), building no event object: what any rebuild of this log
    costs at least. Returns how many were read."""
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


def _warm(path: Path) -> None:
    """Reads the file once so that neither measured pass pays for a cold page cache."""
    with open(path, "rb") as fh:
        while fh.read(1 << 24):
            pass


# -- store wrappers ------------------------------------------------------------------------------


class _Recorder:
    """Wraps a store's ``apply`` and ``load``: keeps (a copy of) each applied batch, counts
    what was written and the time spent writing."""

    def __init__(self, store: Any, keep: bool) -> None:
        self.batches: list[list[Any]] = []
        self.seconds = 0.0
        self.puts = 0
        self.deletes = 0
        self._apply = store.apply
        self._load = getattr(store, "load", None)
        self._keep = keep
        store.apply = self.apply
        if self._load is not None:
            store.load = self.load

    def apply(self, mutations: Iterable[Any]) -> None:
        from projections.tablestore import Put

        batch = list(mutations)
        puts = sum(1 for m in batch if type(m) is Put)
        self.puts += puts
        self.deletes += len(batch) - puts
        if self._keep:
            self.batches.append(batch)
        t0 = time.perf_counter()
        self._apply(batch)
        self.seconds += time.perf_counter() - t0

    def load(self, loads: Any, mutations: Iterable[Any] = ()) -> None:
        from projections.tablestore import Put

        batch = list(mutations)
        puts = sum(1 for m in batch if type(m) is Put)
        self.puts += puts + sum(len(load.cells) for load in loads)
        self.deletes += len(batch) - puts + sum(len(load.tombs) for load in loads)
        t0 = time.perf_counter()
        assert self._load is not None
        self._load(loads, batch)
        self.seconds += time.perf_counter() - t0


def _raw_connection(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"PRAGMA synchronous={SYNCHRONOUS}")
    con.execute("PRAGMA cache_size=-32768")  # as SqliteTableStore
    return con


def raw_cell_writes(batches: list[list[Any]], path: Path, *,
                    binding: str = "bytes") -> dict[str, Any]:
    """Writes the same cells (and deletes) with plain SQL: one transaction per batch, one
    ``executemany`` per table and kind, into ``(row, col, value, version) WITHOUT ROWID``
    tables. Returns cells/s; the tuples are built before the clock starts.

    ``binding="bytearray"`` passes the blobs as ``bytearray``: Python 3.11's ``sqlite3``
    sends every ``bytes`` parameter through its adapter lookup (``_need_adapt`` exempts
    int, float, str and bytearray, not bytes), which builds a key tuple and formats an
    ``AttributeError`` for the failed ``__adapt__`` lookup -- ~40 % of a raw insert's CPU."""
    from projections.tablestore import DeleteColumn, DeleteRow, Put

    blob: Callable[[bytes], Any] = bytearray if binding == "bytearray" else bytes
    if binding not in ("bytes", "bytearray"):
        raise ValueError(f"binding: {binding!r} is not 'bytes' or 'bytearray'")

    prepared: list[list[tuple[str, list[Any], list[Any], list[Any]]]] = []
    tables: set[str] = set()
    cells = 0
    for batch in batches:
        by_table: dict[str, tuple[list[Any], list[Any], list[Any]]] = {}
        for m in batch:
            slot = by_table.get(m.table)
            if slot is None:
                slot = by_table[m.table] = ([], [], [])
            if type(m) is Put:
                slot[0].append((blob(m.row), blob(m.column), blob(m.value), m.version))
                cells += 1
            elif type(m) is DeleteColumn:
                slot[1].append((blob(m.row), blob(m.column), m.version))
            elif type(m) is DeleteRow:
                slot[2].append((blob(m.row), m.version))
        tables.update(by_table)
        prepared.append([(t, *lists) for t, lists in by_table.items()])
    con = _raw_connection(path)
    sql: dict[str, tuple[str, str, str]] = {}
    for t in sorted(tables):
        q = '"' + ("raw:" + t).replace('"', '""') + '"'
        con.execute(f"CREATE TABLE {q} (row BLOB NOT NULL, col BLOB NOT NULL, value BLOB NOT NULL,"
                    " version INTEGER NOT NULL, PRIMARY KEY (row, col)) WITHOUT ROWID")
        sql[t] = (f"INSERT OR REPLACE INTO {q} (row, col, value, version) VALUES (?, ?, ?, ?)",
                  f"DELETE FROM {q} WHERE row = ? AND col = ? AND version <= ?",
                  f"DELETE FROM {q} WHERE row = ? AND version <= ?")
    clock = _Clock()
    for batch_tables in prepared:
        con.execute("BEGIN IMMEDIATE")
        for table, puts, col_deletes, row_deletes in batch_tables:
            ins, del_col, del_row = sql[table]
            if puts:
                con.executemany(ins, puts)
            if col_deletes:
                con.executemany(del_col, col_deletes)
            if row_deletes:
                con.executemany(del_row, row_deletes)
        con.execute("COMMIT")
    seconds = clock.stop()
    con.close()
    return {"cells": cells, "transactions": len(prepared), "seconds": round(seconds, 3),
            "cells_per_s": _rate(cells, seconds), "cpu_share": clock.share}


# -- 1. catch-up projection ----------------------------------------------------------------------


def bench_project(events: int = 200_000, plot: Path | None = None) -> dict[str, Any]:
    """Live-mode projection of a realistic log into a fresh SqliteTableStore vs raw SQLite
    writes of the same cells in equal-sized transactions."""
    from adapters.tables.sqlite import SqliteTableStore
    from projections.registry import ALL
    from projections.runner import ProjectionRunner

    log_path, meta = bench_log(events)
    reader = open_reader(log_path)
    _warm(log_path)
    load_before = _load()
    with _progress() as progress, tempfile.TemporaryDirectory(prefix="letterlog-bench-") as tmp:
        task = progress.add_task("reading + decoding the log", total=reader.max_position())
        decode = _Clock()
        items = list(_counted(reader.events(), progress, task))
        decode_s = decode.stop()
        reader.close()
        n = len(items)

        store = SqliteTableStore(Path(tmp) / "tables.sqlite", synchronous=SYNCHRONOUS)
        runner = ProjectionRunner(store, ALL)
        runner.create_tables()
        recorder = _Recorder(store, keep=True)
        task = progress.add_task("projecting (live mode)", total=len(items))
        project = _Clock()
        runner.apply_events(_counted(items, progress, task))
        project_s = project.stop()
        store.close()
        del items

        task = progress.add_task("raw SQLite: same cells", total=None)
        raw = raw_cell_writes(recorder.batches, Path(tmp) / "raw.sqlite")
        strict = raw_cell_writes(recorder.batches, Path(tmp) / "raw-bytearray.sqlite",
                                 binding="bytearray")
        progress.update(task, completed=raw["cells"])
    cells_per_s = _rate(recorder.puts, project_s)
    result: dict[str, Any] = {
        "benchmark": "project",
        "events": n,
        "log": {k: meta[k] for k in ("key", "messages_delivered", "accounts", "cached")},
        "event_kinds": meta["event_kinds"],
        "table_store": "SqliteTableStore",
        "sqlite_synchronous": SYNCHRONOUS,
        "mode": "live",
        "batch_size": runner.batch_size,
        "batches": len(recorder.batches),
        "cells_written": recorder.puts,
        "deletes_written": recorder.deletes,
        "cells_per_event": round(recorder.puts / n, 2) if n else 0,
        "decode_events_per_s": _rate(n, decode_s),
        "project_events_per_s": _rate(n, project_s),
        "project_cells_per_s": cells_per_s,
        "project_write_share": round(recorder.seconds / project_s, 3) if project_s else 0,
        "catch_up_events_per_s": _rate(n, decode_s + project_s),
        "raw_sqlite_cells_per_s": raw["cells_per_s"],
        "raw_sqlite_transactions": raw["transactions"],
        "raw_sqlite_bytearray_cells_per_s": strict["cells_per_s"],
        "ratio": round(cells_per_s / raw["cells_per_s"], 3) if raw["cells_per_s"] else 0.0,
        "ratio_vs_bytearray_raw": (round(cells_per_s / strict["cells_per_s"], 3)
                                   if strict["cells_per_s"] else 0.0),
        "target_ratio": TARGET_PROJECT_RATIO,
        "cpu_share": {"decode": decode.share, "project": project.share, "raw": raw["cpu_share"],
                      "raw_bytearray": strict["cpu_share"]},
        "load_avg_1m": [load_before, _load()],
        "cpu_count": os.cpu_count(),
    }
    result["meets_target"] = result["ratio"] >= TARGET_PROJECT_RATIO
    if plot is not None:
        _bar_panels(plot, f"catch-up projection, {n:,} events, SQLite synchronous={SYNCHRONOUS}", [
            ("cells written / s", {"letterlog projection": cells_per_s,
                                   "raw SQLite executemany": raw["cells_per_s"],
                                   "raw, blobs as bytearray": strict["cells_per_s"]}),
            ("events / s", {"letterlog decode": result["decode_events_per_s"],
                            "letterlog project": result["project_events_per_s"],
                            "letterlog decode + project": result["catch_up_events_per_s"]}),
        ])
        result["plot"] = str(plot)
    return result


# -- 2. rebuild ----------------------------------------------------------------------------------


def _max_rss_mb() -> float:
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _rebuild_host(store: Any, reader: Any) -> Any:
    """A ``ProjectionHost`` on ``store`` reading the log of ``reader``: what ``letterlog
    rebuild --all`` runs (fold into fresh tables, catch up, switch the catalog)."""
    from adapters.readside.host import ProjectionHost

    return ProjectionHost(store, reader.events, None, reader.max_position)


def bench_rebuild(events: int = 1_000_000, plot: Path | None = None) -> dict[str, Any]:
    """``ProjectionHost.rebuild`` of every projection from the log into a fresh
    SqliteTableStore vs reading and decoding the same log with no projection, through the
    same reader (``Letterlog.events``), in the same run."""
    from adapters.tables.sqlite import SqliteTableStore
    from projections.registry import ALL

    log_path, meta = bench_log(events)
    reader = open_reader(log_path)
    _warm(log_path)
    total = reader.max_position()
    load_before = _load()
    with _progress() as progress, tempfile.TemporaryDirectory(prefix="letterlog-bench-") as tmp:
        task = progress.add_task("baseline: read + decode", total=total)
        read = _Clock()
        n = 0
        for _ in _counted(reader.events(), progress, task):
            n += 1
        read_s = read.stop()

        task = progress.add_task("floor: SELECT + msgpack unpack, no events", total=total)
        floor = _Clock()
        unpacked = select_unpack(log_path, lambda done: progress.update(task, completed=done))
        floor_s = floor.stop()

        task = progress.add_task("reference: eventsourcing mapper read + decode", total=total)
        mapper = _Clock()
        for _ in _counted(mapper_events(reader), progress, task):
            pass
        mapper_s = mapper.stop()

        store = SqliteTableStore(Path(tmp) / "tables.sqlite", synchronous=SYNCHRONOUS)
        host = _rebuild_host(store, reader)
        recorder = _Recorder(store, keep=False)
        task = progress.add_task("rebuild: read + decode + fold + write + switch", total=total)
        rebuild = _Clock()
        report = host.rebuild(progress=lambda done, _: progress.update(task, completed=done))
        rebuild_s = rebuild.stop()
        position = report["position"]
        host.close()
    reader.close()
    rebuild_rate = _rate(n, rebuild_s)
    read_rate = _rate(n, read_s)
    project_s = max(0.0, rebuild_s - read_s - recorder.seconds)
    result: dict[str, Any] = {
        "benchmark": "rebuild",
        "events": n,
        "position": position,
        "log": {k: meta[k] for k in ("key", "messages_delivered", "accounts", "cached")},
        "projections": [p.name for p in ALL],
        "mode": "fold",
        "entry_point": "ProjectionHost.rebuild",
        "table_store": "SqliteTableStore",
        "sqlite_synchronous": SYNCHRONOUS,
        "rebuild_events_per_s": rebuild_rate,
        "rebuild_seconds": round(rebuild_s, 2),
        "read_decode_events_per_s": read_rate,
        "read_decode_seconds": round(read_s, 2),
        "mapper_read_decode_events_per_s": _rate(n, mapper_s),
        "select_unpack_events_per_s": _rate(unpacked, floor_s),
        "cells_written": recorder.puts,
        "deletes_written": recorder.deletes,
        "write_seconds": round(recorder.seconds, 2),
        "project_fold_seconds": round(project_s, 2),
        "split": {k: round(v / rebuild_s, 3) if rebuild_s else 0.0 for k, v in (
            ("read_decode", read_s), ("project_fold", project_s),
            ("write", recorder.seconds))},
        "ratio": round(rebuild_rate / read_rate, 3) if read_rate else 0.0,
        "target_events_per_s": TARGET_REBUILD_EVENTS_PER_S,
        "cpu_share": {"read_decode": read.share, "mapper": mapper.share,
                      "rebuild": rebuild.share},
        "max_rss_mb": _max_rss_mb(),
        "load_avg_1m": [load_before, _load()],
        "cpu_count": os.cpu_count(),
    }
    result["meets_target"] = rebuild_rate >= TARGET_REBUILD_EVENTS_PER_S
    # Every rebuild reads and unpacks each event at least once: what the target leaves per
    # event beyond that floor is all projectors, fold and writes may take to meet it.
    floor_rate = result["select_unpack_events_per_s"]
    result["target_budget_beyond_floor_us_per_event"] = round(
        1e6 / TARGET_REBUILD_EVENTS_PER_S - 1e6 / floor_rate, 2) if floor_rate else None
    result["write_us_per_event"] = round(recorder.seconds / n * 1e6, 2) if n else 0.0
    if plot is not None:
        _bar_panels(plot, f"rebuild of all projections from {n:,} events (one process)", [
            ("events / s", {"letterlog rebuild (fold)": rebuild_rate,
                            "read + decode only": read_rate,
                            "floor: SELECT + unpack only": result["select_unpack_events_per_s"],
                            "eventsourcing mapper read + decode": result[
                                "mapper_read_decode_events_per_s"],
                            "target": TARGET_REBUILD_EVENTS_PER_S}),
            ("seconds", {"read + decode": read_s,
                         "project + fold": project_s,
                         "write": recorder.seconds}),
        ])
        result["plot"] = str(plot)
    return result


def profile_rebuild(events: int = 1_000_000, limit: int | None = 200_000,
                    top: int = 40) -> str:
    """cProfile of a fold rebuild (``ProjectionHost.rebuild``) of the first ``limit`` events
    of the ``events`` log."""
    from adapters.tables.sqlite import SqliteTableStore

    log_path, _ = bench_log(events)
    reader = open_reader(log_path)
    _warm(log_path)
    if limit is not None:
        reader.max_position = lambda: min(limit, reader.log.recorder.max_notification_id())
    with tempfile.TemporaryDirectory(prefix="letterlog-bench-") as tmp:
        store = SqliteTableStore(Path(tmp) / "tables.sqlite", synchronous=SYNCHRONOUS)
        host = _rebuild_host(store, reader)
        profiler = cProfile.Profile()
        profiler.enable()
        host._fold(store, host.runner.projections, lambda t: t, reader.max_position(), None)
        profiler.disable()
        host.close()
    reader.close()
    out = StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


# -- 3. queries ----------------------------------------------------------------------------------


@dataclass
class _QueryFixture:
    account_id: UUID
    mailbox_id: UUID
    listed: list[int]  # UIDs of listed messages, ascending
    messages: int
    unread: int
    octets: int
    events: int


def _query_history(messages: int, seed: int) -> tuple[Iterator[tuple[int, Any]], _QueryFixture]:
    """Events of one big INBOX (plus neighbours): deliveries in groups, most read, some
    labelled, a few soft-deleted; positions from 1."""
    rng = random.Random(seed)
    factory = MailFactory(rng)
    start = datetime(2024, 1, 8, 7, 0, tzinfo=UTC)

    def open_account(address: str) -> tuple[Any, Any]:
        acc = Account.open(address)
        mailbox_id, uidvalidity = acc.register_mailbox("INBOX", Role.INBOX)
        box = Mailbox.create(mailbox_id, acc.id, "INBOX", "inbox", uidvalidity)
        acc.define_labels(frozenset(LABELS))
        return acc, box

    main_acc, main_box = open_account(QUERY_ACCOUNT)
    fixture = _QueryFixture(main_acc.id, main_box.id, [], 0, 0, 0, 0)
    neighbours = [open_account(f"neighbour{i}@{_DOMAIN}") for i in range(4)]
    plan = [(main_acc, main_box, messages),
            *((a, b, max(1, messages // 40)) for a, b in neighbours)]

    def history() -> Iterator[Any]:
        for acc, box in [(main_acc, main_box), *neighbours]:
            yield from acc.collect_events()
            yield from box.collect_events()
        now = start
        for acc, box, count in plan:
            main = box is main_box
            done = 0
            while done < count:
                k = min(count - done, rng.randint(1, 200))
                now += timedelta(minutes=rng.randint(1, 30))
                group = []
                for _ in range(k):
                    mail = factory.make(acc.id, acc.address, now,
                                        attachment=rng.random() < 0.08)
                    labels = [rng.choice(LABELS)] if rng.random() < 0.1 else []
                    group.append((mail, new_message_id(), [], labels))
                msgs = deliver(box, group, now)
                yield from box.collect_events()
                for msg in msgs:
                    yield from msg.collect_events()
                for msg in msgs:
                    r = rng.random()
                    if r < 0.02:
                        msg.soft_delete(now + timedelta(days=30))
                    else:
                        if r < 0.72:
                            msg.change_flags(frozenset({"\\Seen"}))
                        if main:
                            fixture.listed.append(msg.uid)
                            fixture.messages += 1
                            fixture.octets += msg.size
                            fixture.unread += "\\Seen" not in msg.flags
                    yield from msg.collect_events()
                done += k

    def numbered() -> Iterator[tuple[int, Any]]:
        for position, event in enumerate(history(), 1):
            fixture.events = position
            yield position, event

    return numbered(), fixture


def query_store(path: Path, messages: int, progress: Any = None) -> tuple[Any, _QueryFixture]:
    """A SqliteTableStore at ``path`` holding every read model of ``_query_history``."""
    from adapters.tables.sqlite import SqliteTableStore
    from projections.registry import ALL
    from projections.runner import ProjectionRunner

    store = SqliteTableStore(path, synchronous=SYNCHRONOUS)
    runner = ProjectionRunner(store, ALL)
    runner.create_tables()
    items, fx = _query_history(messages, seed=3)
    if progress is not None:
        task = progress.add_task(f"projecting a {messages:,}-message mailbox", total=None)
        items = _counted(items, progress, task)
    runner.apply_events(items, fold=True)
    store.checkpoint("TRUNCATE")
    return store, fx


def _percentiles(ns: list[int]) -> dict[str, float]:
    s = sorted(ns)

    def q(p: float) -> float:
        return round(s[min(len(s) - 1, max(0, math.ceil(p * len(s)) - 1))] / 1e6, 4)

    return {"p50_ms": q(0.50), "p99_ms": q(0.99), "max_ms": round(s[-1] / 1e6, 4)}


def _timed(samples: int, call: Callable[[int], Any], check: Callable[[int, Any], None]
           ) -> dict[str, float]:
    """Times ``call(i)`` ``samples`` times, checking each result right after its call (outside
    the timed window) and dropping it, as a caller would: results kept for checking later
    would grow the heap and charge the cyclic GC's full collections to the queries."""
    for i in range(min(50, samples)):  # warm-up (statement cache, pages)
        check(i, call(i))
    gc.collect()
    ns: list[int] = []
    clock = time.perf_counter_ns
    for i in range(samples):
        t0 = clock()
        got = call(i)
        ns.append(clock() - t0)
        check(i, got)
    return _percentiles(ns)


@dataclass
class _QueryChecks:
    """What every timed read must return, from the fixture's history."""

    fx: _QueryFixture
    befores: list[int]

    def page(self, before: int | None) -> list[int]:
        listed = self.fx.listed
        i = len(listed) if before is None else bisect.bisect_left(listed, before)
        return list(reversed(listed[max(0, i - 50):i]))

    def newest(self, i: int, got: list[Any]) -> None:
        self._uids(got, self.page(None), "newest-50 listing")

    def before(self, i: int, got: list[Any]) -> None:
        self._uids(got, self.page(self.befores[i]), f"page before UID {self.befores[i]}")

    @staticmethod
    def _uids(got: list[Any], expected: list[int], what: str) -> None:
        uids = [m.uid for m in got]
        if uids != expected:
            raise AssertionError(f"{what}: got UIDs {uids[:5]}..., expected {expected[:5]}...")

    def counts(self, i: int, got: Any) -> None:
        found = (got["messages"], got["unread"], got["bytes"]) if isinstance(got, dict) else (
            got.messages, got.unread, got.bytes)
        expected = (self.fx.messages, self.fx.unread, self.fx.octets)
        if found != expected:
            raise AssertionError(f"counters: got {found}, expected {expected}")

    def all_counts(self, i: int, got: Any) -> None:
        self.counts(i, got[0][self.fx.mailbox_id])

    def account_counts(self, i: int, got: dict[str, Any]) -> None:
        self.counts(i, got["mailboxes"]["INBOX"])

    def status(self, i: int, got: dict[str, Any]) -> None:
        self.counts(i, {"messages": got["messages"], "unread": got["unseen"],
                        "bytes": got["bytes"]})


def _time_queries(store: Any, checks: _QueryChecks, samples: int) -> dict[str, Any]:
    """The query functions the embedded API calls, on the table store (same cells as raw)."""
    from projections import queries as q

    mb, acc, befores = checks.fx.mailbox_id, checks.fx.account_id, checks.befores
    return {
        "newest_50": _timed(samples, lambda i: q.mailbox_messages(store, mb, limit=50),
                            checks.newest),
        "random_page_50": _timed(
            samples, lambda i: q.mailbox_messages(store, mb, limit=50, before_uid=befores[i]),
            checks.before),
        "mailbox_counts": _timed(samples, lambda i: q.mailbox_counts(store, acc, mb),
                                 checks.counts),
        "counters_row": _timed(samples, lambda i: q.counters(store, acc), checks.all_counts),
    }


def _time_embedded(root: Path, checks: _QueryChecks, samples: int) -> dict[str, Any]:
    """What a user calls: ``Letterlog.messages`` / ``counters`` / ``mailbox_status`` on a
    ``Letterlog`` opened on the benchmark's tables (name lookups, validation and all)."""
    from adapters.embedded import Letterlog

    befores = checks.befores
    with Letterlog.open(root, event_store="sqlite", table_store="embedded",
                        durability="normal") as mail:
        return {
            "messages_newest_50": _timed(
                samples, lambda i: mail.messages(QUERY_ACCOUNT, "INBOX", limit=50),
                checks.newest),
            "messages_page_50": _timed(
                samples, lambda i: mail.messages(QUERY_ACCOUNT, "INBOX", limit=50,
                                                 before_uid=befores[i]), checks.before),
            "mailbox_status": _timed(samples, lambda i: mail.mailbox_status(QUERY_ACCOUNT),
                                     checks.status),
            "counters": _timed(samples, lambda i: mail.counters(QUERY_ACCOUNT),
                               checks.account_counts),
        }


def _listing_sql(columns: list[bytes]) -> str:
    from projections import names as pn

    col_in = f" AND col IN ({', '.join('?' * len(columns))})"
    return (f'SELECT row, col, value, version FROM "cells:{pn.MESSAGES}" '
            f"WHERE row >= ? AND row < ?{col_in} ORDER BY row, col LIMIT ?")


def _time_raw(path: Path, checks: _QueryChecks, samples: int) -> dict[str, Any]:
    """Plain SELECTs of the cells letterlog reads, on the same file: 50 rows of the listing
    columns; the mailbox's count cell; the account's count family (``c:``)."""
    from projections import names as pn
    from projections import queries as q
    from projections.keys import account_row, message_row, messages_prefix
    from projections.tablestore import key_range

    fx, befores = checks.fx, checks.befores
    columns = list(q._LISTING_COLUMNS)
    listing_sql, cells_50 = _listing_sql(columns), 50 * len(columns)
    high = key_range(prefix=messages_prefix(fx.mailbox_id), start=None, stop=None,
                     reverse=False).high
    counters_sql = f'SELECT col, value, version FROM "cells:{pn.COUNTERS}" WHERE row = ?'
    family = pn.CT_COUNTS
    row, column = account_row(fx.account_id), pn.CT_MAILBOX + fx.mailbox_id.bytes
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA cache_size=-32768")
    try:
        def listing(low: bytes) -> list[Any]:
            return con.execute(listing_sql, [low, high, *columns, cells_50]).fetchall()

        def full(i: int, got: list[Any]) -> None:
            if len(got) != cells_50:
                raise AssertionError(f"raw listing: {len(got)} cells, expected {cells_50}")

        return {
            "newest_50": _timed(samples, lambda i: listing(messages_prefix(fx.mailbox_id)),
                                full),
            "random_page_50": _timed(
                samples, lambda i: listing(message_row(fx.mailbox_id, befores[i] - 1)),
                lambda i, got: None),
            "mailbox_counts": _timed(samples, lambda i: con.execute(
                counters_sql + " AND col = ?", (row, column)).fetchall(), lambda i, got: None),
            "counters_row": _timed(samples, lambda i: con.execute(
                counters_sql + " AND col >= ? AND col < ?",
                (row, family, family[:-1] + b";")).fetchall(), lambda i, got: None),
        }
    finally:
        con.close()


def _counters_row_cells(store: Any, fx: _QueryFixture) -> dict[str, int]:
    """How the benchmark account's counters row divides: counts read, markers not."""
    from projections import names as pn
    from projections.keys import account_row

    row = store.get(pn.COUNTERS, account_row(fx.account_id))
    markers = sum(1 for column in row if column.startswith(pn.CT_DELETED))
    return {"counts": len(row) - markers, "soft_delete_markers": markers}


def bench_query(messages: int = 100_000, samples: int = 2000,
                plot: Path | None = None) -> dict[str, Any]:
    """p50/p99 of listings and counter reads in a ``messages``-message mailbox on the
    embedded SqliteTableStore -- through the query functions and through the ``Letterlog``
    API -- vs raw SELECTs of the same cells on the same file."""
    from projections import queries as q

    rng = random.Random(7)
    with _progress() as progress, tempfile.TemporaryDirectory(prefix="letterlog-bench-") as tmp:
        path = Path(tmp) / "tables.sqlite"
        t0 = time.perf_counter()
        store, fx = query_store(path, messages, progress)
        build_s = time.perf_counter() - t0
        load_before = _load()
        checks = _QueryChecks(fx, [rng.randint(2, fx.listed[-1]) for _ in range(samples)])
        task = progress.add_task("timing queries", total=None)
        row_cells = _counters_row_cells(store, fx)
        results = _time_queries(store, checks, samples)
        store.close()
        embedded = _time_embedded(Path(tmp), checks, samples)
        raw = _time_raw(path, checks, samples)
        progress.update(task, completed=samples)
        size = path.stat().st_size

    result: dict[str, Any] = {
        "benchmark": "query",
        "messages": messages,
        "listed_messages": fx.messages,
        "events_projected": fx.events,
        "build_seconds": round(build_s, 2),
        "table_file_mb": round(size / 1e6, 1),
        "samples": samples,
        "table_store": "SqliteTableStore",
        "raw_listing_cells": 50 * len(q._LISTING_COLUMNS),
        "counters_row_cells": row_cells,
        "newest_uid": fx.listed[-1],
        "verified": "every timed listing and counters read was checked against the history",
        "letterlog": results,
        "embedded_api": embedded,
        "raw_sqlite": raw,
        "ratio_p50": {k: round(raw[k]["p50_ms"] / results[k]["p50_ms"], 3)
                      if results[k]["p50_ms"] else 0.0 for k in results},
        "listing_p99_vs_raw": round(results["newest_50"]["p99_ms"]
                                    / raw["newest_50"]["p99_ms"], 3),
        "target_listing_p99_ms": TARGET_LISTING_P99_MS,
        "target_listing_p99_vs_raw": TARGET_LISTING_P99_VS_RAW,
        "target_counters_p99_ms": TARGET_COUNTERS_P99_MS,
        "load_avg_1m": [load_before, _load()],
        "cpu_count": os.cpu_count(),
    }
    result["meets_targets"] = (_meets_query_targets(results, embedded)
                               and result["listing_p99_vs_raw"] <= TARGET_LISTING_P99_VS_RAW)
    if plot is not None:
        _plot_queries(plot, messages, samples, results, embedded, raw)
        result["plot"] = str(plot)
    return result


def _meets_query_targets(results: dict[str, Any], embedded: dict[str, Any]) -> bool:
    def worst(side: dict[str, Any], names: tuple[str, ...]) -> float:
        return max(side[name]["p99_ms"] for name in names)

    listing = max(worst(results, ("newest_50", "random_page_50")),
                  worst(embedded, ("messages_newest_50", "messages_page_50")))
    counters = max(worst(results, ("mailbox_counts", "counters_row")),
                   worst(embedded, ("mailbox_status", "counters")))
    return listing <= TARGET_LISTING_P99_MS and counters <= TARGET_COUNTERS_P99_MS


_EMBEDDED_OF = {"newest_50": "messages_newest_50", "random_page_50": "messages_page_50",
                "mailbox_counts": "mailbox_status", "counters_row": "counters"}


def _plot_queries(plot: Path, messages: int, samples: int, results: dict[str, Any],
                  embedded: dict[str, Any], raw: dict[str, Any]) -> None:
    panels = []
    for k in results:
        api = embedded[_EMBEDDED_OF[k]]
        panels.append((f"{k} (ms)", {
            "letterlog p50": results[k]["p50_ms"], "letterlog p99": results[k]["p99_ms"],
            f"letterlog API {_EMBEDDED_OF[k]} p50": api["p50_ms"],
            f"letterlog API {_EMBEDDED_OF[k]} p99": api["p99_ms"],
            "raw SQLite p50": raw[k]["p50_ms"], "raw SQLite p99": raw[k]["p99_ms"]}))
    _bar_panels(plot, f"queries on a {messages:,}-message mailbox ({samples} samples)",
                panels, fmt="{:,.3f}")


# -- plots ---------------------------------------------------------------------------------------


def _bar_panels(path: Path, title: str, panels: list[tuple[str, dict[str, float]]],
                fmt: str = "{:,.0f}") -> None:
    """Horizontal bars, one panel per unit; letterlog's bars blue, baselines grey."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sum(len(values) for _, values in panels)
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 1.1 + 0.42 * rows + 0.5 * len(panels)),
                             squeeze=False)
    for ax, (unit, values) in zip(axes[:, 0], panels, strict=True):
        names = list(values)
        colours = ["#3465a4" if n.startswith("letterlog") else
                   "#cc0000" if n == "target" else "#888a85" for n in names]
        ax.barh(names, [values[n] for n in names], color=colours)
        for i, n in enumerate(names):
            ax.text(values[n], i, " " + fmt.format(values[n]), va="center", fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(unit)
        ax.margins(x=0.18)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
