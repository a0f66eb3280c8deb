"""The dev servers by name, as the command line (``__main__``) names them: the aliases
``--only`` takes, the order they start in, one server made from its name, and the
``LETTERLOG_*`` lines of ``services.env`` that point letterlog at them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._common import Service
from .dovecot import DovecotServer
from .hbase import HBaseServer
from .kafka import KafkaServer
from .keycluster import KeyClusterServer
from .ldap import LdapServer
from .postfix import PostfixServer
from .postgres import PostgresServer
from .spark import SparkCluster

__all__ = ["ALIASES", "INSTALL_ORDER", "ORDER", "env_lines", "make", "parse_only"]

ALIASES = {
    "pg": "pg",
    "postgres": "pg",
    "postgresql": "pg",
    "keys": "keys",
    "hbase": "hbase",
    "kafka": "kafka",
    "dovecot": "dovecot",
    "spark": "spark",
    "postfix": "postfix",
    "ldap": "ldap",
    "slapd": "ldap",
    "openldap": "ldap",
}
ORDER = ("pg", "keys", "hbase", "kafka", "dovecot", "spark", "ldap")
#: what `install` knows: `up` supervises ORDER only (the Postfix tests start their own)
INSTALL_ORDER = (*ORDER, "postfix")


def parse_only(raw: str | None, order: Sequence[str] = ORDER) -> list[str]:
    if not raw:
        return list(order)
    chosen = []
    for part in raw.split(","):
        part = part.strip().lower()
        if not part:
            continue
        if part not in ALIASES or ALIASES[part] not in order:
            raise SystemExit(
                f"--only: unknown service {part!r} (choose from {', '.join(order)})")
        chosen.append(ALIASES[part])
    return [name for name in order if name in chosen]


def make(name: str) -> Service:
    if name == "pg":
        return PostgresServer()
    if name == "keys":
        return KeyClusterServer()
    if name == "hbase":
        return HBaseServer()
    if name == "dovecot":
        return DovecotServer()
    if name == "spark":
        return SparkCluster()
    if name == "postfix":
        return PostfixServer()
    if name == "ldap":
        return LdapServer()
    return KafkaServer()


def env_lines(servers: dict[str, Service]) -> list[str]:
    lines: list[str] = []
    pg = servers.get("pg")
    if isinstance(pg, PostgresServer):
        lines += ["LETTERLOG_EVENT_STORE=postgres", f"LETTERLOG_POSTGRES_DSN={pg.dsn}"]
    keys = servers.get("keys")
    if isinstance(keys, KeyClusterServer):  # the KEKs: the key cluster (ADR 0073)
        lines += [f"LETTERLOG_KEY_STORE_DSN={keys.dsn}"]
    hb = servers.get("hbase")
    if isinstance(hb, HBaseServer):
        lines += [
            "LETTERLOG_TABLE_STORE=hbase",
            f"LETTERLOG_HBASE_HOST={hb.thrift_host}",
            f"LETTERLOG_HBASE_PORT={hb.thrift_port}",
            f"LETTERLOG_HBASE_THRIFT2_PORT={hb.thrift2_port}",
            f"LETTERLOG_HBASE_COMPACTOR={hb.compactor_command()}",  # erase complete
        ]
    kf = servers.get("kafka")
    if isinstance(kf, KafkaServer):
        lines += [f"LETTERLOG_KAFKA_BOOTSTRAP={kf.bootstrap}"]
    sp = servers.get("spark")
    if isinstance(sp, SparkCluster):
        lines += [f"LETTERLOG_SPARK_MASTER={sp.master_url}"]
    ld = servers.get("ldap")
    if isinstance(ld, LdapServer):
        lines += [f"{k}={v}" for k, v in ld.settings_env().items()]
    return lines
