"""``letterlog bench ingest --rules N``: what event rules cost a delivery, and the dispatch
rate to a local endpoint, measured in one run.

The same messages are delivered one per command (the single-delivery leg of ``bench
ingest``), to stores that differ only in their rules: none, and N rules of which about one in
ten applies to a message (each watches INBOX, includes on the subject, excludes on the
sender; every fourth filters on a named header, so the header block is parsed), with
``LETTERLOG_DURABILITY=normal`` by default: at ``full`` one fsync per delivery (~10 ms here)
hides a cost of microseconds in its noise. Reported:
deliveries/s and µs per delivery for both, the difference per delivery (what the rules cost),
and the evaluation alone (``domain.rules.decide`` on the same messages, in memory). Then the
raised events are handed to a local HTTP endpoint (stdlib ``http.server`` in a thread,
answering 200) by ``dispatch_pending``: events/s, each recorded Processing and Completed.
"""

from __future__ import annotations

import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapters.demo.benchmail import bench_messages
from adapters.demo.mailgen import PEOPLE

if TYPE_CHECKING:
    from adapters.face import Store


class _Ok(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def _rules(store: Any, n: int, url: str) -> None:
    for i in range(n):
        include = [f"subject:(?i)\\b{chr(97 + i % 26)}{i % 10}"] if i % 10 else ["subject:."]
        if i % 4 == 3:
            include.append(f"header:X-Bench-{i}:^yes$")
        store.create_rule(f"rule-{i:03d}", mailboxes=["INBOX"], include=include,
                          exclude=[f"sender:^nobody{i}@"], webhook=url,
                          properties={"n": str(i)})


def _deliveries(root: Path, name: str, blobs: list[bytes], rules: int, url: str,
                durability: str) -> tuple[float, Any]:
    from adapters.embedded import Letterlog

    store = Letterlog.open(root / name, durability=durability)
    _rules(store, rules, url)
    recipients = [f"{p}@example.org" for p in PEOPLE]
    for r in recipients:
        store.create_mailbox(r, "Bench", create_account=True)
    t0 = time.perf_counter()
    for i, blob in enumerate(blobs):
        store.deliver(account=recipients[i % len(recipients)], raw=blob)
    return time.perf_counter() - t0, store


def _evaluation_us(store: Store, blobs: list[bytes]) -> float:
    """``decide`` alone on each message (the command side's evaluation, no I/O)."""
    from domain.rfc5322 import inspect_message
    from domain.rulecommands import header_view, view_of
    from domain.rules import decide

    book = store.rule_book()
    views = []
    for blob in blobs:
        facts = inspect_message(blob)
        views.append(view_of(facts.envelope.from_, facts.envelope.subject,
                             facts.attachment_names, header_view(blob)))
    t0 = time.perf_counter()
    for view in views:
        decide(book, "INBOX", view, store.rule_evaluation())
    return (time.perf_counter() - t0) / len(views) * 1e6


def bench_rules(messages: int = 1000, rules: int = 10, *,
                durability: str = "normal") -> dict[str, Any]:
    blobs = bench_messages(messages)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    server.daemon_threads = True
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with tempfile.TemporaryDirectory(prefix="letterlog-bench-rules-") as tmp:
            root = Path(tmp)
            base_s, base = _deliveries(root, "none", blobs, 0, url, durability)
            base.close()
            with_s, store = _deliveries(root, "rules", blobs, rules, url, durability)
            try:
                evaluation = _evaluation_us(store, blobs) if rules else 0.0
                raised = len(store.rule_events())
                t0 = time.perf_counter()
                counts = store.dispatch_pending()
                dispatch_s = time.perf_counter() - t0
            finally:
                store.close()
    finally:
        server.shutdown()
        server.server_close()
    per = {0: base_s / messages * 1e6, rules: with_s / messages * 1e6}
    return {
        "benchmark": "ingest", "leg": "rules", "messages": messages, "rules": rules,
        "durability": durability,
        "deliveries_per_s": {"0 rules": round(messages / base_s, 1),
                             f"{rules} rules": round(messages / with_s, 1)},
        "us_per_delivery": {"0 rules": round(per[0], 1), f"{rules} rules": round(per[rules], 1)},
        "rules_cost_us_per_delivery": round(per[rules] - per[0], 1),
        "evaluation_only_us_per_delivery": round(evaluation, 1),
        "events_raised": raised,
        "dispatch": {"events": counts["dispatched"], "complete": counts["complete"],
                     "seconds": round(dispatch_s, 3),
                     "events_per_s": round(counts["dispatched"] / dispatch_s, 1)
                     if dispatch_s else None,
                     "endpoint": "local http.server (ThreadingHTTPServer), 200 at once"},
    }
