"""The fast read path (ADR 0024): a read command whose read models are current with the log
reads the tables alone, importing neither the log (eventsourcing), nor the event classes,
nor pydantic; one that finds them behind opens the store, which catches up first. Both
print the same. (No timing here: ``letterlog bench startup`` measures.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from adapters.bootstrap.store import letterlog
from adapters.config.settings import load_settings
from adapters.embedded import Letterlog
from tests.factories import make_mail

ADA = "ada@example.org"
HEAVY = {"eventsourcing", "pydantic", "pydantic_settings", "typer._adapters", "domain.message",
         "domain.service", "adapters.embedded", "adapters.config.settings", "projections.registry"}
PROBE = """
import json, sys
from adapters.cli.app import run
code = run(sys.argv[1:])
sys.stdout.flush()
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""
READS = [["list", ADA], ["search", ADA, "--subject", "report"], ["labelled", ADA, "work"],
         ["counters", ADA], ["du", ADA], ["status", ADA], ["subscriptions", ADA]]


def letterlog_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("LETTERLOG_")}
    return {**env, "LETTERLOG_DURABILITY": "normal", **extra}


def probe(data: Path, *args: str, env: dict[str, str] | None = None) -> tuple[str, set[str]]:
    """A fresh ``letterlog --data DATA ARGS``: its stdout and the modules it imported."""
    p = subprocess.run([sys.executable, "-c", PROBE, "--data", str(data), *args],
                       capture_output=True, text=True, timeout=120,
                       env=env or letterlog_env())
    report = json.loads(p.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, p.stderr
    return p.stdout, set(report["modules"])


def heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if m in HEAVY or m.split(".")[0] in HEAVY}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A store with two delivered messages, one labelled ``work``; INBOX subscribed."""
    data = tmp_path / "d"
    write(data, "init")
    for n, subject in enumerate(("Quarterly report", "Lunch")):
        mail = tmp_path / f"{n}.eml"
        mail.write_bytes(make_mail(subject))
        write(data, "deliver", "--account", ADA, *(["--label", "work"] if n == 0 else []),
              str(mail))
    write(data, "subscribe", ADA, "INBOX")
    return data


def write(data: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "adapters.cli", "--data", str(data), *args],
                   check=True, capture_output=True, env=letterlog_env(), timeout=120)


def test_help_imports_no_pydantic_and_no_store(tmp_path):
    _, modules = probe(tmp_path / "none", "--help")
    assert heavy(modules) == set()


def test_du_of_the_whole_store_reads_the_current_tables_alone(data):
    out, modules = probe(data, "--json", "du")
    assert heavy(modules) == set()
    assert json.loads(out)["listed_messages"] == 2


@pytest.mark.parametrize("args", READS, ids=lambda a: a[0])
def test_a_read_of_current_read_models_imports_no_log_no_events_no_pydantic(data, args):
    out, modules = probe(data, *args)
    assert heavy(modules) == set()
    assert out.strip()


@pytest.mark.parametrize("args", READS, ids=lambda a: a[0])
def test_the_fast_read_prints_what_the_store_prints(data, args):
    fast, fast_modules = probe(data, "--json", *args)
    # any setting the fast path does not read sends a read through the store
    full, full_modules = probe(data, "--json", *args,
                               env=letterlog_env(LETTERLOG_INLINE_LIMIT="10240"))
    assert "adapters.embedded" in full_modules and "adapters.embedded" not in fast_modules
    assert fast == full and fast.strip()


def test_a_read_finding_the_read_models_behind_catches_up_first(data, tmp_path):
    """Events appended by a writer that keeps no read models: the next read sees them."""
    late = make_mail("Arrived while nobody projected")
    writer = letterlog(load_settings(data=data), facade=Letterlog, read_models=False)
    try:
        writer.deliver(account=ADA, raw=late)
    finally:
        writer.close()
    out, modules = probe(data, "list", ADA)
    assert "adapters.embedded" in modules  # the store was opened: it caught up
    assert "Arrived while nobody projected" in out
    _, modules = probe(data, "list", ADA)
    assert heavy(modules) == set()  # current again: the next read is fast


def test_an_import_nobody_watches_draws_no_progress_and_loads_no_rich(tmp_path):
    mbox = tmp_path / "in.mbox"
    mbox.write_bytes(b"".join(b"From a@example.org Mon Jan  1 00:00:00 2024\n"
                              + make_mail(f"n{n}") + b"\n" for n in range(3)))
    write(tmp_path / "d", "init")
    out, modules = probe(tmp_path / "d", "--json", "import", "mbox", str(mbox),
                         "--account", ADA)
    assert json.loads(out)["imported"] == 3
    assert "rich" not in {m.split(".")[0] for m in modules}  # a progress bar would load it


def test_counters_and_du_show_the_quota_from_the_read_models_on_the_fast_path(tmp_path):
    """The quota line comes from the read models (``accounts``' own limit, ``counters``'
    usage), so ``counters`` and ``du`` stay on the fast path (the import test above) and
    still show a limit set by command."""
    from tests.factories import jrun, run

    data = tmp_path / "d"
    run(data, "init")
    raw = tmp_path / "m.eml"
    raw.write_bytes(make_mail("sized"))
    jrun(data, "deliver", "--account", ADA, str(raw))
    jrun(data, "quota", "set", ADA, "--bytes", "10M", "--messages", "5")
    [c] = jrun(data, "counters", ADA)
    assert c["quota"]["messages"] == {"limit": 5, "own": 5, "used": 1}
    assert c["quota"]["bytes"]["limit"] == 10 * 1024 * 1024
    assert c["quota"]["bytes"]["used"] == len(raw.read_bytes())
    text = run(data, "du", ADA).stdout.decode().splitlines()[-1]
    assert text.startswith("quota") and "messages 1 of 5" in text
