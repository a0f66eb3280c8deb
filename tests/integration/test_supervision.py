"""supervisord as ``adapters.operations.supervision`` drives it, with small real programs: a
program killed
with SIGKILL is restarted and the others keep their processes; one that keeps dying while
starting ends FATAL after bounded retries; output is appended to its log; the rendered
configuration quotes what supervisord would otherwise expand."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.operations.supervision import (
    START_RETRIES,
    Program,
    Supervised,
    Supervisor,
    SupervisorError,
    socket_path,
    write_config,
)
from adapters.streaming.processes import programs


def wait(condition, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
    return value


def program(root: Path, name: str, code: str, **kw) -> Program:
    return Program(name, (sys.executable, "-c", code), cwd=root, log=root / f"{name}.log",
                   start_seconds=1, stop_wait=5, **kw)


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ll-sv-"))
    yield path
    Supervisor(path).shutdown(timeout=30)


@pytest.mark.slow  # a second process, or seconds of waiting: not in make test-fast
def test_a_killed_program_is_restarted_and_the_others_keep_running(root):
    beat = "import time; print('started', flush=True); time.sleep(3600)"
    write_config(root, [program(root, "a", beat), program(root, "b", beat)], autostart=True)
    supervisor = Supervisor(root)
    supervisor.launch()
    before = {r["name"]: r["pid"] for r in supervisor.await_running(60)}
    os.kill(before["a"], signal.SIGKILL)
    wait(lambda: supervisor.info("a")["statename"] == "RUNNING"
         and supervisor.info("a")["pid"] != before["a"])
    assert supervisor.info("b")["pid"] == before["b"]
    # the new process prints once it has started; its line is appended, not replacing the first
    assert wait(lambda: (root / "a.log").read_text().count("started") == 2)
    restarted = supervisor.restart("b")
    assert restarted.pid != before["b"] and restarted.poll() is None


@pytest.mark.slow  # 5 tries with supervisord's back-off: ~20 s
def test_a_program_that_keeps_dying_while_starting_ends_fatal(root):
    write_config(root, [program(root, "broken", "raise SystemExit(3)")], autostart=True)
    supervisor = Supervisor(root)
    supervisor.launch()
    wait(lambda: supervisor.info("broken")["statename"] == "FATAL", timeout=90)
    assert Supervised(supervisor, "broken").poll() is not None  # a launcher sees it has failed
    assert supervisor.log.read_text().count("spawned: 'broken'") == 1 + START_RETRIES
    with pytest.raises(SupervisorError, match="broken FATAL"):
        supervisor.await_running(60)


@pytest.mark.slow  # a second process, or seconds of waiting: not in make test-fast
def test_a_restarted_program_counts_as_running_only_after_its_start_seconds(root):
    beat = "import time; print('started', flush=True); time.sleep(3600)"
    write_config(root, [Program("slow", (sys.executable, "-c", beat), cwd=root,
                                log=root / "slow.log", start_seconds=3, stop_wait=5)],
                 autostart=True)
    supervisor = Supervisor(root)
    supervisor.launch()
    first = supervisor.await_running(60)[0]
    os.kill(first["pid"], signal.SIGKILL)
    # the new process prints at once but is STARTING for 3 s; await_running waits that out
    wait(lambda: (root / "slow.log").read_text().count("started") == 2)
    assert supervisor.info("slow")["statename"] == "STARTING"
    row = supervisor.await_running(60)[0]
    assert row["state"] == "RUNNING" and row["pid"] != first["pid"] and row["uptime"] >= 3


def test_percent_signs_and_the_environment_reach_the_program_as_written(root):
    code = "import os, time; print('100%', os.environ['X'], flush=True); time.sleep(3600)"
    write_config(root, [program(root, "p", code, env={"X": "a%b"})], autostart=True)
    Supervisor(root).launch()
    assert wait(lambda: (root / "p.log").exists() and (root / "p.log").read_text()) == (
        "100% a%b\n")


def test_a_line_break_in_a_command_is_refused(root):
    with pytest.raises(ValueError, match="program p: a line break"):
        write_config(root, [program(root, "p", "import os\nprint(1)")], autostart=True)


def test_a_long_root_gets_a_short_socket():
    long_root = Path("/tmp") / ("x" * 120)
    assert len(str(socket_path(long_root))) < 100
    assert socket_path(Path("/tmp/short")) == Path("/tmp/short/supervisor.sock")


def test_letterlog_processes_are_the_cli_commands_with_an_instance_per_worker(tmp_path):
    found = {p.name: p for p in programs(tmp_path, workers=2, purger=False)}
    assert list(found) == ["relay", "worker-0", "worker-1"]
    assert found["relay"].command[-1] == "relay" and found["worker-1"].command[-1] == "worker"
    instances = {p.env["LETTERLOG_STREAM_INSTANCE"] for p in found.values()
                 if "LETTERLOG_STREAM_INSTANCE" in p.env}
    assert len(instances) == 2
    assert "purger" in {p.name for p in programs(tmp_path, workers=0)}


def test_the_imap_server_is_a_program_with_its_options(tmp_path):
    found = {p.name: p for p in programs(tmp_path, workers=0, purger=False, relay=False,
                                         imap=("--listen", "127.0.0.1:143", "--plaintext-auth"))}
    assert list(found) == ["imap"]
    assert found["imap"].command[-4:] == ("imap", "--listen", "127.0.0.1:143",
                                          "--plaintext-auth")
