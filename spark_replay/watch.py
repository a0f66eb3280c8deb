"""What a Spark job is doing, and a job that cannot start said in one line (ADR 0093).

``started(sc)``: before the job proper, one tiny Python task (``abs`` over ``[0]``) must come back
within ``spark.letterlog.startTimeout`` (default 60 s): it needs an executor registered with
the driver and a Python worker started in it, which is what every job of ours needs first.
If it does not, the task is cancelled and ``CannotStart`` names the cause (``diagnose``),
from Spark's own state, not its log: the executors registered (the status tracker), and on
a standalone master the master's own view (workers alive, their free memory and cores, and
this application's executors launched or ended), asked over Spark's RPC the way the
master's web page asks it. On a healthy cluster the probe costs one task (< 1 s).

``watching(sc, ...)``: while a job runs, a thread polls the status tracker (every
``INTERVAL`` s) and hands each change to the sink (``set_sink``) as a dict: executors
registered, each stage's tasks (done, running, failed, of how many), and the log positions
folded so far (an accumulator the range tasks add their range to when they finish).
``spark_replay.submit --progress`` prints them as ``letterlog-progress {json}`` lines,
which the CLI shows on stderr (``adapters.sparkjob.launch``).
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from py4j.java_collections import JavaArray

from adapters.bootstrap.spark import PROGRESS_PREFIX, python_exception
from domain.errors import LetterlogError

START_TIMEOUT = "spark.letterlog.startTimeout"
DEFAULT_START_S = 60.0
INTERVAL = 1.0
PREFIX = PROGRESS_PREFIX

_sink: Callable[[dict[str, Any]], None] | None = None


class CannotStart(LetterlogError):
    """The job's first task did not run within the start timeout: no executor, resources no
    worker offers, executors that cannot reach the driver, Python workers that do not
    start. The cluster, not the input: exit status 1."""

    exit_code = 1


def set_sink(sink: Callable[[dict[str, Any]], None] | None) -> None:
    global _sink
    _sink = sink


def print_sink(event: dict[str, Any]) -> None:
    """The ``--progress`` sink: one line per event on stdout, flushed at once."""
    sys.stdout.write(PREFIX + json.dumps(event, sort_keys=True) + "\n")
    sys.stdout.flush()


def emit(event: dict[str, Any]) -> None:
    if _sink is not None:
        _sink(event)


def seconds(text: str | None, default: float) -> float:
    """A Spark duration (``60s``, ``500ms``, ``2min``; a bare number is seconds here)."""
    if not text:
        return default
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min)?\s*", text)
    if found is None:
        raise CannotStart(f"{START_TIMEOUT}={text!r} is not a duration (e.g. 60s)")
    value, unit = float(found.group(1)), found.group(2) or "s"
    return value / 1000 if unit == "ms" else value * 60 if unit in ("m", "min") else value


def started(sc: Any, timeout: float | None = None) -> float:
    """Returns the seconds the first task took to run, or raises ``CannotStart`` (above)."""
    if timeout is None:
        timeout = seconds(sc.getConf().get(START_TIMEOUT, None), DEFAULT_START_S)
    group = f"letterlog-start-{uuid.uuid4().hex}"
    done = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            sc.setJobGroup(group, "letterlog: can the job start?", interruptOnCancel=True)
            sc.parallelize([0], 1).map(abs).collect()  # a builtin: no import
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
            failure.append(error)
        finally:
            done.set()

    t0 = time.monotonic()
    emit({"event": "starting", "master": sc.master, "timeout_s": timeout})
    thread = threading.Thread(target=run, name="letterlog-start", daemon=True)
    thread.start()
    if not done.wait(timeout):
        cause = diagnose(sc, timeout)
        with contextlib.suppress(Exception):
            sc.cancelJobGroup(group)
        raise CannotStart(cause)
    if failure:
        raise _failed(sc, failure[0]) from None
    waited = round(time.monotonic() - t0, 2)
    emit({"event": "started", "seconds": waited, "executors": registered_executors(sc)})
    return waited


def _failed(sc: Any, error: BaseException) -> BaseException:
    """The first task failed instead of hanging: a Python-worker memory limit too small is
    said as such; any other failure is the job's own error (``submit.main`` says it)."""
    memory = sc.getConf().get("spark.executor.pyspark.memory", None)
    raised = python_exception(str(error))
    if memory and (raised is None or raised.startswith("MemoryError")):
        return CannotStart(f"the Spark job cannot start: no Python worker started in the "
                           f"executors: {_too_little(memory)}")
    return error


def _too_little(memory: str) -> str:
    return (f"spark.executor.pyspark.memory={memory} limits each Python worker's address "
            f"space, too little for it to start; raise it (e.g. 1g) or unset it")


def registered_executors(sc: Any) -> int:
    """Executors registered with the driver now (on a local master: the driver's own)."""
    infos = sc._jsc.sc().statusTracker().getExecutorInfos()
    return len(infos) if sc.master.startswith("local") else max(0, len(infos) - 1)


def diagnose(sc: Any, timeout: float) -> str:
    """Why the first task did not run within ``timeout`` s, in one line."""
    conf = sc.getConf()
    driver = f"{conf.get('spark.driver.host', '?')}:{conf.get('spark.driver.port', '?')}"
    waited = f"within {timeout:g} s ({START_TIMEOUT})"
    if registered_executors(sc) == 0 and not sc.master.startswith("local"):
        found = _standalone(sc) if sc.master.startswith("spark://") else None
        if found:
            return f"the Spark job cannot start {waited}: {found}"
        return (f"the Spark job cannot start: no executor registered with the driver "
                f"{waited} (master {sc.master}; the driver at {driver}): are workers up, "
                f"do they offer the memory and cores asked for, can they reach the driver's "
                f"address (spark.driver.host)?")
    memory = conf.get("spark.executor.pyspark.memory", None)
    if memory:
        return (f"the Spark job cannot start {waited}: executors registered, but no Python "
                f"worker started in them: {_too_little(memory)}")
    python = conf.get("spark.pyspark.python", None) or "PYSPARK_PYTHON"
    return (f"the Spark job cannot start {waited}: executors registered, but no Python "
            f"worker started in them (the executors' Python: {python}; their stderr is in "
            f"the workers' work directories)")


def _mib(value: int) -> str:
    return f"{value / 1024:g} GiB" if value >= 1024 and value % 64 == 0 else f"{value} MiB"


def _standalone(sc: Any) -> str | None:
    """The cause, from the standalone master's state (``None`` if it cannot be asked)."""
    try:
        return _from_master(sc, _master_state(sc))
    except Exception:  # noqa: BLE001 - the generic line is said instead
        return None


def _from_master(sc: Any, state: Any) -> str | None:
    """The master's state comes over RPC without what it marks transient (the workers'
    use, the application's executors): those are asked of each worker's own status page
    (``<worker web UI>/json/``), where it answers."""
    workers = list(_iterate(state.workers()))
    if not workers:
        return f"no worker is registered with the master {sc.master}: start one"
    mine = next((a for a in _iterate(state.activeApps()) if a.id() == sc.applicationId),
                None)
    if mine is None:
        return None
    memory = int(mine.desc().memoryPerExecutorMB())
    per_executor = mine.desc().coresPerExecutor()
    cores = int(per_executor.get()) if per_executor.isDefined() else 1
    largest = max(int(w.memory()) for w in workers)
    if memory > largest:
        return (f"spark.executor.memory asks {_mib(memory)} per executor, more than any "
                f"worker offers (the largest: {_mib(largest)}); ask for less or give the "
                f"workers more (SPARK_WORKER_MEMORY)")
    most = max(int(w.cores()) for w in workers)
    if cores > most:
        return (f"spark.executor.cores asks {cores} cores per executor, more than any worker "
                f"has (the most: {most}); ask for fewer")
    conf = sc.getConf()
    driver_host = str(conf.get("spark.driver.host", "?"))
    driver = f"{driver_host}:{conf.get('spark.driver.port', '?')}"
    pages = {str(w.host()): _worker_page(str(w.webUiAddress())) for w in workers}
    launched = {host: sum(1 for e in [*page.get("executors", []),
                                      *page.get("finishedexecutors", [])]
                          if e.get("appid") == sc.applicationId)
                for host, page in pages.items() if page is not None}
    unreachable = ("set spark.driver.host (or SPARK_LOCAL_IP) to an address the workers "
                   "reach")
    if sum(launched.values()):
        hosts = ", ".join(h for h, n in sorted(launched.items()) if n)
        return (f"{sum(launched.values())} executor(s) launched on {hosts}, none registered "
                f"with the driver at {driver}: they cannot reach that address; "
                + unreachable)
    remote = sorted(h for h in pages if not _loopback(h))
    if _loopback(driver_host) and remote:
        return (f"the driver advertises {driver}, a loopback address, to workers on other "
                f"hosts ({', '.join(remote)}): their executors cannot reach it; "
                + unreachable)
    busy = [h for h, page in pages.items() if page is not None
            and (int(page.get("cores", 0)) - int(page.get("coresused", 0)) < cores
                 or int(page.get("memory", 0)) - int(page.get("memoryused", 0)) < memory)]
    if busy and len(busy) == len(workers):
        return (f"every worker's cores or memory are held by other applications (an "
                f"executor needs {cores} core(s) and {_mib(memory)}); wait, or stop one")
    return None


def _loopback(host: str) -> bool:
    return host.startswith("127.") or host in ("localhost", "::1")


def _worker_page(address: str) -> dict[str, Any] | None:
    """A standalone worker's status (its web UI's ``/json/``), or ``None``."""
    try:
        with urllib.request.urlopen(address.rstrip("/") + "/json/", timeout=3) as page:
            return dict(json.loads(page.read()))
    except (OSError, ValueError):
        return None


def _master_state(sc: Any) -> Any:
    """The standalone master's ``MasterStateResponse`` (what its web page shows)."""
    jvm = sc._jvm
    address = sc.master.removeprefix("spark://").split(",")[0]
    host, _, port = address.rpartition(":")
    env = sc._jsc.sc().env()
    ref = env.rpcEnv().setupEndpointRef(jvm.org.apache.spark.rpc.RpcAddress(host, int(port)),
                                        "Master")
    request = getattr(getattr(jvm.org.apache.spark.deploy,
                              "DeployMessages$RequestMasterState$"), "MODULE$")
    tag = jvm.scala.reflect.ClassTag.apply(jvm.java.lang.Object().getClass())
    return ref.askSync(request, tag)


def _iterate(items: Any) -> Iterator[Any]:
    """A Java array or a Scala collection, as a Python iterator."""
    if not isinstance(items, JavaArray):
        found = items.iterator()
        while found.hasNext():
            yield found.next()
        return
    yield from items


@contextlib.contextmanager
def watching(sc: Any, *, events: int = 0, counted: Any = None,
             interval: float = INTERVAL) -> Iterator[None]:
    """Progress while the body runs (see the module docstring); ``counted``: an
    accumulator of the log positions folded, out of ``events``."""
    stop = threading.Event()
    thread = threading.Thread(target=_watch, args=(sc, stop, events, counted, interval),
                              name="letterlog-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)


def _watch(sc: Any, stop: threading.Event, events: int, counted: Any,
           interval: float) -> None:
    tracker = sc.statusTracker()
    last: dict[Any, Any] = {}
    while True:
        finished = stop.wait(interval)
        with contextlib.suppress(Exception):  # a context stopping under us: nothing to say
            for event in _changes(sc, tracker, last, events, counted):
                emit(event)
        if finished:
            return


def _changes(sc: Any, tracker: Any, last: dict[Any, Any], events: int,
             counted: Any) -> Iterable[dict[str, Any]]:
    executors = registered_executors(sc)
    if last.get("executors") != executors:
        last["executors"] = executors
        yield {"event": "executors", "registered": executors}
    for stage in sorted(tracker.getActiveStageIds()):
        info = tracker.getStageInfo(stage)
        if info is None:
            continue
        now = {"event": "stage", "stage": stage, "name": _stage_name(info.name),
               "tasks": info.numTasks, "done": info.numCompletedTasks,
               "running": info.numActiveTasks, "failed": info.numFailedTasks}
        if last.get(("stage", stage)) != now:
            last[("stage", stage)] = now
            yield now
    if counted is not None and events:
        folded = min(int(counted.value), events)
        if last.get("events") != folded:
            last["events"] = folded
            yield {"event": "events", "folded": folded, "of": events}


def _stage_name(name: str) -> str:
    """``collect at /path/job.py:212`` -> ``collect at job.py:212``."""
    what, _, where = name.partition(" at ")
    return f"{what} at {where.rsplit('/', 1)[-1]}" if where else name


def counting(run: Callable[[Iterable[tuple[int, int]]], Iterator[Any]], counted: Any
             ) -> Callable[[Iterable[tuple[int, int]]], Iterator[Any]]:
    """``run`` (a range task's function), adding the positions of its ranges to the
    accumulator ``counted`` once it has folded them."""

    def wrapped(spans: Iterable[tuple[int, int]]) -> Iterator[Any]:
        mine = list(spans)
        yield from run(iter(mine))
        counted.add(sum(stop - start + 1 for start, stop in mine))

    return wrapped
