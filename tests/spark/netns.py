"""A Spark standalone cluster over two network stacks: a master and one worker on the host
side of a veth pair, a second worker in a network namespace of its own, on the other side.

    host (root namespace)                         namespace ``llspark-XXXX``
    master   10.231.N.1:P  <------ veth ------>   worker B  10.231.N.2
    worker A 10.231.N.1                           (its executor connects to the driver
    driver   spark.driver.host=10.231.N.1          at the address the driver advertises)

Inside the namespace the only other address is the host side of the veth pair: worker B's
executor reaches the driver only if the driver advertises 10.231.N.1 (a driver on
127.0.0.1 would be its own loopback). Shuffle blocks travel between the executors over the
same pair. Both workers have 1 core; a session asks for ``spark.cores.max=2`` and
``spark.executor.cores=1``: two executors, one per side.

``NamespacedCluster.start()`` creates the namespace and the pair, starts the JVMs and waits
for the master's log to say both workers registered; ``stop()`` kills every process (the
JVMs' process groups and anything left in the namespace) and deletes the namespace and the
pair, also after a failed start. Needs root (``ip netns``). ``host_worker=False``: the
namespace's worker only (every executor on the other side of the pair).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
from pathlib import Path

from adapters.sparkjob.environment import spark_env, spark_home
from devtools.devservers._common import log_contains, spawn, terminate, wait_for

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def can_make_namespaces() -> str | None:
    """None if this process can make network namespaces, else why not."""
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    if os.geteuid() != 0:
        return "network namespaces need root"
    return None


class NamespacedCluster:
    def __init__(self, workdir: Path, *, host_worker: bool = True) -> None:
        tag = secrets.token_hex(3)
        self.workdir = workdir
        self.host_worker = host_worker  # False: the namespace's worker only
        self.netns = f"llspark-{tag}"
        self.host_if, self.ns_if = f"llh{tag}", f"lln{tag}"
        octet = int(tag[:2], 16)
        self.host_ip, self.ns_ip = f"10.231.{octet}.1", f"10.231.{octet}.2"
        self.port = 7077
        self._procs: list[subprocess.Popen[bytes]] = []

    @property
    def master_url(self) -> str:
        return f"spark://{self.host_ip}:{self.port}"

    @property
    def logs(self) -> Path:
        return self.workdir / "logs"

    def worker_dir(self, side: str) -> Path:
        return self.workdir / f"worker-{side}"

    def start(self, timeout: float = 240) -> None:
        try:
            self._network()
            self._jvms(timeout)
        except BaseException:
            self.stop()
            raise

    def _network(self) -> None:
        _ip("netns", "add", self.netns)
        _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        _ip("link", "set", self.ns_if, "netns", self.netns)
        _ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
        _ip("link", "set", self.host_if, "up")
        inside = ("netns", "exec", self.netns, "ip")
        _ip(*inside, "addr", "add", f"{self.ns_ip}/30", "dev", self.ns_if)
        _ip(*inside, "link", "set", self.ns_if, "up")
        _ip(*inside, "link", "set", "lo", "up")

    def _env(self, local_ip: str, side: str) -> dict[str, str]:
        env = dict(os.environ, **spark_env(self.workdir))
        env.pop("PYSPARK_SUBMIT_ARGS", None)
        env.update(SPARK_LOCAL_IP=local_ip, SPARK_WORKER_DIR=str(self.worker_dir(side)),
                   SPARK_LOG_DIR=str(self.logs))
        return env

    def _jvms(self, timeout: float) -> None:
        launcher = str(spark_home() / "bin" / "spark-class")
        for side in ("a", "b"):
            self.worker_dir(side).mkdir(parents=True, exist_ok=True)
        master = spawn([launcher, MASTER, "--host", self.host_ip, "--port", str(self.port),
                        "--webui-port", "0"], log=self.logs / "master.out", cwd=self.workdir,
                       env=self._env(self.host_ip, "a"))
        self._procs.append(master)
        worker = (WORKER, "--cores", "1", "--memory", "1g", "--webui-port", "0")
        if self.host_worker:
            self._procs.append(spawn(
                [launcher, *worker, "--host", self.host_ip,
                 "--work-dir", str(self.worker_dir("a")), self.master_url],
                log=self.logs / "worker-a.out", cwd=self.workdir,
                env=self._env(self.host_ip, "a")))
        self._procs.append(spawn(
            ["ip", "netns", "exec", self.netns, launcher, *worker, "--host", self.ns_ip,
             "--work-dir", str(self.worker_dir("b")), self.master_url],
            log=self.logs / "worker-b.out", cwd=self.workdir, env=self._env(self.ns_ip, "b")))
        master_log = self.logs / "master.out"
        wait_for(lambda: (not self.host_worker
                          or log_contains(master_log, f"Registering worker {self.host_ip}"))
                 and log_contains(master_log, f"Registering worker {self.ns_ip}"),
                 what=f"both workers registered with {self.master_url}", timeout=timeout,
                 log_paths=[master_log, self.logs / "worker-a.out", self.logs / "worker-b.out"],
                 procs=self._procs)

    def stop(self) -> None:
        for proc in reversed(self._procs):
            terminate(proc, timeout=20)
        self._procs.clear()
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            pids = subprocess.run(["ip", "netns", "pids", self.netns], capture_output=True,
                                  text=True, timeout=30, check=False).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
        for args in (("netns", "del", self.netns), ("link", "del", self.host_if)):
            with contextlib.suppress(subprocess.CalledProcessError, subprocess.SubprocessError):
                _ip(*args)

    def executor_logs(self, side: str) -> str:
        """The stderr of every executor worker ``side`` ran."""
        return "".join(p.read_text(errors="replace")
                       for p in sorted(self.worker_dir(side).glob("app-*/*/stderr")))
