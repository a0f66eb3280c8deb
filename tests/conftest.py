"""Shared fixtures: a domain on the in-memory event store, builders for test mail."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from adapters.eventlog.store import MailLog
from adapters.payloads.files import FilePayloadStore
from adapters.payloads.memory import InMemoryPayloadStore
from domain.service import Mailstore
from tests.factories import BACKENDS, CORPUS, IN_CI, Clock, backend_params, event_log, payload_store
from tests.services.conftest import postgres_server  # noqa: F401 - for every_backend tests

# One hypothesis profile for every run (docs/testing.md): no wall-clock deadline and no
# "too slow" health check, which fail a correct test on a busy machine; the examples are as
# many as each test asks. ``HYPOTHESIS_PROFILE=thorough``: 500 where a test names no number.
settings.register_profile("letterlog", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", parent=settings.get_profile("letterlog"),
                          max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "letterlog"))


@pytest.fixture
def clock() -> Clock:
    return Clock()


# -- running in parallel (pytest-xdist, ``--dist loadgroup``; docs/testing.md) --------------------
# Each worker process starts the session's servers it needs once (tests/services/servers.py).
# So that each server starts on one worker only, every test of a module that uses a server is
# sent to that server's worker (its group); a module with module-scoped fixtures goes to one
# worker too (a fixture built once); every other test goes to whichever worker is free.
# Ordered: a group's fixtures are looked for in this order, the first found names the group.
SERVER_GROUPS = (
    ("hbase", ("hbase_server", "kafka_server", "pipeline", "erasure_hbase", "hbase")),
    ("spark", ("spark", "spark_cluster")),
    ("postfix", ("postfix_server", "open_route")),
    ("ldap", ("slapd", "people")),
    ("keys", ("key_cluster", "key_dsn")),
)
#: modules whose group is named here: those that start servers of their own (not through a
#: session fixture), and the HBase and Kafka modules split in three workers, each with its
#: own HBase (and Kafka): the stream pipeline's, and the erasure tests' (HBase's files)
MODULE_GROUPS = {
    "test_outages.py": "stream", "test_relay.py": "stream", "test_stream_e2e.py": "stream",
    "test_stream_rules_e2e.py": "stream", "test_bench_stream.py": "stream",
    "test_processes.py": "stream", "test_relay_postgres_outage.py": "stream",
    "test_erasure_hbase.py": "erasure", "test_erasure_scaleout.py": "erasure",
    "test_erasure_crash_hbase.py": "erasure",
    "test_supervised_servers.py": "supervised", "test_bench_dovecot.py": "dovecot",
    "test_bench_keystore.py": "keys", "test_erasure_intent_host_loss.py": "netns",
    "test_imap.py": "imap", "test_bench_imap.py": "dovecot",
    # the command server's tests and the start-up bench's served leg: one of them moves a
    # product module's mtime (a server whose code changed stops itself), which any other
    # command server running at that moment would see too (CI met it at load 9)
    "test_command_server.py": "command_server", "test_bench_startup.py": "command_server",
}


def _module_group(items: list[pytest.Item]) -> str | None:
    module = items[0].path.name
    if module in MODULE_GROUPS:
        return MODULE_GROUPS[module]
    names = set().union(*(item.fixturenames for item in items))  # type: ignore[attr-defined]
    for group, fixtures in SERVER_GROUPS:
        if names.intersection(fixtures):
            return group
    if any(defs[-1].scope in ("module", "class", "package")
           for item in items
           for defs in item._fixtureinfo.name2fixturedefs.values()):  # type: ignore[attr-defined]
        return items[0].nodeid.split("::")[0]
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups into node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not getattr(config, "workerinput", None) and config.getoption("dist", "no") == "no":
        return  # not distributed: nothing to group
    by_module: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_module.setdefault(item.nodeid.split("::")[0], []).append(item)
    for module_items in by_module.values():
        group = _module_group(module_items)
        if group is not None:
            for item in module_items:
                item.add_marker(pytest.mark.xdist_group(group))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked ``every_backend`` run once per event store of ``factories.BACKENDS``
    (PostgreSQL's run is marked ``services``)."""
    if "backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
            "every_backend"):
        metafunc.parametrize("backend", backend_params(*BACKENDS), indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The event store a test runs on: ``memory`` unless it is marked ``every_backend``."""
    return str(getattr(request, "param", "memory"))


@pytest.fixture
def log(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Iterator[MailLog]:
    with event_log(backend, tmp_path,
                   lambda: request.getfixturevalue("postgres_server")) as found:
        yield found


@pytest.fixture
def payloads(backend: str, tmp_path: Path) -> InMemoryPayloadStore | FilePayloadStore:
    return payload_store(backend, tmp_path)


@pytest.fixture
def mail(log: MailLog, payloads: InMemoryPayloadStore | FilePayloadStore,
         clock: Clock) -> Mailstore:
    return Mailstore(log, payloads, clock=clock)


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        if IN_CI:
            pytest.fail(f"the mail corpus is missing at {CORPUS}")
        pytest.skip(f"no mail corpus at {CORPUS}")
    return CORPUS
