"""``bench ingest --peer dovecot``: letterlog against Dovecot on the same messages, same run.

* import: ``letterlog import mbox`` against ``doveadm import`` of the same mbox, each a whole
  process (start-up included); Dovecot runs right before and right after letterlog and the
  mean is its rate (the machine's speed drifts within a minute). letterlog's bytecode is
  cached, as an installed package has it (pip compiles it at install): its processes keep
  it under the run's directory (``PYTHONPYCACHEPREFIX``), whatever
  ``PYTHONDONTWRITEBYTECODE`` says, and an untimed import of the mbox's first 150 messages
  (two batches, so the projecting second process starts too) fills it first. Without a
  cache every module of a source checkout is compiled in both processes on every start.
  The import's CPU a message (user + system, its projecting child's included) and the load
  average before and after it are in the JSON; its target, ``IMPORT_TARGET`` (0.6 of
  doveadm's rate), is the import-only leg's too.
  The same import is also timed through a command server (``letterlog server start``,
  ADR 0032) started for the run: its client starts in ~30 ms and the import runs in a fork
  of the warm server (``import_with_server_msgs_per_s``; the target stays on the import
  alone);
* one durable delivery at a time: letterlog's single-command rates (measured by the caller:
  read models projected by each command, and by a second process while a long-lived
  process delivers, ADR 0037) against LMTP deliveries over one connection
  (``mail_fsync = always``); the single target is met if either reaches it
  (``single_target_met_by`` says which, the inline one first);
* bytes on disk (allocated blocks) per byte of mail delivered, after the import, for both;
* the MTA legs (``devtools.bench.mta``): ``letterlog lmtp`` against Dovecot's LMTP over one
  and four connections, and ``letterlog lda`` (without and with a command server) against
  ``dovecot-lda``, one process per message.

No letterlog process of the run finds a command server of the user's: ``XDG_RUNTIME_DIR``
is a private directory of the run (the one of the run's own server where it is timed).
"""

from __future__ import annotations

import mailbox
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from adapters.files.datadir import disk_bytes
from devtools.bench.common import command_server
from devtools.devservers.dovecot import DovecotServer

IMPORT_ACCOUNT = "importer@example.org"
IMPORT_TARGET = 0.6  # letterlog's import against doveadm's, both legs (issue 44)
IMPORT_RATE_TARGET = 2039  # msgs/s: the import's rate before the features of its turn
LDA_MESSAGES = 300  # processes a side in the LDA leg (letterlog's alone take ~0.4 s each)


def write_mbox(blobs: Sequence[bytes], path: Path) -> int:
    """Write the messages as one mbox file; the bytes of mail it holds (as read back)."""
    box = mailbox.mbox(str(path))
    box.lock()
    try:
        for blob in blobs:
            box.add(blob)
        box.flush()
    finally:
        box.unlock()
        box.close()
    box = mailbox.mbox(str(path), create=False)
    try:
        return sum(len(box.get_bytes(k)) for k in box.iterkeys())
    finally:
        box.close()


def installed_env(bytecode: Path) -> dict[str, str]:
    """This process's environment, with bytecode cached under ``bytecode`` (as installed)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": str(bytecode)}


def letterlog_import(mbox: Path, data: Path, env: dict[str, str] | None = None,
                     cpu: list[float] | None = None) -> float:
    """Seconds of one ``letterlog import mbox`` process (start-up included). ``cpu``: the
    process's CPU seconds (user + system, its projecting child's included) appended."""
    cmd = [sys.executable, "-m", "adapters.cli", "--data", str(data), "--json",
           "import", "mbox", str(mbox), "--account", IMPORT_ACCOUNT]
    made = subprocess.run([*cmd[:5], "init"], capture_output=True, text=True, check=False,
                          env=env)  # the store is made first (untimed), as a user does
    if made.returncode != 0:
        raise RuntimeError(f"letterlog init failed ({made.returncode}): {made.stderr}")
    before = _children_cpu()
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    seconds = time.perf_counter() - t0
    if cpu is not None:
        cpu.append(_children_cpu() - before)
    if done.returncode != 0:
        raise RuntimeError(f"letterlog import mbox failed ({done.returncode}): {done.stderr}")
    return seconds


def _children_cpu() -> float:
    """CPU seconds of this process's waited-for descendants (theirs waited for included)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else float("inf")


def compare_with_dovecot(blobs: Sequence[bytes], recipients: Sequence[str], root: Path,
                         single_msgs_per_s: float,
                         single_pipelined_msgs_per_s: float | None = None, *,
                         lda_messages: int = LDA_MESSAGES,
                         progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run Dovecot beside letterlog on ``blobs``; the keys ``bench ingest`` adds.
    ``lda_messages``: the processes a side of the LDA leg (the first of ``blobs``)."""
    from devtools.bench.memory import memory_leg
    from devtools.bench.mta import compare_delivery_agents, private_runtime

    mbox = root / "bench.mbox"
    mail_bytes = write_mbox(blobs, mbox)
    n = len(blobs)
    env = private_runtime(installed_env(root / "bytecode"), root / "run-none")
    write_mbox(blobs[:150], root / "warm-up.mbox")
    letterlog_import(root / "warm-up.mbox", root / "warm-up", env)  # fills the bytecode cache
    load = [round(os.getloadavg()[0], 2)]
    cpu: list[float] = []
    with DovecotServer() as dovecot, command_server(env, root / "run") as served:
        dovecot_import_s = [dovecot.import_mbox(mbox, "before")]
        letterlog_s = letterlog_import(mbox, root / "import", env, cpu)
        served_s = letterlog_import(mbox, root / "import-served", served)
        dovecot_import_s.append(dovecot.import_mbox(mbox, "after"))
        load.append(round(os.getloadavg()[0], 2))
        imported = dovecot.message_count("before")
        if imported != n:
            raise RuntimeError(f"doveadm import stored {imported} of {n} messages")
        dovecot_bytes = dovecot.user_bytes_on_disk("before")
        t0 = time.perf_counter()
        dovecot.deliver_lmtp(zip((recipients[i % len(recipients)] for i in range(n)), blobs,
                                 strict=True))
        lmtp = _rate(n, time.perf_counter() - t0)
        delivery_agents = compare_delivery_agents(
            dovecot, blobs, [r.split("@")[0] for r in recipients], root, env,
            min(lda_messages, n), progress)
        if progress:
            progress("memory: peak resident set per delivery, a small and a 40 MiB message")
        delivery_agents["memory"] = memory_leg(dovecot, blobs[0], root, env)
    letterlog_bytes = disk_bytes(root / "import")
    letterlog_rate = _rate(n, letterlog_s)
    dovecot_rate = _rate(n, statistics.fmean(dovecot_import_s))
    result = {
        "peer": "dovecot",
        "mail_bytes": mail_bytes,
        "import_msgs_per_s": letterlog_rate,
        "import_seconds": round(letterlog_s, 3),
        "import_cpu_ms_per_msg": round(1000 * cpu[0] / n, 3),
        "import_load_average_start_and_end": load,
        "dovecot_import_msgs_per_s": dovecot_rate,
        "dovecot_import_seconds_before_and_after": [round(s, 3) for s in dovecot_import_s],
        "ratio_import_vs_dovecot": round(letterlog_rate / dovecot_rate, 3),
        "import_with_server_msgs_per_s": _rate(n, served_s),
        "ratio_import_with_server_vs_dovecot": round(_rate(n, served_s) / dovecot_rate, 3),
        "dovecot_lmtp_msgs_per_s": lmtp,
        "ratio_single_vs_dovecot_lmtp": round(single_msgs_per_s / lmtp, 3),
        "bytes_on_disk": letterlog_bytes,
        "dovecot_bytes_on_disk": dovecot_bytes,
        "storage_amplification": round(letterlog_bytes / mail_bytes, 3),
        "dovecot_storage_amplification": round(dovecot_bytes / mail_bytes, 3),
        "target_ratio_import_vs_dovecot": IMPORT_TARGET,
        "target_ratio_single_vs_dovecot_lmtp": 2.0,
        "target_storage_amplification": 1.2,
    }
    if single_pipelined_msgs_per_s is not None:
        result["ratio_single_pipelined_vs_dovecot_lmtp"] = round(
            single_pipelined_msgs_per_s / lmtp, 3)
    result["single_target_met_by"] = _single_target_met_by(result)
    result.update(delivery_agents)
    return result


def compare_import_with_dovecot(blobs: Sequence[bytes], root: Path) -> dict[str, Any]:
    """The import leg alone (``bench ingest --peer dovecot --import-only``): ``letterlog
    import mbox`` against ``doveadm import`` of the same mbox, whole processes, Dovecot
    right before and right after, with the CPU a message of letterlog's import (its
    projecting child included) and the load average at the start and the end."""
    from devtools.bench.mta import private_runtime

    mbox = root / "bench.mbox"
    mail_bytes = write_mbox(blobs, mbox)
    n = len(blobs)
    env = private_runtime(installed_env(root / "bytecode"), root / "run-none")
    write_mbox(blobs[:150], root / "warm-up.mbox")
    letterlog_import(root / "warm-up.mbox", root / "warm-up", env)  # fills the bytecode cache
    load = [round(os.getloadavg()[0], 2)]
    cpu: list[float] = []
    startup_s, startup_cpu = _startup(blobs[0], root, env)
    with DovecotServer() as dovecot:
        dovecot_import_s = [dovecot.import_mbox(mbox, "before")]
        letterlog_s = letterlog_import(mbox, root / "import", env, cpu)
        dovecot_import_s.append(dovecot.import_mbox(mbox, "after"))
        imported = dovecot.message_count("before")
        if imported != n:
            raise RuntimeError(f"doveadm import stored {imported} of {n} messages")
    load.append(round(os.getloadavg()[0], 2))
    letterlog_bytes = disk_bytes(root / "import")
    letterlog_rate = _rate(n, letterlog_s)
    dovecot_rate = _rate(n, statistics.fmean(dovecot_import_s))
    # the most this import's work allows on this machine: its start-up, then the CPU of its
    # processes past start-up spread over every core without a moment lost
    cores = len(os.sched_getaffinity(0))
    ceiling = _rate(n, startup_s + max(0.0, cpu[0] - startup_cpu) / cores)
    return {
        "peer": "dovecot",
        "import_only": True,
        "mail_bytes": mail_bytes,
        "import_msgs_per_s": letterlog_rate,
        "import_seconds": round(letterlog_s, 3),
        "import_cpu_ms_per_msg": round(1000 * cpu[0] / n, 3),
        "import_startup_seconds": round(startup_s, 3),
        "import_startup_cpu_seconds": round(startup_cpu, 3),
        "import_ceiling_msgs_per_s": ceiling,
        "ratio_import_ceiling_vs_dovecot": round(ceiling / dovecot_rate, 3),
        "dovecot_import_msgs_per_s": dovecot_rate,
        "dovecot_import_seconds_before_and_after": [round(s, 3) for s in dovecot_import_s],
        "ratio_import_vs_dovecot": round(letterlog_rate / dovecot_rate, 3),
        "target_ratio_import_vs_dovecot": IMPORT_TARGET,
        "target_import_msgs_per_s": IMPORT_RATE_TARGET,
        "storage_amplification": round(letterlog_bytes / mail_bytes, 3),
        "load_average_start_and_end": load,
    }


def _startup(blob: bytes, root: Path, env: dict[str, str]) -> tuple[float, float]:
    """The import's fixed cost: the fastest of three imports of a one-message mbox (into a
    fresh store each), in seconds and CPU seconds (its start, its one append, its exit)."""
    one = root / "one.mbox"
    write_mbox([blob], one)
    runs = []
    for i in range(3):
        cpu: list[float] = []
        seconds = letterlog_import(one, root / f"one-{i}", env, cpu)
        runs.append((seconds, cpu[0]))
    return min(runs)


def _single_target_met_by(result: dict[str, Any]) -> str | None:
    target = result["target_ratio_single_vs_dovecot_lmtp"]
    for way, key in (("inline", "ratio_single_vs_dovecot_lmtp"),
                     ("pipelined", "ratio_single_pipelined_vs_dovecot_lmtp")):
        if result.get(key, 0) >= target:
            return way
    return None


def peer_targets_met(result: dict[str, Any]) -> bool:
    return (result["ratio_import_vs_dovecot"] >= result["target_ratio_import_vs_dovecot"]
            and result["single_target_met_by"] is not None
            and result["storage_amplification"] <= result["target_storage_amplification"])


def peer_plot(path: Path, result: dict[str, Any]) -> None:
    """Three panels: messages/s of both systems (import, single deliveries, LMTP servers),
    bytes on disk per byte of mail, and (below) one process per message (LDA)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = {
        "letterlog import mbox": result["import_msgs_per_s"],
        "letterlog import mbox, server": result["import_with_server_msgs_per_s"],
        "dovecot doveadm import": result["dovecot_import_msgs_per_s"],
        "letterlog single command": result["single_command_msgs_per_s"],
        "letterlog single, pipelined": result["single_pipelined_msgs_per_s"],
        "dovecot LMTP, one connection": result["dovecot_lmtp_msgs_per_s"],
    }
    lda: dict[str, float] = {}
    if "lmtp_1conn_msgs_per_s" in result:
        for conns in (1, 4):
            rates[f"letterlog lmtp, {conns} conn."] = result[f"lmtp_{conns}conn_msgs_per_s"]
            rates[f"dovecot LMTP, {conns} conn. (same client)"] = result[
                f"dovecot_lmtp_{conns}conn_msgs_per_s"]
            floor = result.get(f"lmtp_{conns}conn_protocol_floor_msgs_per_s")
            if floor is not None:
                rates[f"LMTP protocol alone (stores nothing), {conns} conn."] = floor
            ceiling = result.get(f"lmtp_{conns}conn_ceiling_msgs_per_s")
            if ceiling is not None:
                rates[f"LMTP ceiling with today's store, {conns} conn."] = ceiling
        lda = {"letterlog lda": result["lda_msgs_per_s"],
               "letterlog lda, command server": result.get(
                   "lda_with_command_server_msgs_per_s", result["lda_with_server_msgs_per_s"]),
               **({"letterlog lda, lmtp server (fast path)": result["lda_with_server_msgs_per_s"]}
                  if "lda_with_command_server_msgs_per_s" in result else {}),
               **({"letterlog-lda (compiled client), lmtp server":
                   result["lda_client_with_server_msgs_per_s"]}
                  if "lda_client_with_server_msgs_per_s" in result else {}),
               "dovecot-lda": result["dovecot_lda_msgs_per_s"]}
    storage = {"letterlog": result["storage_amplification"],
               "dovecot": result["dovecot_storage_amplification"]}
    fig = plt.figure(figsize=(10, 4.6 + (1.9 if lda else 0)))
    grid = fig.add_gridspec(2 if lda else 1, 2, width_ratios=[3, 1.4],
                            height_ratios=[len(rates), len(lda) + 1] if lda else None)
    left, right = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
    panels = [(left, rates, "messages/s"), (right, storage, "bytes on disk per byte of mail")]
    if lda:
        panels.append((fig.add_subplot(grid[1, :]), lda,
                       f"messages/s, one process per message ({result['lda_messages']} a side)"))
    for ax, values, unit in panels:
        names = list(values)
        colours = ["#3465a4" if n.startswith("letterlog") else "#888a85" for n in names]
        ax.barh(names, [values[n] for n in names], color=colours)
        for i, name in enumerate(names):
            ax.text(values[name], i, f" {values[name]:,.2f}" if values[name] < 10
                    else f" {values[name]:,.0f}", va="center", fontsize=8)
        ax.set_xlabel(unit)
    left.set_title(f"letterlog vs Dovecot (mdbox, mail_fsync=always), {result['messages']} msgs")
    right.axvline(result["target_storage_amplification"], color="#cc0000", linestyle="--")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
