"""A Ctrl-C during a batch's append takes effect once the batch is counted (the interrupted
line counts every batch that committed); a second one interrupts at once."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

from adapters.cli.importer import _interrupt_after


@pytest.fixture(autouse=True)
def _python_s_own_handler() -> Iterator[None]:
    """Each test starts with Python's own SIGINT handler, whatever an earlier test in the
    process left (a Spark context installs one of its own: a fresh-clone CI saw it here)."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are set from the main thread only")
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_ctrl_c_inside_the_block_is_raised_when_it_ends() -> None:
    steps = []
    with pytest.raises(KeyboardInterrupt), _interrupt_after():
        os.kill(os.getpid(), signal.SIGINT)
        steps.append("appended")  # the handler ran by now: it only took note
        steps.append("counted")
    assert steps == ["appended", "counted"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_ctrl_c_interrupts_at_once() -> None:
    steps = []
    with pytest.raises(KeyboardInterrupt), _interrupt_after():
        os.kill(os.getpid(), signal.SIGINT)
        steps.append("first")
        os.kill(os.getpid(), signal.SIGINT)
        steps.append("never")
    assert steps == ["first"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_a_ctrl_c_nothing_is_raised_and_an_ignored_one_stays_ignored() -> None:
    with _interrupt_after():
        pass
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with _interrupt_after():
            os.kill(os.getpid(), signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
