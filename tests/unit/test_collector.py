"""``adapters.startup.collector``: the cyclic collector paused while a process starts, what the
start-up made set aside, the collector running again, and fewer young collections in bulk."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap

import pytest

from adapters.startup.collector import (
    BULK_GC_THRESHOLDS,
    PROCESS_GC_THRESHOLDS,
    bulk_collections,
)


def _in_a_process(body: str) -> str:
    code = "from adapters.startup import collector\nimport gc\n" + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_started_process_collects_its_cycles_and_never_walks_its_start_up_again() -> None:
    out = _in_a_process("""
        collector.starting()
        assert not gc.isenabled()
        made = [[i] for i in range(50_000)]  # what imports leave behind
        collector.started()
        assert gc.isenabled() and gc.get_freeze_count() >= 50_000
        assert gc.get_threshold() == collector.PROCESS_GC_THRESHOLDS
        class Node:
            pass
        for _ in range(1_000):  # cycles made after the start-up are still collected
            a, b = Node(), Node()
            a.other, b.other = b, a
        del a, b
        print(gc.collect())
    """)
    assert int(out) >= 2_000


def test_started_leaves_a_process_it_did_not_pause_as_it_was() -> None:
    out = _in_a_process("""
        gc.set_threshold(700, 10, 10)
        collector.started()
        print(gc.isenabled(), gc.get_freeze_count(), gc.get_threshold())
    """)
    assert out == "True 0 (700, 10, 10)"


def test_a_command_line_process_runs_with_its_collector_on() -> None:
    """The whole way a command goes: paused at ``main``, running once its command is built."""
    out = _in_a_process("""
        import sys
        from adapters.cli.app import run
        from adapters.startup import collector as c
        c.starting()
        code = run(["--data", "/nonexistent/letterlog-test", "list", "a@example.org"])
        print(gc.isenabled(), gc.get_freeze_count() > 0, file=sys.stderr)
        print(gc.isenabled())
    """)
    assert out.splitlines()[-1] == "True"


def test_a_bulk_block_spaces_the_young_collections_and_restores_the_process_thresholds(
) -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(*PROCESS_GC_THRESHOLDS)
        with bulk_collections():
            assert gc.get_threshold() == BULK_GC_THRESHOLDS
            with bulk_collections():  # nested: the same
                assert gc.get_threshold() == BULK_GC_THRESHOLDS
            assert gc.get_threshold() == BULK_GC_THRESHOLDS
        assert gc.get_threshold() == PROCESS_GC_THRESHOLDS
        gc.set_threshold(500_000, 30, 10)  # a process that collects less often keeps its own
        with bulk_collections():
            assert gc.get_threshold() == (500_000, 30, 10)
        with pytest.raises(RuntimeError), bulk_collections():
            raise RuntimeError("the block failed")
        assert gc.get_threshold() == (500_000, 30, 10)
    finally:
        gc.set_threshold(*before)
