"""``letterlog bench startup``: how long a simple command takes, whole process, against the
floors measured in the same run: the interpreter alone; the interpreter importing typer (what
every command runs); the interpreter importing what a write needs at least (typer,
pydantic, the eventsourcing library and the domain's aggregates and event classes).

Reads (``list``) take the fast read path (ADR 0024); ``show`` reads the log; ``flag`` writes.
The processes get ``LETTERLOG_DATA`` and ``LETTERLOG_DURABILITY`` and no other ``LETTERLOG_``
variable (another one sends a read through the whole store: see docs/cli.md).

Each command runs ``runs`` times as a fresh process on a small store made for the run, after
one untimed run; the result is the median wall time and the median CPU time (user + system,
from ``wait4``: less sensitive than wall time to other processes on a busy machine).

The same commands are then timed through the command server (``letterlog server start``,
ADR 0032), started for the run in its own runtime directory: a fresh client process hands
the command line to the warm server, which runs it in a fork. Their wall time is what the
user waits for; their ``client_cpu_ms`` is the client's alone (the command's CPU is the
server's children's, not counted). The run checks that the server did run them.

Bytecode is cached as an installed package has it (pip compiles it at install): the
processes write and read it under the run's temporary directory (``PYTHONPYCACHEPREFIX``),
whatever ``PYTHONDONTWRITEBYTECODE`` says. Without a cache every module of a source checkout
is compiled on every start (``list``: ~+40 ms).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from devtools.bench.common import command_server

TARGET_MS = 150.0
WRITE_FLOOR = "python + a write's imports"
WRITE_IMPORTS = ("from adapters.startup import dataclass_code; dataclass_code.install(); "
                 "import typer, pydantic, eventsourcing.sqlite, domain.service")
"""What a write imports at least, its event classes' methods compiled once as every
``letterlog`` process has them (ADR 0116)."""
MAIL = (b"From: ada@example.org\r\nTo: grace@example.org\r\nSubject: startup\r\n"
        b"Date: Sun, 01 Mar 2026 12:00:00 +0000\r\nMessage-ID: <s@x>\r\n\r\nHello.\r\n")


def _time(argv: list[str], runs: int, env: dict[str, str]) -> dict[str, float]:
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                   check=False)  # untimed: fills the bytecode cache
    walls, cpus = [], []
    for _ in range(runs):
        start = time.perf_counter()
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        walls.append(time.perf_counter() - start)
        cpus.append(usage.ru_utime + usage.ru_stime)
        if status != 0:
            raise RuntimeError(f"{' '.join(argv)} exited with status {status >> 8}")
    return {"wall_ms": round(statistics.median(walls) * 1000, 1),
            "cpu_ms": round(statistics.median(cpus) * 1000, 1)}


def _served(commands: dict[str, list[str]], runs: int, env: dict[str, str],
            runtime: Path) -> dict[str, dict[str, float]]:
    """``commands`` timed through a command server started for them (``client_cpu_ms``:
    the client process's CPU alone)."""
    with command_server(env, runtime) as served:
        timed = {k: _time(v, runs, served) for k, v in commands.items()}
    return {k: {"wall_ms": t["wall_ms"], "client_cpu_ms": t["cpu_ms"]} for k, t in timed.items()}


def bench_startup(runs: int = 11, plot: Path | None = None) -> dict[str, Any]:
    py = sys.executable
    cli = [py, "-m", "adapters.cli"]
    with tempfile.TemporaryDirectory(prefix="letterlog-startup-") as tmp:
        data, mail = Path(tmp) / "d", Path(tmp) / "m.eml"
        mail.write_bytes(MAIL)
        env = {**{k: v for k, v in os.environ.items()
                  if not k.upper().startswith("LETTERLOG_") and k != "PYTHONDONTWRITEBYTECODE"},
               "LETTERLOG_DATA": str(data), "LETTERLOG_DURABILITY": "normal",
               "PYTHONPYCACHEPREFIX": str(Path(tmp) / "bytecode")}
        subprocess.run([*cli, "init"], capture_output=True, env=env, check=True)
        out = subprocess.run([*cli, "--json", "deliver", "--account", "ada@example.org",
                              str(mail)], capture_output=True, env=env, check=True).stdout
        mid = out.decode().split('"message_id": "', 1)[1].split('"', 1)[0]
        commands = {
            "help": [*cli, "--help"],
            "list": [*cli, "list", "ada@example.org"],
            "show": [*cli, "show", mid],
            "flag": [*cli, "flag", mid, "\\Seen"],
        }
        floors = {"python": [py, "-c", "pass"], "python + import typer": [py, "-c", "import typer"],
                  WRITE_FLOOR: [py, "-c", WRITE_IMPORTS]}
        result: dict[str, Any] = {
            "benchmark": "startup", "runs": runs, "target_ms": TARGET_MS, "bytecode": "cached",
            "load_average_before": round(os.getloadavg()[0], 2),
            "floors": {k: _time(v, runs, env) for k, v in floors.items()},
            "commands": {k: _time(v, runs, env) for k, v in commands.items()},
            "with_server": _served(commands, runs, env, Path(tmp) / "run"),
            "load_average_after": round(os.getloadavg()[0], 2),
        }
    for timing in [*result["commands"].values(), *result["with_server"].values()]:
        timing["meets_target"] = timing["wall_ms"] <= TARGET_MS
    result["meets_target"] = all(c["meets_target"] for c in result["commands"].values())
    result["meets_target_with_server"] = all(c["meets_target"]
                                             for c in result["with_server"].values())
    if plot is not None:
        from devtools.bench.ingest import bar_plot

        values = {f"letterlog {k}": v["wall_ms"] for k, v in result["commands"].items()}
        values.update({f"letterlog {k}, server": v["wall_ms"]
                       for k, v in result["with_server"].items()})
        values.update({k: v["wall_ms"] for k, v in result["floors"].items()})
        bar_plot(plot, "start-up, median wall time per process", values, "ms")
        result["plot"] = str(plot)
    return result
