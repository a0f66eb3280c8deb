"""A real HTTP endpoint for the event rules' tests (stdlib ``http.server`` in a thread).

It answers 500 to the first ``fail_first`` calls, then stalls ``stall_once`` calls longer
than the client's timeout, then answers 200; it records every call (idempotency key, body,
whether the HMAC signature checked out) and the set of keys it accepted once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Endpoint:
    def __init__(self, *, fail_first: int = 0, stall_once: int = 0, stall_seconds: float = 2.0,
                 secret: str | None = None, release: threading.Event | None = None) -> None:
        self.fail_first = fail_first
        self.stall_left = stall_once
        self.stall_seconds = stall_seconds
        self.secret = secret
        self.release = release  # given: the first call waits (a minute at most) until set
        self.calls: list[dict[str, Any]] = []
        self.raw: list[dict[str, Any]] = []  # each call's body and signature, as received
        self.accepted: dict[str, int] = {}  # idempotency key -> times it was answered 200
        self.arrived = threading.Event()
        self.lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                endpoint.handle(self, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def handle(self, h: BaseHTTPRequestHandler, body: bytes) -> None:
        key = h.headers.get("Idempotency-Key", "")
        signed = h.headers.get("X-Letterlog-Signature", "")
        ok_sig = (self.secret is None or hmac.compare_digest(
            signed, "sha256=" + hmac.new(self.secret.encode(), body, hashlib.sha256)
            .hexdigest()))
        with self.lock:
            n = len(self.calls)
            self.calls.append({"key": key, "body": json.loads(body), "signature_ok": ok_sig})
            self.raw.append({"body": body, "signature": signed})
            stall = n >= self.fail_first and self.stall_left > 0
            if stall:
                self.stall_left -= 1
        self.arrived.set()
        if self.release is not None and n == 0:
            self.release.wait(60)
        if n < self.fail_first:
            h.send_response(500)
            h.end_headers()
            return
        if stall:
            threading.Event().wait(self.stall_seconds)
        h.send_response(200)
        h.end_headers()
        h.wfile.write(b"ok")
        with self.lock:
            self.accepted[key] = self.accepted.get(key, 0) + 1

    def __enter__(self) -> Endpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
