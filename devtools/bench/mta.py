"""``bench ingest --peer dovecot``, the MTA legs: letterlog's own delivery agents against
Dovecot's, both storing every message durably (letterlog ``durability = full``, Dovecot
``mail_fsync = always``), in the same run, on the same messages.

* LMTP: ``letterlog lmtp`` against Dovecot's LMTP service, both on a unix socket, driven by
  the same client (``smtplib.LMTP``, one message and one recipient per transaction) over one
  connection and over four parallel ones (a thread each, the messages split round-robin).
  Connections are opened and greeted before the clock starts. Dovecot runs right before
  and right after letterlog; the mean is its rate. Each side first gets an untimed warm-up
  (a message per connection: letterlog opens its store and starts the projecting second
  process, Dovecot starts its ``lmtp`` processes). The CPU both servers spent per message
  (all their processes; letterlog's split into event loop, other threads and the projecting
  process) says what bounds the ratio, and so does the protocol layer's own rate: letterlog's
  aiosmtpd session class with a handler that stores nothing (``devtools.bench.lmtp_floor``).
* LDA: one process per message, as Postfix's pipe(8) runs them: ``letterlog lda`` against
  ``dovecot-lda``, the message on standard input; letterlog alone, through a command server
  (``letterlog server start``) and with a ``letterlog lmtp`` of the data directory running,
  which takes each lda's message over ``DATA/lda.sock`` (the served lda, ADR 0060), Dovecot
  before and after. Every letterlog process
  runs with ``XDG_RUNTIME_DIR`` set to a private directory of the run, so a user's own
  command server is never used (nor disturbed). The start-up of a process (``python -c
  pass``, ``letterlog --version`` alone and through the server) bounds it.

Every delivery is acknowledged (250 / exit 0) and the stored messages are counted on both
sides after each run: a count that is wrong fails the benchmark instead of giving a ratio.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import smtplib
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

SENDER = "bench@example.org"
WARM_UP_ACCOUNT = "warm-up@example.org"
CONNECTIONS = (1, 4)
READY_TIMEOUT = 120.0
FLOOR_MESSAGES = 2000  # timed through the protocol floor (of the leg's messages)


# -- pure parts ---------------------------------------------------------------------------

def split_round_robin(items: Sequence[T], parts: int) -> list[list[T]]:
    """``items`` over ``parts`` connections: item i to connection i mod parts (each list
    keeps the items' order; none is more than one longer than another)."""
    if parts < 1:
        raise ValueError(f"parts must be at least 1, not {parts}")
    return [list(items[k::parts]) for k in range(parts)]


def ratio(letterlog: float, peer: float) -> float:
    """letterlog's rate over the peer's, rounded as every ratio of the bench."""
    if not letterlog > 0 or not peer > 0:
        raise ValueError(f"a ratio needs two positive rates, not {letterlog} and {peer}")
    return round(letterlog / peer, 3)


def rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else float("inf")


def mean_rate(rates: Sequence[float]) -> float:
    return round(statistics.fmean(rates), 1)


def check_count(what: str, got: int, expected: int) -> None:
    if got != expected:
        raise RuntimeError(f"{what}: {got} messages stored, {expected} delivered")


def leg_accounts(names: Sequence[str], tag: str) -> list[str]:
    """The recipients of one run: ``name-tag@example.org`` (a fresh set per run, so every
    run's count is its own)."""
    return [f"{name}-{tag}@example.org" for name in names]


def addressed(blobs: Sequence[bytes], accounts: Sequence[str]) -> list[tuple[str, bytes]]:
    return [(accounts[i % len(accounts)], blob) for i, blob in enumerate(blobs)]


def per_account(messages: Sequence[tuple[str, bytes]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for account, _ in messages:
        counts[account] = counts.get(account, 0) + 1
    return counts


# -- CPU time of a server, from /proc ------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu(stat: Path) -> float:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split():
                    found.append(int(child))
                    found.extend(_children(int(child)))
    return found


WRITER_PROCESS = b"adapters.cli.mtawriter"
"""In the command line of letterlog's LMTP writer process (ADR 0114)."""


def is_writer_process(pid: int) -> bool:
    with contextlib.suppress(OSError):
        return WRITER_PROCESS in Path(f"/proc/{pid}/cmdline").read_bytes()
    return False


def cpu_snapshot(pid: int) -> dict[str, float]:
    """CPU seconds so far of process ``pid``: its first thread (``main``), its other threads
    (``threads``), its live descendants: letterlog's LMTP writer process (``writer``) and
    the others (``children``: letterlog's projecting process, Dovecot's processes)."""
    main = threads = writer = children = 0.0
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                seconds = _cpu(Path(f"/proc/{pid}/task/{task}/stat"))
                if int(task) == pid:
                    main += seconds
                else:
                    threads += seconds
    for child in _children(pid):
        with contextlib.suppress(OSError):
            seconds = _cpu(Path(f"/proc/{child}/stat"))
            if is_writer_process(child):
                writer += seconds
            else:
                children += seconds
    return {"main": main, "threads": threads, "writer": writer, "children": children}


def cpu_ms_per_message(before: dict[str, float], after: dict[str, float],
                       n: int) -> dict[str, float]:
    spent = {k: max(0.0, after[k] - before.get(k, 0.0)) for k in after}
    out = {k: round(1000 * v / n, 3) for k, v in spent.items()}
    out["total"] = round(1000 * sum(spent.values()) / n, 3)
    return out


# -- the LMTP client, the same for both servers ---------------------------------------------

def _connect(socket_path: Path) -> smtplib.LMTP:
    lmtp = smtplib.LMTP(str(socket_path))
    code, reply = lmtp.ehlo("letterlog-bench")
    if code != 250:
        lmtp.close()
        raise RuntimeError(f"LMTP {socket_path}: LHLO answered {code} {reply!r}")
    return lmtp


def lmtp_deliver(socket_path: Path, messages: Sequence[tuple[str, bytes]],
                 connections: int = 1) -> float:
    """Seconds to deliver ``messages`` (recipient, bytes) over ``connections`` parallel LMTP
    connections (a thread each, the messages split round-robin), one message and one
    recipient per transaction. The connections are open and greeted before the clock
    starts; a refusal raises (smtplib does: every reply must be 250)."""
    shares = split_round_robin(messages, connections)
    clients = []
    try:
        for _ in shares:
            clients.append(_connect(socket_path))
        start = threading.Barrier(len(shares) + 1)
        errors: list[BaseException] = []

        def send(lmtp: smtplib.LMTP, share: list[tuple[str, bytes]]) -> None:
            try:
                start.wait()
                for recipient, raw in share:
                    refused = lmtp.sendmail(SENDER, [recipient], raw)
                    if refused:
                        raise RuntimeError(f"LMTP refused {recipient}: {refused}")
            except BaseException as e:  # noqa: BLE001 - raised in the caller
                errors.append(e)

        threads = [threading.Thread(target=send, args=(c, s), name=f"lmtp-client-{i}")
                   for i, (c, s) in enumerate(zip(clients, shares, strict=True))]
        for t in threads:
            t.start()
        start.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - t0
        if errors:
            raise RuntimeError(f"LMTP {socket_path}: {errors[0]!r}") from errors[0]
        return seconds
    finally:
        for c in clients:
            with contextlib.suppress(Exception):
                c.quit()
            c.close()


def warm_up_lmtp(socket_path: Path, connections: int) -> int:
    """One untimed message per connection to the warm-up account; how many."""
    messages = [(WARM_UP_ACCOUNT, f"Subject: warm-up {i}\r\n\r\nwarm-up\r\n".encode())
                for i in range(connections)]
    lmtp_deliver(socket_path, messages, connections)
    return len(messages)


# -- letterlog's processes -------------------------------------------------------------------

def letterlog_command() -> list[str]:
    """The ``letterlog`` program an MTA runs (the console script beside this interpreter),
    else the module."""
    beside = Path(sys.executable).with_name("letterlog")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("letterlog")
    return [found] if found else [sys.executable, "-m", "adapters.cli"]


def lda_client_command() -> list[str]:
    """``letterlog-lda``, the lda's compiled hand-off client (ADR 0087), beside the
    ``letterlog`` program it falls back to (``make venv`` builds it there)."""
    program = Path(letterlog_command()[0])
    client = program.with_name("letterlog-lda")
    if program.name != "letterlog" or not os.access(client, os.X_OK):
        raise RuntimeError(f"no letterlog-lda beside {program} (make venv builds it: cc -O2 "
                           f"-o {client} adapters/startup/lda_client.c)")
    return [str(client)]


def private_runtime(env: dict[str, str], directory: Path) -> dict[str, str]:
    """``env`` with ``XDG_RUNTIME_DIR`` a private (0700) directory of the run: no command
    server of the user's is found there."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    return {**env, "XDG_RUNTIME_DIR": str(directory)}


def letterlog_init(data: Path, env: dict[str, str]) -> None:
    done = subprocess.run([*letterlog_command(), "--data", str(data), "init"], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"letterlog init {data} failed ({done.returncode}): {done.stderr}")


def _lhlo_answers(socket_path: Path) -> bool:
    try:
        with smtplib.LMTP(str(socket_path), timeout=5) as lmtp:  # reads the 220 greeting
            return lmtp.ehlo("probe")[0] == 250
    except (OSError, smtplib.SMTPException):
        return False


@contextlib.contextmanager
def letterlog_lmtp(data: Path, socket_path: Path, env: dict[str, str],
                   log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``letterlog --data DATA lmtp --listen unix:SOCKET`` in the foreground, ready once it
    greets and answers LHLO; stopped with SIGTERM (it finishes what is in flight and must
    exit 0) when the block ends, even on an error."""
    cmd = [*letterlog_command(), "--data", str(data), "lmtp", "--listen", f"unix:{socket_path}"]
    with lmtp_process(cmd, socket_path, env, log) as proc:
        yield proc


@contextlib.contextmanager
def lmtp_process(cmd: list[str], socket_path: Path, env: dict[str, str],
                 log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """An LMTP server ``cmd`` listening on ``socket_path``, ready once it greets and answers
    LHLO; SIGTERM when the block ends (exit 0 required, unless the block failed)."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while not (socket_path.exists() and _lhlo_answers(socket_path)):
            if proc.poll() is not None:
                raise RuntimeError(f"{cmd[-3:]} exited ({proc.returncode}) before it "
                                   f"answered: {_tail(log)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{cmd[-3:]} did not answer within {READY_TIMEOUT:g} s: "
                                   f"{_tail(log)}")
            time.sleep(0.02)  # polling for readiness, not waiting in its place
        yield proc
    except BaseException:
        _stop(proc, log, check=False)
        raise
    else:
        _stop(proc, log, check=True)


def _stop(proc: subprocess.Popen[bytes], log: Path, *, check: bool) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            if check:
                raise RuntimeError(
                    f"an LMTP server did not stop on SIGTERM: {_tail(log)}") from None
    if check and proc.returncode != 0:
        raise RuntimeError(f"an LMTP server exited {proc.returncode} on SIGTERM: {_tail(log)}")


def _tail(log: Path, lines: int = 15) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    return ""


def protocol_floor(messages: Sequence[tuple[str, bytes]], connections: int, root: Path,
                   env: dict[str, str]) -> tuple[float, float]:
    """Messages/s of letterlog's LMTP protocol layer storing nothing
    (``devtools.bench.lmtp_floor``), same client and connections, and its server's CPU ms
    a message; its count checked."""
    sock, log = root / f"floor-{connections}.sock", root / f"floor-{connections}.log"
    with lmtp_process([sys.executable, "-m", "devtools.bench.lmtp_floor", str(sock)], sock,
                      env, log) as proc:
        warm = warm_up_lmtp(sock, connections)
        before = cpu_snapshot(proc.pid)
        seconds = lmtp_deliver(sock, messages, connections)
        cpu = cpu_ms_per_message(before, cpu_snapshot(proc.pid), len(messages))["total"]
    answered = int(_tail(log, 1) or -1)
    check_count(f"LMTP protocol floor, {connections} connection(s)", answered,
                warm + len(messages))
    return rate(len(messages), seconds), cpu


def lmtp_ceilings(connections: int, floor_msgs_per_s: float, floor_cpu_ms: float,
                  server_cpu: dict[str, float], client_cpu_ms: float,
                  cores: int) -> float:
    """Messages/s the LMTP server could reach at best with today's store behind a protocol
    layer as cheap as aiosmtpd storing nothing, from the same run's measurements. One
    connection: a message's round trip is the floor's (client included) plus the writer's
    CPU, in series (the projecting process is off the path). Several connections: the
    machine's ``cores`` all busy, each message costing the floor server's CPU, the
    writer's, the projecting process's and the client's. The writer: the server's threads
    and its writer process (ADR 0114), whichever holds it."""
    writer = server_cpu.get("threads", 0.0) + server_cpu.get("writer", 0.0)
    projection = server_cpu.get("children", 0.0)
    if connections == 1:
        per_message_ms = 1000 / floor_msgs_per_s + writer
        return round(1000 / per_message_ms, 1)
    cpu_ms = floor_cpu_ms + writer + projection + client_cpu_ms
    return round(min(floor_msgs_per_s, 1000 * cores / cpu_ms), 1)


def letterlog_counts(data: Path, accounts: Sequence[str]) -> dict[str, int]:
    """Messages in each account's INBOX, as the read models show them (opened here, after
    the server stopped: they are current or catch up first)."""
    from adapters.embedded import Letterlog

    with Letterlog.open(data, create=False) as store:
        return {a: int(store.mailbox_status(a)["messages"]) for a in accounts}


def run_each(commands: Sequence[tuple[list[str], bytes]], env: dict[str, str] | None,
             what: str) -> float:
    """Seconds to run every command in turn, its message on standard input; each must exit
    0 (an MTA would retry or bounce otherwise)."""
    t0 = time.perf_counter()
    for cmd, stdin in commands:
        done = subprocess.run(cmd, input=stdin, env=env, capture_output=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{what}: exit {done.returncode} for {cmd[-6:]}: "
                               f"{done.stderr.decode(errors='replace').strip()}")
    return time.perf_counter() - t0


def startup_ms(cmd: list[str], env: dict[str, str] | None, runs: int = 20) -> float:
    """Median milliseconds of a whole process (``cmd``, nothing on standard input)."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return round(1000 * statistics.median(times), 2)


# -- the legs -------------------------------------------------------------------------------

def lmtp_leg(dovecot: Any, blobs: Sequence[bytes], names: Sequence[str], root: Path,
             env: dict[str, str]) -> dict[str, Any]:
    """letterlog's LMTP server against Dovecot's over 1 and 4 connections."""
    n = len(blobs)
    result: dict[str, Any] = {"lmtp_messages": n}
    dovecot_warm = 0  # the warm-up account is this leg's alone
    for conns in CONNECTIONS:
        dovecot_warm += warm_up_lmtp(dovecot.lmtp_socket, conns)
        check_count(f"Dovecot LMTP warm-up, {conns} connection(s)",
                    dovecot.message_count(WARM_UP_ACCOUNT.split("@")[0]), dovecot_warm)
        first = _dovecot_lmtp_run(dovecot, addressed(blobs, leg_accounts(names, f"d{conns}a")),
                                  conns)
        data = root / f"lmtp-{conns}conn"
        letterlog_init(data, env)
        accounts = leg_accounts(names, f"l{conns}")
        messages = addressed(blobs, accounts)
        with letterlog_lmtp(data, root / f"lmtp-{conns}.sock", env,
                            root / f"lmtp-{conns}.log") as server:
            warm = warm_up_lmtp(root / f"lmtp-{conns}.sock", conns)
            before, client_before = cpu_snapshot(server.pid), time.process_time()
            seconds = lmtp_deliver(root / f"lmtp-{conns}.sock", messages, conns)
            client_cpu = round(1000 * (time.process_time() - client_before) / n, 3)
            letterlog_cpu = cpu_ms_per_message(before, cpu_snapshot(server.pid), n)
        counts = letterlog_counts(data, [*accounts, WARM_UP_ACCOUNT])
        check_count(f"letterlog LMTP warm-up, {conns} connection(s)",
                    counts.pop(WARM_UP_ACCOUNT), warm)
        for account, expected in per_account(messages).items():
            check_count(f"letterlog LMTP, {conns} connection(s), {account}",
                        counts[account], expected)
        floor, floor_cpu = protocol_floor(messages[:FLOOR_MESSAGES], conns, root, env)
        second = _dovecot_lmtp_run(dovecot, addressed(blobs, leg_accounts(names, f"d{conns}b")),
                                   conns)
        dovecot_rates = [first[0], second[0]]
        ours, theirs = rate(n, seconds), mean_rate(dovecot_rates)
        result[f"lmtp_{conns}conn_msgs_per_s"] = ours
        result[f"dovecot_lmtp_{conns}conn_msgs_per_s"] = theirs
        result[f"dovecot_lmtp_{conns}conn_runs_before_and_after"] = dovecot_rates
        result[f"ratio_lmtp_vs_dovecot_lmtp_{conns}conn"] = ratio(ours, theirs)
        # the protocol layer alone (aiosmtpd, nothing stored): the ratio no store behind it
        # could pass on this machine
        result[f"lmtp_{conns}conn_protocol_floor_msgs_per_s"] = floor
        result[f"ratio_protocol_floor_vs_dovecot_lmtp_{conns}conn"] = ratio(floor, theirs)
        # CPU ms per message: letterlog's event loop (main), writer (threads) and projecting
        # process (children); Dovecot's master, lmtp, auth... processes (children)
        result[f"lmtp_{conns}conn_server_cpu_ms_per_msg"] = letterlog_cpu
        result[f"lmtp_{conns}conn_client_cpu_ms_per_msg"] = client_cpu
        result[f"lmtp_{conns}conn_protocol_floor_server_cpu_ms_per_msg"] = floor_cpu
        # what today's store allows at best behind a free-as-the-floor protocol layer
        ceiling = lmtp_ceilings(conns, floor, floor_cpu, letterlog_cpu, client_cpu,
                                os.cpu_count() or 1)
        result[f"lmtp_{conns}conn_ceiling_msgs_per_s"] = ceiling
        result[f"ratio_ceiling_vs_dovecot_lmtp_{conns}conn"] = ratio(ceiling, theirs)
        result[f"dovecot_lmtp_{conns}conn_server_cpu_ms_per_msg"] = {
            k: round(statistics.fmean((first[1][k], second[1][k])), 3) for k in second[1]}
    result["target_ratio_lmtp_vs_dovecot_lmtp"] = 2.0  # one connection (and the default)
    result["target_ratio_lmtp_vs_dovecot_lmtp_4conn"] = 1.5  # issue 44: 1.5 over four
    return result


def _dovecot_lmtp_run(dovecot: Any, messages: list[tuple[str, bytes]],
                      conns: int) -> tuple[float, dict[str, float]]:
    """One timed run against Dovecot's LMTP, counted: its rate and CPU ms per message."""
    before = cpu_snapshot(dovecot.proc.pid)
    seconds = lmtp_deliver(dovecot.lmtp_socket, messages, conns)
    cpu = cpu_ms_per_message(before, cpu_snapshot(dovecot.proc.pid), len(messages))
    for account, expected in per_account(messages).items():
        check_count(f"Dovecot LMTP, {conns} connection(s), {account}",
                    dovecot.message_count(account.split("@")[0]), expected)
    return rate(len(messages), seconds), cpu


def lda_leg(dovecot: Any, blobs: Sequence[bytes], names: Sequence[str], root: Path,
            env: dict[str, str]) -> dict[str, Any]:
    """One process per message: ``letterlog lda`` alone, through a command server and
    handing its message to a running ``letterlog lmtp`` (the served lda of the target, ADR
    0060), against ``dovecot-lda`` (before and after)."""
    from devtools.bench.common import command_server

    n = len(blobs)
    alone = private_runtime(env, root / "run-lda-alone")
    letterlog = letterlog_command()

    def ours(data: Path, messages: list[tuple[str, bytes]],
             program: list[str] = letterlog) -> list[tuple[list[str], bytes]]:
        return [([*program, "--data", str(data), "lda", "--recipient", account,
                  "--sender", SENDER, "--queue-id", f"Q{data.name}{i}"], raw)
                for i, (account, raw) in enumerate(messages)]

    def theirs(messages: list[tuple[str, bytes]]) -> list[tuple[list[str], bytes]]:
        return [(dovecot.lda_command(account, SENDER), raw) for account, raw in messages]

    def check_dovecot(messages: list[tuple[str, bytes]], what: str) -> None:
        for account, expected in per_account(messages).items():
            check_count(f"{what}, {account}", dovecot.message_count(account.split("@")[0]),
                        expected)

    def check_ours(data: Path, messages: list[tuple[str, bytes]], what: str) -> None:
        counts = letterlog_counts(data, list(per_account(messages)))
        for account, expected in per_account(messages).items():
            check_count(f"{what}, {account}", counts[account], expected)

    # untimed: each side's first process (letterlog's bytecode cache, Dovecot's auth)
    warm_data = root / "lda-warm-up"
    letterlog_init(warm_data, alone)
    run_each(ours(warm_data, [(WARM_UP_ACCOUNT, blobs[0])]), alone, "letterlog lda warm-up")
    run_each(theirs([("warm-up-lda@example.org", blobs[0])]), None, "dovecot-lda warm-up")

    dovecot_rates = []
    before = addressed(blobs, leg_accounts(names, "lda-a"))
    dovecot_rates.append(rate(n, run_each(theirs(before), None, "dovecot-lda")))
    check_dovecot(before, "dovecot-lda")

    data = root / "lda"
    letterlog_init(data, alone)
    messages = addressed(blobs, leg_accounts(names, "lda"))
    cold = rate(n, run_each(ours(data, messages), alone, "letterlog lda"))
    check_ours(data, messages, "letterlog lda")

    bounds: dict[str, float] = {
        "python_c_pass_ms": startup_ms([sys.executable, "-c", "pass"], alone),
        "letterlog_version_ms": startup_ms([*letterlog, "--version"], alone),
    }
    forked_data = root / "lda-forked"
    letterlog_init(forked_data, alone)
    forked_messages = addressed(blobs, leg_accounts(names, "lda-f"))
    with command_server(env, root / "run-lda-forked") as forking:
        run_each(ours(forked_data, [(WARM_UP_ACCOUNT, blobs[0])]), forking,
                 "letterlog lda warm-up, command server")
        forked_rate = rate(n, run_each(ours(forked_data, forked_messages), forking,
                                       "letterlog lda, command server"))
        bounds["letterlog_version_with_server_ms"] = startup_ms([*letterlog, "--version"],
                                                                forking)
    counts = letterlog_counts(forked_data, [*per_account(forked_messages), WARM_UP_ACCOUNT])
    check_count("letterlog lda warm-up, command server", counts.pop(WARM_UP_ACCOUNT), 1)
    for account, expected in per_account(forked_messages).items():
        check_count(f"letterlog lda, command server, {account}", counts[account], expected)

    # the fast path (ADR 0060): a letterlog lmtp of the data directory takes each lda's
    # message over DATA/lda.sock and delivers it with the store open
    served_data = root / "lda-served"
    letterlog_init(served_data, alone)
    served_messages = addressed(blobs, leg_accounts(names, "lda-s"))
    client = lda_client_command()
    client_messages = addressed(blobs, leg_accounts(names, "lda-k"))
    with letterlog_lmtp(served_data, root / "lda-served.sock", alone,
                        root / "lda-served.log"):
        if not (served_data / "lda.sock").is_socket():
            raise RuntimeError("letterlog lmtp does not listen on DATA/lda.sock")
        run_each(ours(served_data, [(WARM_UP_ACCOUNT, blobs[0])]), alone,
                 "letterlog lda warm-up, lmtp server")
        served_rate = rate(n, run_each(ours(served_data, served_messages), alone,
                                       "letterlog lda, lmtp server"))
        # the same, through the compiled hand-off client (ADR 0087)
        client_rate = rate(n, run_each(ours(served_data, client_messages, client), alone,
                                       "letterlog-lda, lmtp server"))
        bounds["letterlog_lda_client_falling_back_ms"] = startup_ms(
            [*client, "--data", str(root / "no-store"), "lda", "--help"], alone, runs=5)
    counts = letterlog_counts(served_data, [*per_account(served_messages),
                                            *per_account(client_messages), WARM_UP_ACCOUNT])
    check_count("letterlog lda warm-up, lmtp server", counts.pop(WARM_UP_ACCOUNT), 1)
    for account, expected in per_account(served_messages).items():
        check_count(f"letterlog lda, lmtp server, {account}", counts[account], expected)
    for account, expected in per_account(client_messages).items():
        check_count(f"letterlog-lda, lmtp server, {account}", counts[account], expected)

    after = addressed(blobs, leg_accounts(names, "lda-b"))
    dovecot_rates.append(rate(n, run_each(theirs(after), None, "dovecot-lda")))
    check_dovecot(after, "dovecot-lda")

    dovecot_rate = mean_rate(dovecot_rates)
    bounds["dovecot_lda_ms_per_msg"] = round(1000 / dovecot_rate, 2)
    bounds["letterlog_lda_ms_per_msg"] = round(1000 / cold, 2)
    bounds["letterlog_lda_with_server_ms_per_msg"] = round(1000 / served_rate, 2)
    bounds["letterlog_lda_with_command_server_ms_per_msg"] = round(1000 / forked_rate, 2)
    bounds["letterlog_lda_client_with_server_ms_per_msg"] = round(1000 / client_rate, 2)
    # the ratio if an lda through the server cost no more than a forwarded --version, and
    # if a process cost no more than the interpreter's start
    bounds["ratio_ceiling_version_with_server"] = round(
        1000 / bounds["letterlog_version_with_server_ms"] / dovecot_rate, 3)
    bounds["ratio_ceiling_python_start"] = round(
        1000 / bounds["python_c_pass_ms"] / dovecot_rate, 3)
    return {
        "lda_messages": n,
        "lda_msgs_per_s": cold,
        "lda_with_server_msgs_per_s": served_rate,
        "lda_with_command_server_msgs_per_s": forked_rate,
        "dovecot_lda_msgs_per_s": dovecot_rate,
        "dovecot_lda_runs_before_and_after": dovecot_rates,
        "ratio_lda_vs_dovecot_lda": ratio(cold, dovecot_rate),
        "ratio_lda_with_server_vs_dovecot_lda": ratio(served_rate, dovecot_rate),
        "ratio_lda_with_command_server_vs_dovecot_lda": ratio(forked_rate, dovecot_rate),
        "lda_client_with_server_msgs_per_s": client_rate,
        "ratio_lda_client_with_server_vs_dovecot_lda": ratio(client_rate, dovecot_rate),
        "target_ratio_lda_with_server_vs_dovecot_lda": 0.5,
        "target_ratio_lda_client_with_server_vs_dovecot_lda": 0.8,
        "lda_bounds": bounds,
    }


def mta_targets_met(result: dict[str, Any]) -> bool:
    """Each LMTP ratio at its target (``target_ratio_lmtp_vs_dovecot_lmtp_{N}conn``, else
    ``target_ratio_lmtp_vs_dovecot_lmtp``) and both lda ratios at theirs."""
    default = result["target_ratio_lmtp_vs_dovecot_lmtp"]
    return (all(result[f"ratio_lmtp_vs_dovecot_lmtp_{c}conn"]
                >= result.get(f"target_ratio_lmtp_vs_dovecot_lmtp_{c}conn", default)
                for c in CONNECTIONS)
            and result["ratio_lda_with_server_vs_dovecot_lda"]
            >= result["target_ratio_lda_with_server_vs_dovecot_lda"]
            and result.get("ratio_lda_client_with_server_vs_dovecot_lda", 0.0)
            >= result.get("target_ratio_lda_client_with_server_vs_dovecot_lda", 0.0))


def compare_delivery_agents(dovecot: Any, blobs: Sequence[bytes], names: Sequence[str],
                            root: Path, env: dict[str, str], lda_messages: int,
                            progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Both MTA legs against the running ``dovecot``; the keys they add."""
    if lda_messages < 1:
        raise ValueError(f"lda_messages must be at least 1, not {lda_messages}")
    alone = private_runtime(env, root / "run-alone")
    if progress:
        progress("LMTP: letterlog lmtp against Dovecot's, 1 and 4 connections")
    result = lmtp_leg(dovecot, blobs, names, root, alone)
    if progress:
        progress(f"LDA: {lda_messages} processes a side")
    result.update(lda_leg(dovecot, blobs[:lda_messages], names, root, env))
    result["meets_mta_targets"] = mta_targets_met(result)
    return result
