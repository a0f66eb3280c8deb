"""``adapters.cli.leaving.leave``: a process that skips the interpreter's teardown still
runs its exit handlers, delivers all its output and keeps its exit status, and still waits
for a thread that is not a daemon."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(body: str) -> subprocess.CompletedProcess[str]:
    code = "from adapters.cli.leaving import leave\n" + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)


def test_exit_handlers_run_and_the_status_is_kept() -> None:
    done = _run("""
        import atexit, sys
        atexit.register(lambda: print("handler ran"))
        sys.stderr.write("said on stderr")
        print("first", end=" ")
        leave(3)
        print("never")
    """)
    assert done.returncode == 3
    assert done.stdout == "first handler ran\n"
    assert done.stderr == "said on stderr"


def test_buffered_output_larger_than_a_pipe_arrives_whole() -> None:
    done = _run("""
        import sys
        sys.stdout.write("x" * 3_000_000)
        leave(0)
    """)
    assert done.returncode == 0
    assert len(done.stdout) == 3_000_000


def test_a_thread_that_is_not_a_daemon_is_waited_for() -> None:
    done = _run("""
        import threading
        go = threading.Event()
        def late():
            go.wait(10)
            print("thread finished")
        threading.Thread(target=late).start()
        threading.Timer(0.2, go.set).start()
        leave(5)
    """)
    assert done.returncode == 5
    assert done.stdout == "thread finished\n"


def test_a_closed_stdout_is_a_failure_as_the_interpreter_says_it() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom adapters.cli.leaving import leave\n"
         "sys.stdout = open(1, 'w', buffering=65536, closefd=False)\n"
         "sys.stdin.readline()\nsys.stdout.write('x' * 100)\nleave(0)"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    proc.stdout.close()  # the reader goes away before the buffered output is flushed
    proc.stdin.write("go\n")
    proc.stdin.close()
    assert proc.wait(timeout=60) == 120
