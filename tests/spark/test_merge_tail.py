"""The driver's merge in the job's tail (``spark_replay.job``): a run is merged during the
job only while a core is free (fewer tasks left than cores), and every run is merged once,
during the job or after it. No Spark here: the status tracker and the runs are stand-ins."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from spark_replay.fold import DONE
from spark_replay.job import _idle_core, _Merger
from spark_replay.source import ranges


class _Tracker:
    def __init__(self) -> None:
        self.stages: dict[int, Any] = {}

    def getActiveStageIds(self) -> list[int]:  # noqa: N802 - PySpark's name
        return list(self.stages)

    def getStageInfo(self, stage: int) -> Any:  # noqa: N802
        return self.stages.get(stage)


def _stage(tasks: int, completed: int) -> Any:
    return SimpleNamespace(numTasks=tasks, numCompletedTasks=completed, numActiveTasks=0)


def test_a_core_is_idle_only_when_fewer_tasks_are_left_than_cores() -> None:
    tracker = _Tracker()
    idle = _idle_core(SimpleNamespace(statusTracker=lambda: tracker), cores=2)
    assert idle()  # no stage runs
    tracker.stages[0] = _stage(8, 0)
    assert not idle()
    tracker.stages[0] = _stage(8, 6)  # the last two tasks run on both cores
    assert not idle()
    tracker.stages[0] = _stage(8, 7)  # one left: the other core is free
    assert idle()
    tracker.stages[1] = _stage(2, 0)  # the next stage's two tasks
    assert not idle()


class _Store:
    def __init__(self) -> None:
        self.calls: list[tuple[list[str], bool]] = []

    def merge_runs(self, runs: list[str], tables: dict[str, str], *, last: bool = True) -> None:
        self.calls.append(([str(r) for r in runs], last))


def test_the_merger_waits_for_an_idle_core_and_merges_each_run_once(tmp_path: Path) -> None:
    busy = [True]
    asked = threading.Semaphore(0)  # released each time the merger asks for an idle core
    store = _Store()
    runs = [tmp_path / f"run-by_position-{i}-0.sqlite" for i in range(3)]

    def idle() -> bool:
        asked.release()
        return not busy[0]

    with _Merger(store, {"t": "t"}, tmp_path, idle) as merger:
        for run in runs:
            run.touch()
            Path(str(run) + DONE).touch()
        for _ in range(3):  # it asked three times after every run was done, and was told no
            assert asked.acquire(timeout=60)
        assert store.calls == []  # every core busy: nothing merged
        busy[0] = False
        deadline = time.monotonic() + 5
        while len(merger.merged) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        merger.stop()
    assert sorted(merger.merged) == sorted(map(str, runs))
    assert [call for call, _ in store.calls] == [[str(r)] for r in runs]  # each once
    assert all(last is False for _, last in store.calls)  # the covered puts go after


def test_a_longer_last_range_covers_every_position_once() -> None:
    """With the merge in the job's tail the last range is ``TAIL_RANGE`` times the others:
    every position in exactly one range, in order."""
    for stop, parts, last in ((1_000_000, 8, 2.0), (101, 8, 2.0), (37, 4, 3.0), (9, 8, 2.0),
                              (1000, 8, 1.0)):
        spans = ranges(1, stop, parts, last)
        assert [p for lo, hi in spans for p in range(lo, hi + 1)] == list(range(1, stop + 1))
        sizes = [hi - lo + 1 for lo, hi in spans]
        if stop >= 2 * parts:
            assert len(spans) == parts
            assert abs(sizes[-1] - last * max(sizes[:-1])) <= last + 1
