"""Real servers for tests and local runs: PostgreSQL, HBase (standalone + Thrift1), Kafka (KRaft).

Installed from Debian packages (PostgreSQL, a JDK) and Maven Central (HBase and Kafka jars),
started on 127.0.0.1 with free ports, and probed for real before `start()` returns.
See docs/services.md. Client libraries are imported lazily, only by the probes.
"""

from ._common import ServiceFailed, cache_dir
from .hbase import HBaseServer
from .kafka import KafkaServer
from .postgres import PostgresServer

__all__ = ["HBaseServer", "KafkaServer", "PostgresServer", "ServiceFailed", "cache_dir"]
