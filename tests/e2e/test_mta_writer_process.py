"""The LMTP server's writer process (ADR 0114), attacked where a process split can lose or
double mail: the writer killed in the middle of an append, the server killed under it, a
stop sent to the whole process group while a transaction is open. A real server, a real
client on its socket, the processes found and killed through /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from tests.e2e.mta_support import Client, Server, stored, write_locked
from tests.factories import make_mail, until
from tests.process_support import alive, cmdline, descendants

BOB = "bob@example.org"
WRITER = b"adapters.cli.mtawriter"


def writer_of(server: int) -> int | None:
    return next((p for p in descendants(server) if WRITER in cmdline(p)), None)


def read_bytes(pid: int) -> int:
    """Bytes process ``pid`` has read so far (any file or socket: /proc/PID/io)."""
    line = next(x for x in Path(f"/proc/{pid}/io").read_text().splitlines()
                if x.startswith("rchar:"))
    return int(line.split()[1])


def test_the_append_runs_in_a_process_of_its_own_that_keeps_the_projecting_one(env, data,
                                                                                 tmp_path):
    server = Server(env, data, tmp_path / "lmtp.sock")
    try:
        client = Client(server.sock)
        client.command("LHLO mta.example.org")
        assert client.send("ada@example.net", [BOB], make_mail("one"))[0][:9] == "250 2.0.0"
        writer = until(lambda: writer_of(server.proc.pid), timeout=30, what="the writer")
        follower = until(lambda: [p for p in descendants(writer)
                                  if b"adapters.cli.follower" in cmdline(p)],
                         timeout=30, what="the projecting process")
        assert len(follower) == 1
        client.close()
    finally:
        assert server.stop() == 0
    until(lambda: not alive(writer), timeout=30, what="the writer to end with the server")


def test_a_writer_killed_mid_append_defers_and_the_retry_is_stored_once(env, data, tmp_path):
    server = Server(env, data, tmp_path / "lmtp.sock")
    client = Client(server.sock)
    client.command("LHLO mta.example.org")
    first, raw = make_mail("first"), make_mail("killed mid-append")
    assert client.send("ada@example.net", [BOB], first)[0][:9] == "250 2.0.0"
    writer = until(lambda: writer_of(server.proc.pid), timeout=30, what="the writer")
    replies: list[str] = []
    with write_locked(data / "events.sqlite"):  # the writer's append waits for the lock
        before = read_bytes(writer)
        sending = threading.Thread(
            target=lambda: replies.extend(client.send("ada@example.net", [BOB], raw)))
        sending.start()
        until(lambda: read_bytes(writer) - before >= len(raw), timeout=60,
              what="the message in the writer's hands")
        os.kill(writer, signal.SIGKILL)
        sending.join(60)
    assert [r[:9] for r in replies] == ["451 4.3.0"], replies  # temporary: the MTA keeps it
    assert "writer process went away" in replies[0]
    # the MTA's retry: a new writer process, the message stored once
    assert [r[:9] for r in client.send("ada@example.net", [BOB], raw)] == ["250 2.0.0"]
    assert [r[:9] for r in client.send("ada@example.net", [BOB], raw)] == ["250 2.0.0"]
    assert writer_of(server.proc.pid) not in (None, writer)
    client.close()
    assert server.stop() == 0
    _, err = server.proc.communicate()
    assert b"Traceback" not in err, err
    assert stored(env, data, BOB) == [first, raw]


def test_a_killed_server_takes_its_writer_and_projecting_processes_with_it(env, data,
                                                                         tmp_path):
    """SIGKILL leaves the server no time to close anything: its writer must not live on
    holding the store (and a handed-off lda's connection, which would then never end)."""
    server = Server(env, data, tmp_path / "lmtp.sock")
    client = Client(server.sock)
    client.command("LHLO mta.example.org")
    raw = make_mail("before the kill")
    assert client.send("ada@example.net", [BOB], raw)[0][:9] == "250 2.0.0"
    family = until(lambda: (len(d := descendants(server.proc.pid)) >= 2 and d), timeout=30,
                   what="the writer and the projecting process")
    server.proc.kill()
    server.proc.communicate()
    until(lambda: not any(alive(p) for p in family), timeout=60,
          what="the server's processes to end")
    again = Server(env, data, tmp_path / "again.sock")
    client = Client(again.sock)
    client.command("LHLO mta.example.org")
    after = make_mail("after the kill")
    assert client.send("ada@example.net", [BOB], after)[0][:9] == "250 2.0.0"
    client.close()
    assert again.stop() == 0
    assert stored(env, data, BOB) == [raw, after]


def test_a_stop_sent_to_the_whole_group_finishes_the_transaction_in_flight(env, data,
                                                                          tmp_path):
    """A service manager stopping the server signals every process of it (systemd's
    default ``KillMode=control-group``): the writer and the projecting process leave the
    stop to the server, which lets the open transaction finish."""
    sock = tmp_path / "group.sock"
    proc = subprocess.Popen([sys.executable, "-m", "adapters.cli", "--data", str(data),
                             "lmtp", "--listen", f"unix:{sock}"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        until(lambda: sock.exists(), timeout=60, what="the lmtp socket")
        client = until(lambda: _connected(sock), timeout=60, what="the greeting")
        client.command("LHLO mta.example.org")
        assert client.send("ada@example.net", [BOB], make_mail("opens"))[0][:3] == "250"
        until(lambda: len(descendants(proc.pid)) >= 2, timeout=30,
              what="the writer and the projecting process")
        raw = make_mail("in flight")
        assert client.command("MAIL FROM:<ada@example.net>")[0].startswith("250")
        assert client.command(f"RCPT TO:<{BOB}>")[0].startswith("250")
        os.killpg(proc.pid, signal.SIGTERM)
        assert client.command("DATA")[0].startswith("354")
        client.sock.sendall(raw + b".\r\n")
        assert client.reply()[0].startswith("250 2.0.0")
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate()
    assert b"Traceback" not in err and b"projecting process is gone" not in err, err
    assert stored(env, data, BOB)[-1] == raw


def _connected(sock: Path) -> Client | None:
    try:
        return Client(sock)
    except OSError:
        return None


def _status_mib(pid: int, key: str) -> float:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines()
                if x.startswith(f"{key}:"))
    return int(line.split()[1]) / 1024


def test_a_large_message_is_one_copy_in_each_process(env, data, tmp_path):
    """The server holds one copy of a message being delivered, and so does its writer
    process, however many recipients share it: the bytes cross as they are, never inside a
    pickle or a read-ahead buffer (a 40 MiB message once cost 120 MiB in the server and
    80-120 MiB in the writer)."""
    size = 24 << 20
    raw = make_mail("large", body=("x" * 75 + "\r\n") * (size // 77))
    server = Server(env, data, tmp_path / "lmtp.sock")
    client = Client(server.sock)
    client.command("LHLO mta.example.org")
    assert client.send("ada@example.net", [BOB], make_mail("warm"))[0][:9] == "250 2.0.0"
    writer = until(lambda: writer_of(server.proc.pid), timeout=30, what="the writer")
    before = {}
    for pid in (server.proc.pid, writer):
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM from here on
        before[pid] = _status_mib(pid, "VmRSS")
    recipients = [BOB, "carol@example.org", "dan@example.org"]
    assert [r[:9] for r in client.send("ada@example.net", recipients, raw)] == ["250 2.0.0"] * 3
    grown = {pid: _status_mib(pid, "VmHWM") - before[pid] for pid in before}
    client.close()
    assert server.stop() == 0
    mib = len(raw) / (1 << 20)
    assert all(g < 1.6 * mib for g in grown.values()), (mib, grown)
    assert stored(env, data, "carol@example.org") == [raw]


def test_another_adapters_package_in_the_working_directory_is_never_loaded(env, data,
                                                                           tmp_path):
    """The server started (as an administrator would: the installed ``letterlog``
    program) from a directory holding a package of the same name, an old checkout say:
    its writer and projecting processes still run the installed code."""
    here = tmp_path / "checkout"
    (here / "adapters" / "cli").mkdir(parents=True)
    (here / "adapters" / "__init__.py").write_text("raise SystemExit('the wrong adapters')\n")
    (here / "adapters" / "cli" / "__init__.py").write_text("")
    program = Path(sys.executable).with_name("letterlog")
    sock = tmp_path / "cwd.sock"
    proc = subprocess.Popen([str(program), "--data", str(data), "lmtp", "--listen",
                             f"unix:{sock}"], env=env, cwd=here,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        client = until(lambda: sock.exists() and _connected(sock), timeout=60,
                       what="the greeting")
        client.command("LHLO mta.example.org")
        raw = make_mail("from elsewhere")
        assert [r[:9] for r in client.send("ada@example.net", [BOB], raw)] == ["250 2.0.0"]
        until(lambda: any(b"adapters.cli.follower" in cmdline(p)
                          for p in descendants(proc.pid)), timeout=30,
              what="the projecting process")
        client.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate()
    assert b"the wrong adapters" not in err, err
    assert stored(env, data, BOB) == [raw]
