"""What the benchmarks share: progress bars (rich, on stderr, only on a terminal), rates, phase
clocks (wall and CPU time), the machine's load, peak memory, a command server for a run, and
bar plots (letterlog's bars blue, baselines grey, targets red).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SYNCHRONOUS = "NORMAL"  # the embedded default for tables (and durability=normal for the log)


@contextmanager
def progress_bars() -> Iterator[Any]:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(f"{task.speed or 0:>9,.0f}/s", style="progress.data.speed")

    console = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), Rate(),
                  TimeElapsedColumn(), console=console, transient=True,
                  disable=not console.is_terminal) as progress:
        yield progress


def counted(items: Iterable[Any], progress: Any, task: Any, every: int = 5000) -> Iterator[Any]:
    done = 0
    for item in items:
        yield item
        done += 1
        if done % every == 0:
            progress.update(task, completed=done)
    progress.update(task, completed=done)


def rate(n: int | float, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else float("inf")


class PhaseClock:
    """Wall and process CPU time of a phase: a CPU share well below 1 means the machine was
    busy with other work while we measured (compare ratios, not absolutes, then).
    ``children``: the CPU of the child processes the phase waited for counts too."""

    def __init__(self, *, children: bool = False) -> None:
        self.children = children
        self.wall0, self.cpu0 = time.perf_counter(), self._cpu()
        self.wall = self.cpu = 0.0

    def _cpu(self) -> float:
        if not self.children:
            return time.process_time()
        t = os.times()
        return time.process_time() + t.children_user + t.children_system

    def stop(self) -> float:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = self._cpu() - self.cpu0
        return self.wall

    @property
    def share(self) -> float:
        return round(self.cpu / self.wall, 2) if self.wall > 0 else 0.0


@contextmanager
def command_server(env: dict[str, str], runtime: Path) -> Iterator[dict[str, str]]:
    """A command server (ADR 0032) for a run, in its own runtime directory ``runtime``;
    yields ``env`` for its clients. Checks that it runs commands (``forward`` answers)."""
    runtime.mkdir(mode=0o700)
    env = {**env, "XDG_RUNTIME_DIR": str(runtime)}
    cli = [sys.executable, "-m", "adapters.cli"]
    subprocess.run([*cli, "server", "start"], env=env, check=True, capture_output=True)
    try:
        check = ("import sys; from adapters.startup.commandclient import forward; "
                 "sys.exit(0 if forward(['--version']) == 0 else 3)")
        subprocess.run([sys.executable, "-c", check], env=env, check=True,
                       stdout=subprocess.DEVNULL)  # exit 3: it did not run the command
        yield env
    finally:
        subprocess.run([*cli, "server", "stop"], env=env, check=True, capture_output=True)


def _cpu_work(rounds: int) -> float:
    """Seconds of a fixed, CPU-bound Python workload (pack, unpack and compress records, as
    a fold's decoding does), timed inside the process that runs it."""
    import zlib

    import msgpack

    records = [{"position": i, "type": "Message.Delivered", "flags": ["\\Seen"],
                "subject": "x" * 40} for i in range(2000)]
    t0 = time.perf_counter()
    for _ in range(rounds):
        packed = msgpack.packb(records)
        msgpack.unpackb(packed)
        zlib.compress(packed, 1)
    return time.perf_counter() - t0


def _cpu_work_where(rounds: int) -> int:
    _cpu_work(rounds)
    return os.getpid()


def two_process_scaling(rounds: int = 600, repeat: int = 3) -> dict[str, Any]:
    """How much faster two processes do twice the work than one does it once, on this
    machine, now: the raw ceiling of any 2-worker speedup (2.0 on two idle cores of their
    own; less where the cores share a physical core, a cache or a hypervisor's time).
    ``repeat`` alternations of one process then two; the median counts."""
    import multiprocessing
    import statistics

    runs: list[float] = []
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.map(_cpu_work, [1, 1])  # both workers started and warm
        for _ in range(3 * repeat):  # bounded: a pool may keep giving both to one worker
            if len(runs) == repeat:
                break
            one = pool.apply(_cpu_work, (rounds,))
            t0 = time.perf_counter()
            workers = pool.map(_cpu_work_where, [rounds, rounds], chunksize=1)
            two = time.perf_counter() - t0
            if len(set(workers)) == 2:  # else one worker did both: not two at once
                runs.append(round(2 * one / two, 3))
    if not runs:
        raise RuntimeError("two_process_scaling: no run had two workers at once")
    return {"median": statistics.median(runs), "runs": runs}


def load_avg() -> float:
    return round(os.getloadavg()[0], 2)


def max_rss_mb() -> float:
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def bar_panels(path: Path, title: str, panels: list[tuple[str, dict[str, float]]],
                fmt: str = "{:,.0f}") -> None:
    """Horizontal bars, one panel per unit; letterlog's bars blue, baselines grey."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sum(len(values) for _, values in panels)
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 1.1 + 0.42 * rows + 0.5 * len(panels)),
                             squeeze=False)
    for ax, (unit, values) in zip(axes[:, 0], panels, strict=True):
        names = list(values)
        colours = ["#3465a4" if n.startswith("letterlog") else
                   "#cc0000" if n == "target" else "#888a85" for n in names]
        ax.barh(names, [values[n] for n in names], color=colours)
        for i, n in enumerate(names):
            ax.text(values[n], i, " " + fmt.format(values[n]), va="center", fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(unit)
        ax.margins(x=0.18)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
