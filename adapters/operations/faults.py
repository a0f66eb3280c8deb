"""Test fault points: a named step boundary where a test can kill the process.

``fault_point(name)`` does nothing unless the environment variable
``LETTERLOG_TEST_CRASH_AT`` names that step; then the process kills itself with SIGKILL at
once (no ``finally``, no flush, no atexit: what ``kill -9`` or a power cut leaves);
``LETTERLOG_TEST_PAUSE_AT`` makes it stop itself there (SIGSTOP: a process that is alive and
holds what it holds, until the test sends SIGCONT or SIGKILL). Only the
crash tests set it (``tests/integration/test_erasure_crash.py``); the step names are listed
in docs/lifecycle.md ("Erasure as an intent"). Never set it in a deployment.
"""

from __future__ import annotations

import os
import signal

CRASH_AT = "LETTERLOG_TEST_CRASH_AT"
PAUSE_AT = "LETTERLOG_TEST_PAUSE_AT"


def fault_point(name: str) -> None:
    if os.environ.get(CRASH_AT) == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get(PAUSE_AT) == name:
        os.kill(os.getpid(), signal.SIGSTOP)
