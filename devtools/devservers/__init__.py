"""Real servers for tests and local runs: PostgreSQL, HBase (standalone + Thrift1), Kafka (KRaft),
Dovecot (the peer ``bench ingest --peer dovecot`` compares with), a Spark standalone
cluster (master + worker from the pyspark package), OpenLDAP (the user directory) and
Postfix (the MTA in front of
``letterlog lda`` and ``letterlog lmtp`` in tests/services/test_mta_postfix.py).

Installed from Debian packages (PostgreSQL, Dovecot, Postfix, slapd, a JDK) and Maven Central (HBase
and Kafka jars), started on 127.0.0.1 with free ports, and probed for real before `start()` returns.
See docs/services.md. Client libraries are imported lazily, only by the probes.

May import: anything of letterlog (``adapters.tables`` for the HBase Thrift2 IDL); imported
only by the tests, ``bench`` and its own command, ``python -m devtools.devservers``.
"""

from ._common import ServiceFailed, cache_dir
from .dovecot import DovecotServer
from .hbase import HBaseServer
from .kafka import KafkaServer
from .ldap import LdapServer
from .postfix import PostfixServer
from .postgres import PostgresServer
from .spark import SparkCluster

__all__ = [
    "DovecotServer", "HBaseServer", "KafkaServer", "LdapServer", "PostfixServer", "PostgresServer",
    "ServiceFailed", "SparkCluster", "cache_dir",
]
