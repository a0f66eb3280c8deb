"""``letterlog bench ...``: throughput as ratios against a raw baseline measured in the same run.

Every benchmark prints one JSON object; ``--plot FILE`` also draws it (matplotlib).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from adapters.demo.benchmail import bench_messages
from adapters.demo.mailgen import PEOPLE
from devtools.bench.sealing import seal_cost, with_share


def _rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else float("inf")


def raw_sqlite_appends(blobs: Sequence[bytes], directory: Path, *, per_tx: int,
                       synchronous: str, tag: str = "") -> float:
    """Rows/s appending the same bytes to a plain WAL-mode SQLite table (a new file)."""
    path = directory / f"raw-{per_tx}{tag}.sqlite"
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"PRAGMA synchronous={synchronous}")
    con.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, data BLOB NOT NULL)")
    t0 = time.perf_counter()
    for i in range(0, len(blobs), per_tx):
        con.execute("BEGIN")
        con.executemany("INSERT INTO events (data) VALUES (?)", [(b,) for b in blobs[i:i + per_tx]])
        con.execute("COMMIT")
    seconds = time.perf_counter() - t0
    con.close()
    return _rate(len(blobs), seconds)


def _open(directory: Path, durability: str) -> Any:
    from adapters.embedded import Letterlog

    return Letterlog.open(directory, durability=durability)


def _open_log_only(directory: Path, durability: str) -> Any:
    """A store that appends to the log and keeps no read models in this process: the command
    side of a deployment whose stream workers project (``table_store=hbase``)."""
    from adapters.bootstrap import letterlog
    from adapters.config.settings import load_settings
    from adapters.embedded import Letterlog

    directory.mkdir(parents=True)
    settings = load_settings(data=directory, durability=durability, event_store="sqlite")
    return letterlog(settings, facade=Letterlog, read_models=False)


def _parse_rate(blobs: Sequence[bytes]) -> float:
    """Messages/s of the check every delivery starts with (limits, stdlib parse, facts)."""
    from domain.rfc5322 import MessageLimits, inspect_message

    limits = MessageLimits()
    t0 = time.perf_counter()
    for blob in blobs:
        inspect_message(blob, limits)
    return _rate(len(blobs), time.perf_counter() - t0)


def _compare(peer: str, blobs: Sequence[bytes], recipients: Sequence[str], root: Path,
             single: float, single_pipelined: float, lda_messages: int | None,
             progress: Callable[[str], None] | None) -> dict[str, Any]:
    if peer != "dovecot":
        raise ValueError(f"--peer: unknown peer {peer!r} (choose dovecot)")
    from devtools.bench.peer import LDA_MESSAGES, compare_with_dovecot

    return compare_with_dovecot(blobs, recipients, root, single, single_pipelined,
                                lda_messages=lda_messages or LDA_MESSAGES, progress=progress)


def bench_ingest(messages: int = 5000, *, durability: str = "full", batch: int = 100,
                 plot: Path | None = None, peer: str | None = None,
                 lda_messages: int | None = None, import_only: bool = False,
                 progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """``lda_messages``: with ``peer``, the processes a side of the LDA leg (default
    ``devtools.bench.peer.LDA_MESSAGES``, at most ``messages``). ``import_only``: with
    ``peer``, only the import leg (``devtools.bench.peer.compare_import_with_dovecot``)."""
    blobs = bench_messages(messages)
    if import_only:
        if peer != "dovecot":
            raise ValueError("import_only: only with peer='dovecot'")
        from devtools.bench.peer import compare_import_with_dovecot

        with tempfile.TemporaryDirectory(prefix="letterlog-bench-") as tmp:
            leg = compare_import_with_dovecot(blobs, Path(tmp))
        leg = {"benchmark": "ingest", "messages": len(blobs), **leg,
               "cpu_count": os.cpu_count()}
        leg["meets_import_targets"] = (
            leg["ratio_import_vs_dovecot"] >= leg["target_ratio_import_vs_dovecot"]
            and leg["import_msgs_per_s"] >= leg["target_import_msgs_per_s"])
        if plot is not None:
            import_plot(plot, leg)
            leg["plot"] = str(plot)
        return leg
    recipients = [f"{p}@example.org" for p in PEOPLE]
    sync = {"full": "FULL", "normal": "NORMAL"}[durability]
    with tempfile.TemporaryDirectory(prefix="letterlog-bench-") as tmp:
        root = Path(tmp)

        def raw(per_tx: int, tag: str) -> float:
            return raw_sqlite_appends(blobs, root, per_tx=per_tx, synchronous=sync, tag=tag)

        single_following: list[bool] = []  # whether the pipelined run had its follower

        def single_run(store: Any, pipelined: bool = False) -> float:
            """One delivery per command. ``pipelined``: a long-lived process whose read
            models a second process projects (ADR 0037); the time includes the end of the
            block, when the read models are current."""
            for r in recipients:  # accounts exist before timing starts
                store.create_mailbox(r, "Bench", create_account=True)
            t0 = time.perf_counter()
            with (store.projecting_in_a_second_process() if pipelined
                  else contextlib.nullcontext(False)) as following:
                for i, blob in enumerate(blobs):
                    store.deliver(account=recipients[i % len(recipients)], raw=blob)
            rate = _rate(len(blobs), time.perf_counter() - t0)
            if pipelined:
                single_following.append(bool(following))
                if store.projections.runner.position() != store.max_position():
                    raise RuntimeError("pipelined single deliveries: read models behind the log")
            store.close()
            return rate

        def batched_run(store: Any) -> float:
            for r in recipients:
                store.create_mailbox(r, "Bench", create_account=True)
            t0 = time.perf_counter()
            for i in range(0, len(blobs), batch):
                store.deliver_many([{"account": recipients[(i + j) % len(recipients)],
                                     "raw": blob} for j, blob in enumerate(blobs[i:i + batch])])
            rate = _rate(len(blobs), time.perf_counter() - t0)
            store.close()
            return rate

        # Each baseline runs right before and right after the letterlog runs it is compared
        # with, and their mean is the baseline: the machine's speed (fsync latency above
        # all) drifts within a minute, and one side measured later would carry the drift.
        raw_single_runs = [raw(1, "a")]
        single = single_run(_open(root / "single", durability))
        single_pipelined = single_run(_open(root / "single-pipelined", durability),
                                      pipelined=True)
        single_log_only = single_run(_open_log_only(root / "single-log-only", durability))
        raw_single_runs.append(raw(1, "b"))
        compared = ({} if peer is None else
                    _compare(peer, blobs, recipients, root, single, single_pipelined,
                             lda_messages, progress))
        raw_batched_runs = [raw(batch, "a")]
        batched = batched_run(_open(root / "batched", durability))
        batched_log_only = batched_run(_open_log_only(root / "batched-log-only", durability))
        raw_batched_runs.append(raw(batch, "b"))
        raw_single = round(statistics.fmean(raw_single_runs), 1)
        raw_batched = round(statistics.fmean(raw_batched_runs), 1)
        parse_only = _parse_rate(blobs)
        sealing = seal_cost(blobs, root, durability=durability)
    result: dict[str, Any] = {
        "benchmark": "ingest",
        "messages": len(blobs),
        "median_message_bytes": int(statistics.median(len(b) for b in blobs)),
        "durability": durability,
        "sqlite_synchronous": sync,
        "batch": batch,
        "single_command_msgs_per_s": single,
        "batched_import_msgs_per_s": batched,
        # the same deliveries by a long-lived process whose read models a second process
        # projects (False in ``single_pipelined_follower``: one usable core, none ran)
        "single_pipelined_msgs_per_s": single_pipelined,
        "single_pipelined_follower": single_following[0],
        "raw_sqlite_one_row_per_tx_per_s": raw_single,
        f"raw_sqlite_{batch}_rows_per_tx_per_s": raw_batched,
        "raw_runs_before_and_after": {"one_row_per_tx": raw_single_runs,
                                      f"{batch}_rows_per_tx": raw_batched_runs},
        "ratio_single": round(single / raw_single, 3),
        "ratio_batched": round(batched / raw_batched, 3),
        # The command side alone, read models projected elsewhere (table_store=hbase: stream
        # workers), and parsing alone: what bounds the ratios above.
        "log_only": {
            "single_command_msgs_per_s": single_log_only,
            "batched_import_msgs_per_s": batched_log_only,
            "ratio_single": round(single_log_only / raw_single, 3),
            "ratio_batched": round(batched_log_only / raw_batched, 3),
        },
        "parse_only_msgs_per_s": parse_only,
        # Sealing the personal data (included in the deliveries above), measured alone.
        "sealing": with_share(sealing, single),
        "ratio_parse_only_batched": round(parse_only / raw_batched, 3),
        "target_ratio_single": 0.15,
        "target_ratio_batched": 0.30,
        "cpu_count": os.cpu_count(),
    }
    result["meets_targets"] = (result["ratio_single"] >= 0.15 and result["ratio_batched"] >= 0.30)
    if compared:
        from devtools.bench.peer import peer_plot, peer_targets_met

        result.update(compared)
        result["meets_peer_targets"] = peer_targets_met(result)
        if plot is not None:
            peer_file = plot.with_name(f"{plot.stem}-{peer}{plot.suffix or '.png'}")
            peer_plot(peer_file, result)
            result["peer_plot"] = str(peer_file)
            if "memory" in result:
                from devtools.bench.memory import memory_plot

                memory_file = plot.with_name(f"{plot.stem}-{peer}-memory{plot.suffix or '.png'}")
                memory_plot(memory_file, result["memory"])
                result["memory_plot"] = str(memory_file)
    if plot is not None:
        bar_plot(plot, "letterlog ingest vs raw SQLite (same durability)", {
            "letterlog single": single, "letterlog single, pipelined": single_pipelined,
            "letterlog single, log only": single_log_only,
            "raw 1/tx": raw_single,
            "letterlog batched": batched, "letterlog batched, log only": batched_log_only,
            "parse only": parse_only, f"raw {batch}/tx": raw_batched,
        }, "messages/s")
        result["plot"] = str(plot)
    return result


def import_plot(path: Path, result: dict[str, Any]) -> None:
    """The import leg's rates (``--import-only``), letterlog's and Dovecot's, the ratio and
    the load average in the title."""
    bar_plot(path, f"import of {result['messages']} msgs: letterlog / doveadm "
                   f"{result['ratio_import_vs_dovecot']:.3f} (load "
                   f"{result['load_average_start_and_end'][0]})", {
                       "letterlog import mbox": result["import_msgs_per_s"],
                       "dovecot doveadm import": result["dovecot_import_msgs_per_s"]},
             "messages/s")


def bar_plot(path: Path, title: str, values: dict[str, float], unit: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    names = list(values)
    colours = ["#3465a4" if n.startswith("letterlog") else "#888a85" for n in names]
    ax.barh(names, [values[n] for n in names], color=colours)
    for i, n in enumerate(names):
        ax.text(values[n], i, f" {values[n]:,.0f}", va="center", fontsize=8)
    ax.set_xlabel(unit)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
