"""A throw-away Spark standalone cluster: one master and one worker JVM on 127.0.0.1.

Both come from the pyspark package's own launcher (``pyspark/bin/spark-class``, with
``SPARK_HOME`` the installed ``pyspark`` directory and ``JAVA_HOME`` a JDK 17): nothing is
downloaded beyond the ``spark`` extra. ``SPARK_LOCAL_IP=127.0.0.1`` keeps the web UIs off
other interfaces (they are also given free ports), and ``SPARK_WORKER_DIR`` /
``SPARK_LOG_DIR`` point into the service's temporary directory (the defaults are inside the
installed package). Ready when the master's log says ``Registering worker`` and a one-task job
submitted to ``spark://127.0.0.1:PORT`` returns its result.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from adapters.sparkjob.environment import spark_env, spark_home

from ._common import (
    LOCALHOST,
    Handle,
    Launch,
    Program,
    Service,
    free_ports,
    log_contains,
    terminate,
    wait_for,
)
from .toolchain import find_java

__all__ = ["SparkCluster"]

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
WORKER_REGISTERED = "Registering worker"


class SparkCluster(Service):
    """A Spark master and one worker (``cores`` cores, ``memory``) on 127.0.0.1.

    After ``start()``: ``master_url`` (``spark://127.0.0.1:PORT``), ``log_paths``.
    """

    name = "spark"

    def __init__(self, *, cores: int = 2, memory: str = "2g", startup_timeout: float = 180.0,
                 ports: tuple[int, int, int, int] | None = None,
                 workdir: str | os.PathLike[str] | None = None,
                 keep_workdir: bool | None = None) -> None:
        super().__init__(workdir=workdir, startup_timeout=startup_timeout,
                         keep_workdir=keep_workdir)
        self.cores = cores
        self.memory = memory
        self.host = LOCALHOST
        self.port = 0
        self._master: Handle | None = None
        self._worker: Handle | None = None
        self._master_ui = self._worker_ui = self._worker_port = 0
        self._env: dict[str, str] = {}
        self._fixed_ports = ports

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.port}"

    @property
    def log_paths(self) -> list[Path]:
        if self.workdir is None:
            return []
        return [self.workdir / "logs" / "master.out", self.workdir / "logs" / "worker.out"]

    @property
    def ports(self) -> tuple[int, int, int, int]:
        """The master's port, its web UI's, the worker's web UI's and the worker's."""
        return (self.port, self._master_ui, self._worker_ui, self._worker_port)

    @property
    def running(self) -> bool:
        return all(p is not None and p.poll() is None for p in (self._master, self._worker))

    def install(self) -> None:
        os.environ.setdefault("LETTERLOG_JAVA_HOME", str(find_java().parent.parent))
        spark_home()

    def prepare(self) -> None:
        """Free ports, the work and log directories, the launcher's environment."""
        assert self.workdir is not None
        for sub in ("logs", "work"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        self.port, self._master_ui, self._worker_ui, self._worker_port = (
            self._fixed_ports or tuple(free_ports(4)))
        self._env = dict(os.environ, **spark_env(self.workdir))
        self._env.pop("PYSPARK_SUBMIT_ARGS", None)

    def programs(self) -> list[Program]:
        """The master, then the worker (both through ``bin/spark-class``)."""
        assert self.workdir is not None
        wd = self.workdir
        launcher = str(spark_home() / "bin" / "spark-class")
        master = (launcher, MASTER_CLASS, "--host", self.host, "--port", str(self.port),
                  "--webui-port", str(self._master_ui))
        worker = (launcher, WORKER_CLASS, "--host", self.host, "--port", str(self._worker_port),
                  "--webui-port", str(self._worker_ui), "--cores", str(self.cores),
                  "--memory", self.memory, "--work-dir", str(wd / "work"), self.master_url)
        return [Program("master", master, cwd=wd, log=self.log_paths[0], env=self._env,
                        stop_wait=20, start_seconds=3, priority=50),
                Program("worker", worker, cwd=wd, log=self.log_paths[1], env=self._env,
                        stop_wait=20, start_seconds=3, priority=51)]

    def bring_up(self, launch: Launch) -> None:
        master, worker = self.programs()
        self._master = launch(master)
        self._worker = launch(worker)
        procs = [self._master, self._worker]
        wait_for(lambda: log_contains(self.log_paths[0], WORKER_REGISTERED),
                 what=f"spark master {self.master_url}: a worker registered",
                 timeout=self.startup_timeout, log_paths=self.log_paths, procs=procs)
        wait_for(self.probe, what=f"spark job on {self.master_url}",
                 timeout=self.startup_timeout, log_paths=self.log_paths, procs=procs,
                 interval=2.0)

    def probe(self) -> bool:
        """Runs a one-task job on the cluster in a separate driver process (so a test's own
        session is not tied to this one), true when it printed the expected sum."""
        script = (
            "from pyspark.sql import SparkSession\n"
            f"s = SparkSession.builder.master({self.master_url!r}).appName('probe')"
            ".config('spark.ui.enabled', 'false').config('spark.driver.host', '127.0.0.1')"
            ".config('spark.cores.max', '1').getOrCreate()\n"
            "print('SUM', s.sparkContext.parallelize(range(10), 1).sum())\n"
            "s.stop()\n")
        assert self.workdir is not None
        env = dict(os.environ, **spark_env(self.workdir))
        import sys

        env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                              timeout=self.startup_timeout, cwd=self.workdir, check=False)
        with open(self.workdir / "logs" / "probe.out", "ab") as log:
            log.write(done.stdout + done.stderr)
        return done.returncode == 0 and b"SUM 45" in done.stdout

    def _stop(self) -> None:
        for proc in (self._worker, self._master):
            terminate(proc, timeout=20)  # type: ignore[arg-type]
        self._worker = self._master = None
