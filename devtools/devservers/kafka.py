"""A throw-away single-node Kafka 3.9 in KRaft mode (combined broker + controller).

Jars come from Maven Central through `maven/kafka/pom.xml` (resolved once into the cache).
`kafka.tools.StorageTool format -t <cluster id> -c server.properties` then
`kafka.Kafka server.properties`, with every internal topic at replication factor 1 (otherwise
the consumer-offsets topic never appears and consumer groups hang).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import secrets
import uuid
from pathlib import Path

from adapters.operations.probing import run_in_thread

from ._common import (
    LOCALHOST,
    PRIVATE_UMASK,
    Handle,
    Launch,
    Program,
    Service,
    ServiceFailed,
    free_ports,
    port_open,
    run_checked,
    terminate,
    wait_for,
)
from .toolchain import find_java, maven_lib, pom_property

__all__ = ["KafkaServer", "KAFKA_POM", "install_kafka"]

KAFKA_POM = Path(__file__).parent / "maven" / "kafka" / "pom.xml"

LOG4J_PROPERTIES = """\
# written by devtools/devservers/kafka.py (reload4j, log4j 1 syntax)
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${kafka.logs.dir}/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.org.apache.kafka.controller=INFO
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
"""


def install_kafka() -> Path:
    """Resolve the Kafka jars (once) and return the lib dir."""
    version = pom_property(KAFKA_POM, "kafka.version")
    return maven_lib(KAFKA_POM, prefix=f"kafka-{version}")


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (22 chars), never
    starting with ``-`` (the storage tool would take it for an option, as Kafka's own
    ``Uuid.randomUuid`` avoids: one id in 64 did)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaServer(Service):
    """Kafka broker + KRaft controller on 127.0.0.1 (node id 1).

    Attributes after `start()`: `bootstrap` ("127.0.0.1:<port>"), `host`, `port`,
    `controller_port`, `cluster_id`, `log_paths`. `broker_config` adds/overrides
    server.properties entries (e.g. ``{"num.partitions": "4"}``).
    """

    name = "kafka"

    def __init__(
        self,
        *,
        startup_timeout: float = 120.0,
        heap: str = "512m",
        port: int | None = None,
        host: str = LOCALHOST,
        controller_port: int | None = None,
        broker_config: dict[str, str] | None = None,
        workdir: str | os.PathLike[str] | None = None,
        keep_workdir: bool | None = None,
    ) -> None:
        super().__init__(
            workdir=workdir, startup_timeout=startup_timeout, keep_workdir=keep_workdir
        )
        self.heap = heap
        self.host = host  # listens and advertises here (a bridge's, for other namespaces)
        self.port: int = port or 0
        self._fixed_port = port
        self.controller_port: int = controller_port or 0
        self._fixed_controller_port = controller_port
        self.cluster_id = new_cluster_id()
        self.broker_config = dict(broker_config or {})
        self.lib: Path | None = None
        self.java: Path | None = None
        self._proc: Handle | None = None
        self._env: dict[str, str] = {}

    # ------------------------------------------------------------------ info
    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_paths(self) -> list[Path]:
        if self.workdir is None:
            return []
        logs = self.workdir / "logs"
        return [logs / "format.log", logs / "server.log", logs / "kafka.out"]

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # ------------------------------------------------------------------ lifecycle
    def install(self) -> None:
        self.java = find_java()
        self.lib = install_kafka()

    def server_properties(self) -> dict[str, str]:
        assert self.workdir is not None
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{self.host}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            # every internal topic at replication factor 1 on a single node
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "8",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            "delete.topic.enable": "true",
            # small machine
            "num.network.threads": "2",
            "num.io.threads": "4",
            "num.recovery.threads.per.data.dir": "1",
            "log.retention.hours": "168",
        }
        props.update(self.broker_config)
        return props

    def prepare(self) -> None:
        """Ports, `server.properties`, and the KRaft storage format."""
        try:
            import aiokafka  # noqa: F401
        except ImportError as exc:
            raise ServiceFailed(
                "kafka: the readiness probe needs aiokafka (pip install aiokafka)"
            ) from exc
        assert self.workdir is not None and self.java is not None and self.lib is not None
        wd = self.workdir
        for sub in ("conf", "logs", "data"):
            (wd / sub).mkdir(parents=True, exist_ok=True)
        free = iter(free_ports(2, self.host))
        self.port = self._fixed_port or next(free)
        self.controller_port = self._fixed_controller_port or next(free)
        conf = wd / "conf" / "server.properties"
        conf.write_text(
            "# written by devtools/devservers/kafka.py\n"
            + "".join(f"{k}={v}\n" for k, v in self.server_properties().items())
        )
        (wd / "conf" / "log4j.properties").write_text(LOG4J_PROPERTIES)
        self._env = dict(os.environ, JAVA_HOME=str(self.java.parent.parent))
        self._env.pop("CLASSPATH", None)
        self._env.pop("JAVA_TOOL_OPTIONS", None)
        formatted = self.formatted_cluster_id()
        if formatted is not None:  # kept data: formatted once, by an earlier start
            self.cluster_id = formatted
            return
        # Kafka 3.9: a static `controller.quorum.voters` quorum is formatted without
        # --standalone (that flag is for the dynamic `controller.quorum.bootstrap.servers`)
        run_checked(
            self._java(
                "256m", "kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", str(conf)
            ),
            what="kafka: storage format",
            log=wd / "logs" / "format.log",
            cwd=wd,
            env=self._env,
            timeout=180,
            umask=PRIVATE_UMASK,
        )

    def formatted_cluster_id(self) -> str | None:
        """The cluster id in ``data/meta.properties`` if the storage is formatted."""
        assert self.workdir is not None
        try:
            text = (self.workdir / "data" / "meta.properties").read_text()
        except OSError:
            return None
        for line in text.splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "cluster.id":
                return value.strip()
        return None

    def _java(self, heap: str, main: str, *args: str) -> list[str]:
        assert self.workdir is not None
        wd = self.workdir
        return [
            str(self.java),
            f"-Xmx{heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            "-Djava.net.preferIPv4Stack=true",
            f"-Djava.io.tmpdir={wd / 'data'}",
            f"-Dlog4j.configuration={(wd / 'conf' / 'log4j.properties').as_uri()}",
            f"-Dkafka.logs.dir={wd / 'logs'}",
            "-cp",
            f"{self.lib}/*",
            main,
            *args,
        ]

    def programs(self) -> list[Program]:
        assert self.workdir is not None
        wd = self.workdir
        command = self._java(self.heap, "kafka.Kafka", str(wd / "conf" / "server.properties"))
        return [Program("kafka", tuple(command), cwd=wd, log=wd / "logs" / "kafka.out",
                        env=self._env, stop_wait=60, start_seconds=5, priority=40)]

    def bring_up(self, launch: Launch) -> None:
        [program] = self.programs()
        self._proc = launch(program)
        wait_for(
            lambda: port_open(self.host, self.port),
            what=f"kafka broker port {self.bootstrap}",
            timeout=self.startup_timeout,
            log_paths=self.log_paths,
            procs=[self._proc],
            interval=0.25,
        )
        wait_for(
            lambda: run_in_thread(self.probe, timeout=90),
            what="kafka probe (create topic, produce, consume one record in a group)",
            timeout=self.startup_timeout,
            log_paths=self.log_paths,
            procs=[self._proc],
            interval=1.0,
        )

    def probe(self) -> bool:
        """Create a topic, produce a keyed record, consume it in a group, drop the topic."""
        quiet = logging.getLogger("aiokafka")
        old_level = quiet.level
        quiet.setLevel(logging.CRITICAL)
        try:
            return asyncio.run(self._probe())
        finally:
            quiet.setLevel(old_level)

    async def _probe(self) -> bool:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        topic = f"letterlog-probe-{secrets.token_hex(4)}"
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=30_000)
        await admin.start()
        try:
            await admin.create_topics(
                [NewTopic(topic, num_partitions=1, replication_factor=1)], timeout_ms=30_000
            )
            producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all")
            await producer.start()
            try:
                await producer.send_and_wait(topic, b"ok", key=b"probe")
            finally:
                await producer.stop()
            consumer = AIOKafkaConsumer(
                topic,
                bootstrap_servers=self.bootstrap,
                group_id=f"{topic}-group",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
            )
            await consumer.start()
            try:
                msg = await asyncio.wait_for(consumer.getone(), timeout=60)
                if (msg.key, msg.value) != (b"probe", b"ok"):
                    raise RuntimeError(f"probe consumed {msg.key!r}={msg.value!r}")
                await consumer.commit()
            finally:
                await consumer.stop()
            await admin.delete_topics([topic], timeout_ms=30_000)
        finally:
            await admin.close()
        return True

    def _stop(self) -> None:
        keep = self.keep_workdir or self._given_workdir is not None
        terminate(self._proc, timeout=60 if keep else 20)  # type: ignore[arg-type]
        self._proc = None
