"""What a job can count on and what it did: the executors registered, the task attempts.

``registered(sc)``: on a cluster, executors register with the driver some seconds after
the session starts, and ``defaultParallelism`` counts only those already there (falling
back to 2). The job's layout and partition count are chosen from the cores actually
registered, after waiting a bounded time for the executors expected: ``spark.executor.
instances`` if set, else ``spark.cores.max`` / ``spark.executor.cores`` if both are set;
otherwise until one has registered and no other has joined for ``SETTLE_S``. The wait
is bounded by ``spark.scheduler.maxRegisteredResourcesWaitingTime`` (Spark's own bound for
the same question, default 30 s). A local master has its cores from the start.

``attempts(sc, group)``: every task attempt of the jobs of a job group, over every stage
and every attempt of each stage (a stage re-run after a lost executor or a fetch failure
starts its tasks' attempt numbers at 0 again, so the attempt number alone undercounts),
from Spark's own status store.
"""

from __future__ import annotations

import contextlib
import re
import time
from typing import Any

SETTLE_S = 3.0
DEFAULT_WAIT_S = 30.0


def _seconds(text: str | None, default: float) -> float:
    if not text:
        return default
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min)?\s*", text)
    if found is None:
        return default
    value, unit = float(found.group(1)), found.group(2) or "ms"
    return value / 1000 if unit == "ms" else value * 60 if unit in ("m", "min") else value


def expected_executors(conf: Any) -> int | None:
    """The executors the configuration asks for, if it says."""
    instances = conf.get("spark.executor.instances", None)
    if instances:
        return int(instances)
    cores_max, cores = conf.get("spark.cores.max", None), conf.get("spark.executor.cores", None)
    if cores_max and cores:
        return max(1, int(cores_max) // int(cores))
    return None


def _executors(sc: Any) -> int:
    """Executors registered now (the driver is not one)."""
    infos = sc._jsc.sc().statusTracker().getExecutorInfos()
    return max(0, len(infos) - 1)


def registered(sc: Any) -> dict[str, Any]:
    """Waits (bounded) for the expected executors; the cores and executors there are."""
    if sc.master.startswith("local"):
        return {"cores": sc.defaultParallelism, "executors_registered": 0,
                "executors_expected": 0, "executors_wait_s": 0.0}
    conf = sc.getConf()
    expected = expected_executors(conf)
    bound = _seconds(conf.get("spark.scheduler.maxRegisteredResourcesWaitingTime", None),
                     DEFAULT_WAIT_S)
    t0 = time.monotonic()
    count, changed = _executors(sc), t0
    while time.monotonic() - t0 < bound:
        if expected is not None and count >= expected:
            break
        if expected is None and count >= 1 and time.monotonic() - changed >= SETTLE_S:
            break
        time.sleep(0.2)
        now = _executors(sc)
        if now != count:
            count, changed = now, time.monotonic()
    return {"cores": sc.defaultParallelism, "executors_registered": count,
            "executors_expected": expected, "executors_wait_s": round(time.monotonic() - t0, 2)}


def _seq(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.size())]


def attempts(sc: Any, group: str) -> dict[str, int]:
    """Task attempts of the job group's jobs, over every stage attempt (see above)."""
    stage_ids: set[int] = set()
    tracker = sc.statusTracker()
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        if info is not None:
            stage_ids.update(info.stageIds)
    with contextlib.suppress(Exception):  # the status store is fed through the listener bus
        sc._jsc.sc().listenerBus().waitUntilEmpty(10_000)
    store = sc._jsc.sc().statusStore()
    no_quantiles = sc._gateway.new_array(sc._gateway.jvm.double, 0)
    found = {"task_attempts": 0, "failed_task_attempts": 0, "killed_task_attempts": 0,
             "stage_attempts": 0}
    for stage in (s for sid in sorted(stage_ids) for s in _seq(
            store.stageData(sid, False, None, False, no_quantiles))):
        found["stage_attempts"] += 1
        done, failed, killed = (stage.numCompleteTasks(), stage.numFailedTasks(),
                                stage.numKilledTasks())
        found["task_attempts"] += done + failed + killed
        found["failed_task_attempts"] += failed
        found["killed_task_attempts"] += killed
    return found
