"""``letterlog rule``, ``events``, ``dispatcher --once``, ``lag`` and ``bench ingest --rules``
as a user runs them (subprocess, a real data directory, a real HTTP endpoint)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.mta_support import letterlog
from tests.factories import make_mail
from tests.webhook_endpoint import Endpoint


def _json(p: object) -> list[dict[str, object]]:
    return [json.loads(line) for line in p.stdout.splitlines()]  # type: ignore[attr-defined]


def test_rules_events_and_dispatch_from_the_command_line(data: Path, env: dict[str, str],
                                                         tmp_path: Path) -> None:
    with Endpoint(fail_first=1) as hook:
        made = letterlog(env, data, "rule", "create", "inv", "--mailbox", "INBOX",
                         "--include", "subject:(?i)invoice", "--webhook", hook.url,
                         "--property", "team=ap")
        assert made.returncode == 0, made.stderr
        shown = letterlog(env, data, "rule", "show", "inv")
        assert b"include subject /(?i)invoice/" in shown.stdout
        assert b"property team=ap" in shown.stdout
        mail = tmp_path / "m.eml"
        mail.write_bytes(make_mail("Invoice 7"))
        assert letterlog(env, data, "deliver", "--account", "g@example.org",
                         str(mail)).returncode == 0
        (pending,) = _json(letterlog(env, data, "--json", "events", "list", "--status",
                                     "pending"))
        done = letterlog(env, data, "--json", "dispatcher", "--once",
                         timeout=120)
        assert done.returncode == 0, done.stderr
        assert _json(done) == [{"dispatched": 1, "complete": 1, "failed": 0}]
        (event,) = _json(letterlog(env, data, "--json", "events", "show", str(pending["id"])))
        assert event["status"] == "complete" and event["attempts"] == 2
        lag = letterlog(env, data, "lag")
        assert b"rule events   pending 0, processing 0, complete 1, failed 0" in lag.stdout
    disabled = letterlog(env, data, "rule", "disable", "inv")
    assert b"raises nothing" in disabled.stdout
    assert b"disabled (raises nothing)" in letterlog(env, data, "rule", "show", "inv").stdout


def test_mistakes_exit_2_with_one_line_and_write_nothing(data: Path,
                                                         env: dict[str, str]) -> None:
    for args in (("rule", "create", "r", "--include", "subject:(", "--webhook", "http://x"),
                 ("rule", "create", "r", "--webhook", "ftp://x"),
                 ("rule", "create", "r"),
                 ("rule", "create", "r", "--webhook", "http://x", "--property", "novalue"),
                 ("rule", "show", "nope"), ("events", "show", "not-a-uuid"),
                 ("events", "resend")):
        p = letterlog(env, data, *args)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.startswith(b"letterlog: error: ") and p.stderr.count(b"\n") == 1
    assert letterlog(env, data, "rule", "list").stdout == b""


@pytest.mark.bench
def test_bench_ingest_with_rules_prints_json(env: dict[str, str]) -> None:
    p = letterlog(env, Path("/nonexistent"), "bench", "ingest", "--rules", "3",
                  "--messages", "20", "--json", timeout=300)
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["rules"] == 3 and result["events_raised"] >= 20
    assert result["dispatch"]["complete"] == result["events_raised"]


def documented_verify() -> Any:
    """The receiver's ``verify`` exactly as docs/event-rules.md shows it (run, not copied)."""
    text = (Path(__file__).parents[2] / "docs" / "event-rules.md").read_text()
    (block,) = [b.split("```", 1)[0] for b in text.split("```python\n")[1:] if "def verify" in b]
    scope: dict[str, Any] = {}
    exec(compile(block, "docs/event-rules.md", "exec"), scope)  # noqa: S102 - our own docs
    return scope["verify"]


def test_a_receiver_verifies_the_signature_with_the_secret_given_or_shown_once(
        data: Path, env: dict[str, str], tmp_path: Path) -> None:
    verify = documented_verify()
    secret_file = tmp_path / "secret"
    secret_file.write_text("a-secret-the-receiver-holds-too\n")
    mail = tmp_path / "m.eml"
    mail.write_bytes(make_mail("Invoice 7"))
    with Endpoint() as hook:
        made = letterlog(env, data, "--json", "rule", "create", "inv", "--webhook", hook.url,
                         "--secret-file", str(secret_file))
        assert made.returncode == 0 and "secret" not in _json(made)[0], made.stdout
        assert letterlog(env, data, "deliver", "--account", "g@example.org",
                         str(mail)).returncode == 0
        assert letterlog(env, data, "dispatcher", "--once", timeout=120).returncode == 0
        (call,) = hook.raw
        assert verify("a-secret-the-receiver-holds-too", call["body"], call["signature"])
        assert not verify("another-secret-altogether", call["body"], call["signature"])

        rotated = letterlog(env, data, "rule", "secret", "inv")
        assert rotated.returncode == 0, rotated.stderr
        new = rotated.stdout.decode().strip().splitlines()[-1]  # shown this once
        assert len(new) == 64 and new not in letterlog(env, data, "--json", "rule",
                                                       "show", "inv").stdout.decode()
        assert letterlog(env, data, "events", "resend", "--status", "complete").returncode == 0
        assert letterlog(env, data, "dispatcher", "--once", timeout=120).returncode == 0
        resent = hook.raw[1]
        assert verify(new, resent["body"], resent["signature"])
        assert not verify("a-secret-the-receiver-holds-too", resent["body"],
                          resent["signature"])
    secret_file.write_text("short\n")
    refused = letterlog(env, data, "rule", "secret", "inv", "--secret-file", str(secret_file))
    assert refused.returncode == 2 and refused.stderr.count(b"\n") == 1, refused.stderr
    assert b"16 to 512" in refused.stderr
