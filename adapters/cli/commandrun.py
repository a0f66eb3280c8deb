"""The command server's command process: forked by a handler, it takes over the client's
streams and surroundings (descriptors, working directory, umask, environment, time zone)
and runs the command line as a new ``letterlog`` process would (``commandserver``)."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import io
import os
import signal
import sys
import time
import traceback
from typing import Any

from adapters.cli.app import main


def _reopen(fd: int, like: Any) -> Any:
    """A fresh text stream on ``fd``, buffered as a new interpreter would buffer it."""
    writing = fd != 0
    raw = io.FileIO(fd, "w" if writing else "r", closefd=False)
    buffered = io.BufferedWriter(raw) if writing else io.BufferedReader(raw)
    return io.TextIOWrapper(buffered, encoding=like.encoding, errors=like.errors,
                            line_buffering=fd == 2 or (writing and raw.isatty()))


def _die_with_parent(handler: int) -> None:
    """SIGKILL for this process when its handler dies (``PR_SET_PDEATHSIG``): the client
    then reports the outcome unknown (a temporary failure for ``lda``), and a command that
    went on could store a message afterwards. Linux only; elsewhere nothing."""
    with contextlib.suppress(OSError, AttributeError):
        if ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0) != 0:
            return  # 1: PR_SET_PDEATHSIG
    if os.getppid() != handler:  # it died before that
        os.kill(os.getpid(), signal.SIGKILL)


def _run_command(request: dict[str, Any], fds: list[int], handler: int) -> None:
    """In the command's process: take over the client's streams and surroundings, run the
    command line, report nothing (the handler reports the exit status)."""
    code = 1
    try:
        _die_with_parent(handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in zip((0, 1, 2), fds, strict=True):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        os.environ.clear()
        os.environ.update(request["env"])

        time.tzset()
        sys.argv = ["letterlog", *request["argv"]]
        sys.stdin = _reopen(0, sys.__stdin__)
        sys.stdout = _reopen(1, sys.__stdout__)
        sys.stderr = _reopen(2, sys.__stderr__)

        main()
        code = 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            sys.stderr.write(f"{e.code}\n")
    except BaseException:  # a bug: shown as a fresh interpreter would show it

        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
