"""The webhook processing application: a POST of the rule event as JSON, through httpx.

Headers: ``Idempotency-Key`` (the rule event's id: a repeat after a crash or a resend carries
the same one, so the application can drop it) and ``X-Letterlog-Signature``
(``sha256=<hex>``, HMAC-SHA256 of the body with the rule's secret). Each call is bounded
(``LETTERLOG_DISPATCH_TIMEOUT_SECONDS``); a transport error, a timeout, a 408, 429 or 5xx
answer is retried by tenacity with jittered exponential back-off up to
``LETTERLOG_DISPATCH_ATTEMPTS`` calls; any other 4xx is final.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

RETRIED_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Outcome:
    ok: bool
    attempts: int
    reason: str = ""


class _Retry(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class Webhook:
    def __init__(self, *, timeout: float, attempts: int, backoff: float,
                 client: httpx.Client | None = None) -> None:
        self.timeout = timeout
        self.attempts = attempts
        self.backoff = backoff
        self.client = client or httpx.Client(timeout=httpx.Timeout(timeout),
                                             follow_redirects=False)

    def close(self) -> None:
        self.client.close()

    def deliver(self, application: dict[str, Any], document: dict[str, Any],
                secret: str) -> Outcome:
        body = orjson.dumps(document)
        headers = {"Content-Type": "application/json",
                   "Idempotency-Key": str(document["id"]),
                   "X-Letterlog-Signature": signature(secret, body)}
        url = str(application["url"])
        calls = [0]

        def call() -> Outcome:
            calls[0] += 1
            try:
                response = self.client.post(url, content=body, headers=headers)
            except httpx.TimeoutException:
                raise _Retry(f"no answer from {url} within {self.timeout:g} s") from None
            except httpx.TransportError as e:
                raise _Retry(f"{url}: {type(e).__name__}: {e}") from None
            if response.status_code in RETRIED_STATUS:
                raise _Retry(f"{url} answered {response.status_code}")
            if response.is_success:
                return Outcome(True, calls[0])
            return Outcome(False, calls[0], f"{url} answered {response.status_code}")

        retrying = Retrying(
            stop=stop_after_attempt(self.attempts),
            wait=wait_random_exponential(multiplier=self.backoff, max=max(self.backoff, 60.0)),
            retry=retry_if_exception_type(_Retry), reraise=False)
        try:
            result: Outcome = retrying(call)
            return result
        except RetryError as e:
            last = e.last_attempt.exception()
            reason = last.reason if isinstance(last, _Retry) else str(last)
            return Outcome(False, calls[0], reason)
