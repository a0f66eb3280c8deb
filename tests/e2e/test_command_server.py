"""The command server (ADR 0032): a command line run in it behaves as one run in its own
process (output, errors, exit status, environment, working directory, umask, signals) and
its client imports none of the command's code; a server whose code changed refuses and
stops, and the command runs in the client instead. (No timing here: ``letterlog bench
startup`` measures.)"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.cli import commandserver
from adapters.operations.probing import alive
from tests.factories import make_mail

ADA = "ada@example.org"
CLIENT_PROBE = """
import json, sys
from adapters.startup.commandclient import forward
code = forward(sys.argv[1:])
sys.stdout.flush()
print(json.dumps({"code": code, "typer": "typer" in sys.modules,
                  "domain": any(m.startswith("domain") for m in sys.modules)}), file=sys.stderr)
"""


def environment(runtime: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("LETTERLOG_")}
    return {**env, "XDG_RUNTIME_DIR": str(runtime), "LETTERLOG_DURABILITY": "normal", **extra}


def initialised(data: Path, cwd: Path | None = None) -> Path:
    """``letterlog init`` run alone (no command but init makes a store): ``data``."""
    p = subprocess.run([sys.executable, "-m", "adapters.cli", "--data", str(data), "init"],
                       capture_output=True, text=True, cwd=cwd, timeout=120,
                       env={k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"})
    assert p.returncode == 0, p.stderr
    return data


def letterlog(env: dict[str, str], *args: str, cwd: Path | None = None,
              stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "adapters.cli", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=120,
                          input=None if stdin is None else stdin.decode())


def server_info(env: dict[str, str]) -> dict[str, object]:
    p = letterlog(env, "--json", "server", "status")
    return dict(json.loads(p.stdout))


def children(pid: int) -> list[int]:
    """``pid``'s children; none once it has ended (a connection's handler process, such as
    the one that answered ``server status`` a moment before, may end as it is listed)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


@pytest.fixture
def runtime(tmp_path: Path) -> Path:
    path = tmp_path / "run"
    path.mkdir(mode=0o700)
    return path


@pytest.fixture
def served(runtime: Path) -> Iterator[dict[str, str]]:
    """The environment of a user whose command server is running."""
    env = environment(runtime)
    started = letterlog(env, "--json", "server", "start")
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["running"] is True
    yield env
    letterlog(env, "server", "stop")


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, str]:
    """A store holding one message (delivered without a server); its data dir and id."""
    data = initialised(tmp_path / "d")
    mail = tmp_path / "m.eml"
    mail.write_bytes(make_mail("Served"))
    p = letterlog(environment(tmp_path / "none"), "--data", str(data), "--json", "deliver",
                  "--account", ADA, str(mail))
    assert p.returncode == 0, p.stderr
    return data, json.loads(p.stdout)["message_id"]


def test_a_command_runs_in_the_server_and_the_client_imports_none_of_it(served, store):
    data, mid = store
    p = subprocess.run([sys.executable, "-c", CLIENT_PROBE, "--data", str(data), "--json",
                        "show", mid], capture_output=True, text=True, env=served, timeout=120)
    report = json.loads(p.stderr.strip().splitlines()[-1])
    assert report == {"code": 0, "typer": False, "domain": False}
    assert json.loads(p.stdout)["message_id"] == mid


@pytest.mark.parametrize("args", [
    ["show", "{mid}"], ["--json", "show", "{mid}"], ["list", ADA], ["counters", ADA],
    ["--json", "list", ADA], ["show", "not-a-uuid"], ["list", "nobody@example.org"],
    ["flag", "{mid}", "Seen"], ["no-such-command"], ["--help"], ["list"],
])
def test_output_errors_and_exit_status_are_those_of_a_command_run_alone(served, store, tmp_path,
                                                                        args):
    data, mid = store
    argv = ["--data", str(data), *[a.format(mid=mid) for a in args]]
    alone = letterlog(environment(tmp_path / "none"), *argv)
    in_server = letterlog(served, *argv)
    assert (in_server.returncode, in_server.stdout, in_server.stderr) == (
        alone.returncode, alone.stdout, alone.stderr)


def test_writes_land_in_the_store_with_the_callers_cwd_environment_and_umask(served, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "m.eml").write_bytes(make_mail("Relative"))
    env = {**served, "LETTERLOG_DATA": "relative-data"}
    initialised(Path("relative-data"), cwd=work)
    p = subprocess.run(
        [sys.executable, "-c", "import os, sys; os.umask(0o077); "
         "from adapters.cli import main; sys.argv[0] = 'letterlog'; main()",
         "--json", "deliver", "--account", ADA, "m.eml"],
        capture_output=True, text=True, env=env, cwd=work, timeout=120)
    assert p.returncode == 0, p.stderr
    delivered = json.loads(p.stdout)
    data = work / "relative-data"
    assert (data / "events.sqlite").is_file()
    assert data.stat().st_mode & 0o777 == 0o700
    listed = letterlog(env, "--json", "list", ADA, cwd=work)
    assert [json.loads(line)["message_id"] for line in listed.stdout.splitlines()] == [
        delivered["message_id"]]


def test_standard_input_is_the_callers(served, tmp_path):
    data = initialised(tmp_path / "d")
    p = letterlog(served, "--data", str(data), "--json", "deliver", "--account", ADA,
                  "/dev/stdin", stdin=make_mail("From stdin"))
    assert p.returncode == 0, p.stderr
    listed = letterlog(served, "--data", str(data), "--json", "list", ADA)
    assert [json.loads(line)["subject"] for line in listed.stdout.splitlines()] == ["From stdin"]


def test_a_signal_to_the_client_reaches_the_command(served, store):
    data, _ = store
    proc = subprocess.Popen([sys.executable, "-m", "adapters.cli", "--data", str(data),
                             "purger", "--interval", "600"], env=served, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = proc.stderr.readline() if proc.stderr else ""
        assert "purge run" in first  # the purger runs (in the server) and logs to our stderr
        # it holds the caller's streams and its own store files, nothing of the server's
        server = int(str(server_info(served)["pid"]))
        (command,) = [c for h in children(server) for c in children(h)]
        held = {int(fd.name): os.readlink(fd) for fd in Path(f"/proc/{command}/fd").iterdir()}
        assert {n: t for n, t in held.items() if n > 2 and not t.startswith(str(data))} == {}
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert "purger stopped" in rest


def test_a_server_whose_code_changed_refuses_stops_and_the_command_runs_here(served, store):
    data, mid = store
    source = Path(commandserver.__file__)
    before = source.stat()
    try:
        os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        p = subprocess.run([sys.executable, "-c", CLIENT_PROBE, "--data", str(data), "show",
                            mid], capture_output=True, text=True, env=served, timeout=120)
        assert json.loads(p.stderr.strip().splitlines()[-1])["code"] is None  # not run there
        alone = letterlog(served, "--data", str(data), "show", mid)  # the server has stopped
        assert alone.returncode == 0 and mid in alone.stdout
    finally:
        os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    status = letterlog(served, "server", "status")
    assert status.returncode == 1 and "no command server" in status.stdout
    log = Path(served["XDG_RUNTIME_DIR"]) / "letterlog"
    assert "code changed since the server started" in "".join(
        f.read_text() for f in log.glob("*.log"))


def test_start_stop_status(runtime, store):
    env = environment(runtime)
    assert letterlog(env, "server", "status").returncode == 1
    first = letterlog(env, "--json", "server", "start")
    assert first.returncode == 0, first.stderr
    pid = json.loads(first.stdout)["pid"]
    again = letterlog(env, "--json", "server", "start")
    assert again.returncode == 0 and json.loads(again.stdout)["pid"] == pid
    assert "already running" in letterlog(env, "server", "start").stdout
    assert server_info(env)["pid"] == pid
    stopped = letterlog(env, "--json", "server", "stop")
    assert json.loads(stopped.stdout) == {"pid": pid, "running": False, "stopped": True}
    assert not alive(pid)
    assert not list((runtime / "letterlog").glob("*.sock"))
    assert letterlog(env, "server", "status").returncode == 1
    data, mid = store
    assert letterlog(env, "--data", str(data), "show", mid).returncode == 0  # runs here


def test_a_runtime_directory_others_can_enter_is_never_used(tmp_path, store):
    runtime = tmp_path / "open"
    (runtime / "letterlog").mkdir(parents=True)
    (runtime / "letterlog").chmod(0o755)
    env = environment(runtime)
    p = letterlog(env, "server", "start")
    assert p.returncode == 2
    assert "must be owned by you and closed to others" in p.stderr
    assert "Traceback" not in p.stderr
    assert list((runtime / "letterlog").iterdir()) == []  # not even a log was written there
    data, mid = store
    probe = subprocess.run([sys.executable, "-c", CLIENT_PROBE, "--data", str(data), "show",
                            mid], capture_output=True, text=True, env=env, timeout=120)
    assert json.loads(probe.stderr.strip().splitlines()[-1])["code"] is None


@pytest.mark.parametrize("args", [
    ["show", "{mid}"], ["flag", "{mid}", "\\Seen"], ["list", ADA], ["search", ADA, "--from", "a"],
    ["deliver", "--account", ADA, "{mail}"], ["counters", ADA],
])
def test_the_server_preloads_what_simple_commands_run_on(store, tmp_path, args):
    data, mid = store
    mail = tmp_path / "again.eml"
    mail.write_bytes(make_mail("Again"))
    probe = """
import json, sys
from adapters.cli.commandserver import preload
preload()
before = set(sys.modules)
from adapters.cli.app import run
code = run(sys.argv[1:])
ours = ("adapters", "domain", "projections", "eventsourcing", "pydantic", "typer")
new = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in ours)
print(json.dumps({"code": code, "new": new}), file=sys.stderr)
"""
    argv = ["--data", str(data), *[a.format(mid=mid, mail=mail) for a in args]]
    p = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True,
                       env=environment(tmp_path / "none"), timeout=120)
    report = json.loads(p.stderr.strip().splitlines()[-1])
    assert report == {"code": 0, "new": []}


def test_a_client_in_a_deleted_directory_leaves_the_command_to_itself(served, tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    probe = ("import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
             "from adapters.startup.commandclient import forward; print(forward(['--version']))")
    p = subprocess.run([sys.executable, "-c", probe, str(gone)], capture_output=True,
                       text=True, env=served, timeout=120)
    assert (p.returncode, p.stdout.strip(), p.stderr) == (0, "None", "")


def test_stop_stops_a_server_that_is_forking_all_the_while(runtime):
    """SIGTERM arriving while the server forks (a connection a millisecond) still stops it:
    it only wakes the accept loop, never raises inside fork's at-fork callbacks."""
    import socket
    import threading

    env = environment(runtime)
    for _ in range(5):
        assert letterlog(env, "server", "start").returncode == 0
        info = server_info(env)
        done = threading.Event()

        def connect_all_the_while(path: str = str(info["socket"]),
                                  done: threading.Event = done) -> None:
            while not done.is_set():
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    try:
                        s.connect(path)
                    except OSError:
                        return  # it stopped listening

        threads = [threading.Thread(target=connect_all_the_while) for _ in range(2)]
        for t in threads:
            t.start()
        try:
            stopped = letterlog(env, "--json", "server", "stop")
        finally:
            done.set()
            for t in threads:
                t.join()
        assert stopped.returncode == 0, stopped.stderr
        assert not alive(int(str(info["pid"])))


def test_a_large_environment_reaches_the_command_whole(served, store):
    data, mid = store
    bulky = {f"BULKY_{n}": "x" * 100_000 for n in range(8)}  # more than a socket buffer
    env = {**served, "LETTERLOG_DATA": str(data), **bulky}
    p = subprocess.run([sys.executable, "-c", CLIENT_PROBE, "--json", "show", mid],
                       capture_output=True, text=True, env=env, timeout=120)
    assert json.loads(p.stderr.strip().splitlines()[-1])["code"] == 0  # run by the server
    assert json.loads(p.stdout)["message_id"] == mid  # with LETTERLOG_DATA from that env


def stored_bytes(env: dict[str, str], data: Path, mid: str) -> bytes:
    p = subprocess.run([sys.executable, "-m", "adapters.cli", "--data", str(data), "extract",
                        mid], capture_output=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


RAW = make_mail("Gr\u00fc\u00dfe", body="line one\r\nno newline at the end: \u00e9")


@pytest.mark.parametrize("stdin_is", ["pipe", "file"])
def test_dev_stdin_is_the_callers_standard_input_in_the_server(served, tmp_path, stdin_is):
    data = initialised(tmp_path / "d")
    source = tmp_path / "in.eml"
    source.write_bytes(RAW)
    with source.open("rb") as f:
        p = subprocess.run([sys.executable, "-c", CLIENT_PROBE, "--data", str(data), "--json",
                            "deliver", "--account", ADA, "/dev/stdin"], capture_output=True,
                           env=served, timeout=120, **(
                               {"input": RAW} if stdin_is == "pipe" else {"stdin": f}))
    assert json.loads(p.stderr.strip().splitlines()[-1])["code"] == 0, p.stderr  # run there
    mid = json.loads(p.stdout)["message_id"]
    assert stored_bytes(served, data, mid) == RAW


@pytest.mark.parametrize("path", ["/dev/fd/{fd}", "/proc/self/fd/{fd}"])
def test_a_path_to_one_of_the_clients_own_descriptors_is_read_by_the_client(served, tmp_path,
                                                                           path):
    """bash's ``<(...)`` names a descriptor only the client has: such a command is not
    forwarded (the server would read nothing there, or another file) and runs here."""
    data = initialised(tmp_path / "d")
    argv = ["--data", str(data), "--json", "deliver", "--account", ADA]
    read, write = os.pipe()
    try:
        os.write(write, RAW)  # a small message fits in the pipe
        os.close(write)
        p = subprocess.run([sys.executable, "-m", "adapters.cli", *argv,
                            path.format(fd=read)], capture_output=True, env=served,
                           timeout=120, pass_fds=(read,))
    finally:
        os.close(read)
    assert p.returncode == 0, p.stderr
    assert stored_bytes(served, data, json.loads(p.stdout)["message_id"]) == RAW
    probe = subprocess.run([sys.executable, "-c", CLIENT_PROBE, *argv, path.format(fd=5)],
                           capture_output=True, text=True, env=served, timeout=120)
    assert json.loads(probe.stderr.strip().splitlines()[-1])["code"] is None  # not forwarded


Blocked = tuple[subprocess.Popen[bytes], int, int]


def blocked_deliver(env: dict[str, str], data: Path, fifo: Path) -> Blocked:
    """A client whose command (``deliver`` of a FIFO no one writes) blocks in the server; the
    client, the handler's pid and the command's pid."""
    os.mkfifo(fifo)
    client = subprocess.Popen([sys.executable, "-m", "adapters.cli", "--data", str(data),
                               "deliver", "--account", ADA, str(fifo)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    server = int(str(server_info(env)["pid"]))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pairs = [(h, c) for h in children(server) for c in children(h)]
        if pairs:
            return client, *pairs[0]
        time.sleep(0.02)
    client.kill()
    raise AssertionError("the command did not start in the server")


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def nobody_reads(fifo: Path) -> bool:
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError as e:
        return e.errno == errno.ENXIO
    return False


def test_a_command_whose_client_is_killed_is_killed_too(served, store, tmp_path):
    """An MTA's time limit kills the client with SIGKILL, which it cannot forward: the command
    must not run on and store the message the MTA has given up on."""
    data, mid = store
    fifo = tmp_path / "never-written"
    client, handler, command = blocked_deliver(served, data, fifo)
    try:
        assert alive(command)  # blocked opening the FIFO (probing it would wake it)
        client.kill()
        client.wait(timeout=60)
        assert gone_within(command, 10), "the command outlived its client"
        assert gone_within(handler, 10)
    finally:
        client.kill()
    assert nobody_reads(fifo)  # no process is left to read a message and store it
    listed = letterlog(served, "--data", str(data), "--json", "list", ADA)
    assert [json.loads(line)["message_id"] for line in listed.stdout.splitlines()] == [mid]
    log = Path(served["XDG_RUNTIME_DIR"]) / "letterlog"
    assert f"killed command {command}: its client is gone" in "".join(
        f.read_text() for f in log.glob("*.log"))


def test_a_handler_that_dies_takes_its_command_along_and_the_client_says_so(served, store,
                                                                          tmp_path):
    data, _ = store
    client, handler, command = blocked_deliver(served, data, tmp_path / "never-written")
    try:
        os.kill(handler, signal.SIGKILL)
        _, err = client.communicate(timeout=60)
        assert gone_within(command, 10), "the command outlived its handler"
    finally:
        client.kill()
    assert client.returncode == 1
    assert b"the command server stopped while running the command" in err


def a_server_that_dies_after_the_pid(path: Path) -> threading.Thread:
    """Accepts one command, tells its (made-up) pid and closes: a handler killed mid-command."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)

    def serve() -> None:
        with listener, listener.accept()[0] as conn:
            head, fds, _, _ = socket.recv_fds(conn, 4, 3)
            for fd in fds:
                os.close(fd)
            while len(head) < 4:  # a stream may hand the length over in pieces
                more = conn.recv(4 - len(head))
                assert more, "the client closed within its request"
                head += more
            (size,) = struct.unpack(">I", head)
            while size:
                got = len(conn.recv(size))
                assert got, "the client closed within its request"
                size -= got
            conn.sendall(b'{"pid": 999999999}\n')
            # gone, as a dead handler is: end of file after the pid. Closing with anything
            # unread would reset the connection instead, and the client might see the reset
            # before the pid (a client then runs the command itself: a flaky test)
            conn.shutdown(socket.SHUT_WR)
            while conn.recv(4096):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(("args", "code"), [
    (["lda", "--recipient", ADA], 75), (["--data", "d", "--json", "lda"], 75),
    (["deliver", "--account", ADA, "m.eml"], 1), (["--data", "lda", "deliver"], 1),
])
def test_lda_whose_server_stops_mid_command_fails_temporarily(runtime, monkeypatch, args, code):
    """For Postfix, exit 1 bounces the message; 75 with a 4.x.x reason defers it."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    (runtime / "letterlog").mkdir(mode=0o700)
    thread = a_server_that_dies_after_the_pid(commandserver.socket_path())
    p = subprocess.run([sys.executable, "-c", CLIENT_PROBE, *args], capture_output=True,
                       text=True, env=environment(runtime), timeout=120)
    thread.join(timeout=60)
    lines = p.stderr.strip().splitlines()
    assert json.loads(lines[-1])["code"] == code, p.stderr
    if code == 75:
        assert lines[0].startswith("4.3.0 ")
    else:
        assert "its outcome is unknown" in lines[0]
