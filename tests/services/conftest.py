"""Session-scoped real servers: `postgres_server`, `hbase_server`, `kafka_server`, and
`slapd` (under supervisord, with `people` in it).

Each fixture starts its server once per test session (installing it first if needed) and
yields the started object from `devtools.devservers`. If a server cannot start, the test is
skipped with the reason and the log tail -- unless `CI` is set to true (also 1/yes, as in
tests/conftest.py), where the test fails instead.

Using them from another test directory: import them into that directory's conftest.py

    from tests.services.conftest import hbase_server, kafka_server, postgres_server  # noqa: F401

(Not via `pytest_plugins = ["tests.services.conftest"]`: pytest then registers this conftest
twice and refuses.) The servers themselves are process-wide singletons, so however many
conftests expose the fixtures, each server starts at most once per session and a failed start
is not retried.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.devservers import (
    HBaseServer,
    KafkaServer,
    LdapServer,
    PostfixServer,
    PostgresServer,
)
from devtools.devservers.keycluster import KeyClusterServer
from devtools.devservers.supervised import SupervisedServices
from tests.factories import database
from tests.services.servers import (
    _fixture,
    _unavailable,
    ldap_of,
)
from tests.services.support import Pipeline


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A started PostgresServer (dsn, host, port, user, password, dbname, eventsourcing_env())."""
    yield from _fixture("postgres", PostgresServer)  # type: ignore[misc]


@pytest.fixture(scope="session")
def hbase_server() -> Iterator[HBaseServer]:
    """A started HBaseServer (thrift_host, thrift_port, connection())."""
    yield from _fixture("hbase", HBaseServer)  # type: ignore[misc]


@pytest.fixture(scope="session")
def kafka_server() -> Iterator[KafkaServer]:
    """A started KafkaServer (bootstrap)."""
    yield from _fixture("kafka", KafkaServer)  # type: ignore[misc]


@pytest.fixture(scope="session")
def postfix_server() -> Iterator[PostfixServer]:
    """A started PostfixServer (port, send(), queue(), flush(), use_pipe(), use_lmtp())."""
    yield from _fixture("postfix", PostfixServer)  # type: ignore[misc]


@pytest.fixture(scope="session")
def key_cluster() -> Iterator[KeyClusterServer]:
    """The key store's own PostgreSQL cluster (its WAL policy: ADR 0073)."""
    yield from _fixture("keys", KeyClusterServer)  # type: ignore[misc]


@pytest.fixture
def key_dsn(key_cluster: KeyClusterServer) -> Iterator[str]:
    """A fresh database on the key cluster (its DSN), dropped after the test."""
    with database(key_cluster) as dsn:
        yield dsn


@pytest.fixture
def pg_dsn(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh database on the PostgreSQL server (its DSN), dropped after the test."""
    with database(postgres_server) as dsn:
        yield dsn


# -- slapd: the user directory, supervised as `python -m devtools.devservers up` runs it ----------

@pytest.fixture(scope="session")
def slapd() -> Iterator[SupervisedServices]:
    """slapd under supervisord in a root of its own (short: it holds supervisord's socket);
    a test may stop and start the program ``slapd`` (then ``ldap_of(slapd).await_ready()``)."""
    root = Path(tempfile.mkdtemp(prefix="ll-ldap-"))
    services = SupervisedServices(["ldap"], root)
    try:
        services.start()
    except Exception as error:  # noqa: BLE001 - reported as the other fixtures do
        services.stop()
        _unavailable(f"slapd did not start: {error}")
    try:
        yield services
    finally:
        services.stop()
        shutil.rmtree(root, ignore_errors=True)




@pytest.fixture
def people(slapd: SupervisedServices) -> Iterator[LdapServer]:
    """ada, grace and gone under ou=people; sales (groupOfNames: ada, gone) and ops
    (posixGroup: grace) under ou=groups; all removed afterwards."""
    from ldap3.core.exceptions import LDAPNoSuchObjectResult

    ldap = ldap_of(slapd)
    added: list[str] = []
    conn = ldap.connection()
    try:
        for uid in ("ada", "grace", "gone"):
            dn = f"uid={uid},{ldap.people_dn}"
            conn.add(dn, ["inetOrgPerson"], {"uid": uid, "cn": uid.title(), "sn": uid})
            added.append(dn)
        sales = f"cn=sales,{ldap.groups_dn}"
        conn.add(sales, ["groupOfNames"], {"cn": "sales", "member": [
            f"uid=ada,{ldap.people_dn}", f"UID=gone, {ldap.people_dn}"]})
        ops = f"cn=ops,{ldap.groups_dn}"
        conn.add(ops, ["posixGroup"], {"cn": "ops", "gidNumber": 5000, "memberUid": ["grace"]})
        added += [sales, ops]
    finally:
        conn.unbind()
    yield ldap
    conn = ldap.connection()  # afresh: a test may have restarted slapd
    for dn in reversed(added):
        with contextlib.suppress(LDAPNoSuchObjectResult):  # a test deleted it already
            conn.delete(dn)
    conn.unbind()


@pytest.fixture
def pipeline(request: Any, tmp_path: Path, postgres_server: Any, hbase_server: Any,
             kafka_server: Any) -> Iterator[Pipeline]:
    """Workers write through Thrift1 unless the test asks for ``"thrift2"`` (indirect)."""
    with database(postgres_server) as dsn:
        p = Pipeline(tmp_path, dsn, kafka_server.bootstrap, hbase_server,
                     getattr(request, "param", "thrift1"))
        try:
            yield p
        finally:
            p.close()
