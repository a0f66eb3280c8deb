"""Peak memory of the delivery agents, beside ``dovecot-lda`` (issue 42, item 7).

For a small message (the benchmark's first) and a large one (``LARGE_BYTES``, a base64
attachment), each run on its own store:

- ``letterlog lda`` delivering itself, ``letterlog lda`` handing its message to a running
  ``letterlog lmtp`` (the fast path, ADR 0060), and ``dovecot-lda``: the process's peak
  resident set (``ru_maxrss`` of the child, from ``wait4``), its message on standard input
  from a file;
- the LMTP server: how far its peak resident set (``VmHWM``) rose above its resident set
  before the message (after a warm-up message), for the message to ``RECIPIENTS``
  recipients over LMTP and for the fast path's message; the same for its writer process
  (ADR 0114), and its projecting process's peak.
"""

from __future__ import annotations

import base64
import os
import smtplib
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from devtools.bench.mta import (
    SENDER,
    WARM_UP_ACCOUNT,
    _children,
    is_writer_process,
    letterlog_command,
    letterlog_init,
    letterlog_lmtp,
    private_runtime,
)

LARGE_BYTES = 40 * 1024 * 1024
RECIPIENTS = 3
TARGET_LDA_MB = 30.0


def large_message(size: int = LARGE_BYTES) -> bytes:
    """A message of about ``size`` bytes: headers, a line of text, a base64 attachment."""
    raw = os.urandom(size * 3 // 4)
    body = base64.encodebytes(raw)  # 76-character lines
    return (b"From: Ada <ada@example.net>\nTo: bob@example.org\nSubject: a large one\n"
            b"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"b1\"\n\n"
            b"--b1\nContent-Type: text/plain\n\nsee attached\n"
            b"--b1\nContent-Type: application/octet-stream\nContent-Transfer-Encoding: base64\n"
            b"Content-Disposition: attachment; filename=\"large.bin\"\n\n"
            + body + b"--b1--\n")


_WRAPPER = """\
import os, resource, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status = os.waitpid(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""
"""What measures a command when GNU time is not installed: a small Python process whose
child it is (a child's ``ru_maxrss`` starts at the resident set of what it was forked from:
measured from this benchmark's own process, every command read as its 200 MiB)."""


def peak_rss_mb(cmd: list[str], message: Path, env: dict[str, str] | None,
                what: str) -> float:
    """The peak resident set of ``cmd`` run with ``message`` on standard input (MiB), as
    GNU time's ``%M`` (or ``_WRAPPER``) reads it; it must exit 0."""
    with tempfile.TemporaryDirectory() as tmp, open(message, "rb") as stdin, \
            tempfile.TemporaryFile() as err:
        out = Path(tmp) / "maxrss"
        if os.access("/usr/bin/time", os.X_OK):
            wrapped = ["/usr/bin/time", "-f", "%M", "-o", str(out), *cmd]
        else:
            wrapped = [sys.executable, "-I", "-S", "-c", _WRAPPER, str(out), *cmd]
        done = subprocess.run(wrapped, stdin=stdin, stdout=subprocess.DEVNULL, stderr=err,
                              env=env, check=False)
        if done.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{what}: exit {done.returncode}: "
                               f"{err.read().decode(errors='replace').strip()[-500:]}")
        return round(int(out.read_text().split()[-1]) / 1024, 1)


def _status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {key} for process {pid}")


def _reset_peak(pid: int) -> bool:
    """Resets ``VmHWM`` to the current resident set (Linux >= 4.0, the process's owner);
    whether it could."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def server_growth_mb(pid: int, deliver: Any) -> dict[str, float]:
    """How far the server's peak resident set rose above its resident set before
    ``deliver()`` ran (MiB), the same for its writer process (ADR 0114; the message's one
    copy there), and the peak of its other children (the projecting process)."""
    writers = [c for c in _children(pid) if is_writer_process(c)]
    for p in (pid, *writers):
        _reset_peak(p)
    before = {p: _status_kb(p, "VmRSS") for p in (pid, *writers)}
    deliver()
    grown = {p: max(0, _status_kb(p, "VmHWM") - before[p]) for p in (pid, *writers)
             if Path(f"/proc/{p}").exists()}
    others = [_status_kb(c, "VmHWM") for c in _children(pid)
              if c not in before and Path(f"/proc/{c}").exists()]
    return {"growth_mb": round(grown.get(pid, 0) / 1024, 1),
            "writer_growth_mb": round(max((grown.get(w, 0) for w in writers), default=0)
                                      / 1024, 1),
            "children_peak_mb": round(max(others, default=0) / 1024, 1)}


def _lmtp_send(socket_path: Path, recipients: Sequence[str], raw: bytes) -> None:
    """One transaction to ``recipients``; each recipient's reply after DATA must be 250
    (smtplib's ``sendmail`` reads one reply only: LMTP sends one per recipient)."""
    with smtplib.LMTP(str(socket_path), timeout=600) as lmtp:
        lmtp.ehlo("letterlog-bench")
        lmtp.mail(SENDER)
        for rcpt in recipients:
            lmtp.rcpt(rcpt)
        replies = [lmtp.data(raw)] + [lmtp.getreply() for _ in recipients[1:]]
        if any(code != 250 for code, _ in replies):
            raise RuntimeError(f"LMTP answered {replies}")


def memory_leg(dovecot: Any, small: bytes, root: Path, env: dict[str, str],
               large_bytes: int = LARGE_BYTES) -> dict[str, Any]:
    """Peak memory of each delivery agent for ``small`` and a large message (MiB)."""
    runtime = private_runtime(env, root / "run-memory")
    out: dict[str, Any] = {name: _measure(dovecot, name, raw, small, root, runtime)
                           for name, raw in (("small", small),
                                             ("large", large_message(large_bytes)))}
    out["target_lda_peak_mb"] = TARGET_LDA_MB
    return out


def _measure(dovecot: Any, name: str, raw: bytes, small: bytes, root: Path,
             runtime: dict[str, str]) -> dict[str, Any]:
    letterlog = letterlog_command()
    message = root / f"memory-{name}.eml"
    message.write_bytes(raw)
    entry: dict[str, Any] = {"message_bytes": len(raw)}

    def lda(data: Path, tag: str) -> list[str]:
        return [*letterlog, "--data", str(data), "lda", "--recipient",
                f"mem-{tag}@example.org", "--sender", SENDER, "--queue-id", f"M{tag}"]

    alone = root / f"memory-lda-{name}"
    letterlog_init(alone, runtime)
    entry["lda_peak_mb"] = peak_rss_mb(lda(alone, f"a{name}"), message, runtime,
                                       "letterlog lda")
    entry["dovecot_lda_peak_mb"] = peak_rss_mb(
        dovecot.lda_command(f"mem{name}", SENDER), message, None, "dovecot-lda")

    served = root / f"memory-served-{name}"
    letterlog_init(served, runtime)
    sock = root / f"memory-{name}.sock"
    with letterlog_lmtp(served, sock, runtime, root / f"memory-{name}.log") as server:
        _lmtp_send(sock, [WARM_UP_ACCOUNT], small)  # the store open, the follower up
        peak: dict[str, float] = {}

        def handed_off() -> None:
            peak["client"] = peak_rss_mb(lda(served, f"s{name}"), message, runtime,
                                         "letterlog lda, lmtp server")

        entry["lmtp_server_fast_path"] = server_growth_mb(server.pid, handed_off)
        entry["lda_with_server_peak_mb"] = peak["client"]
        recipients = [f"mem-l{name}{i}@example.org" for i in range(RECIPIENTS)]
        entry[f"lmtp_server_{RECIPIENTS}_recipients"] = server_growth_mb(
            server.pid, lambda: _lmtp_send(sock, recipients, raw))
    return entry


def memory_plot(path: Path, memory: dict[str, Any]) -> None:
    """Peak resident set (MiB) of each agent, small and large message (matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    values: dict[str, float] = {}
    for name in ("small", "large"):
        m = memory[name]
        values[f"letterlog lda, {name}"] = m["lda_peak_mb"]
        values[f"letterlog lda via lmtp, {name}"] = m["lda_with_server_peak_mb"]
        server = m[f"lmtp_server_{RECIPIENTS}_recipients"]
        values[f"letterlog lmtp growth, {RECIPIENTS} rcpt, {name}"] = server["growth_mb"]
        if "writer_growth_mb" in server:
            values[f"its writer process's growth, {name}"] = server["writer_growth_mb"]
        values[f"dovecot-lda, {name}"] = m["dovecot_lda_peak_mb"]
    fig, ax = plt.subplots(figsize=(7, 4))
    names = list(values)
    ax.barh(names, [values[n] for n in names],
            color=["#3465a4" if n.startswith("letterlog") else "#888a85" for n in names])
    for i, n in enumerate(names):
        ax.text(values[n], i, f" {values[n]:,.1f}", va="center", fontsize=8)
    ax.axvline(TARGET_LDA_MB, color="#cc0000", linestyle="--", linewidth=1)
    ax.set_xlabel("MiB (dashed: the lda's target)")
    ax.set_title(f"peak memory per delivery (large: {memory['large']['message_bytes']:,} "
                 "bytes)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
