"""Settings: defaults, environment, and clear errors for invalid values."""

from __future__ import annotations

import pytest

from adapters.bootstrap import postgres_env_from_dsn
from adapters.settings import load_settings
from domain.errors import SettingsError


def test_defaults_are_the_embedded_store(monkeypatch):
    monkeypatch.delenv("LETTERLOG_DATA", raising=False)
    s = load_settings()
    assert (s.event_store, s.table_store, s.durability, s.inline_limit) == (
        "sqlite", "embedded", "full", 10 * 1024)


def test_environment_selects_postgres(monkeypatch):
    monkeypatch.setenv("LETTERLOG_EVENT_STORE", "postgres")
    monkeypatch.setenv("LETTERLOG_POSTGRES_DSN", "postgresql://u:p%40ss@db.local:5433/mail")
    s = load_settings()
    env = postgres_env_from_dsn(s.postgres_dsn)
    assert env == {"POSTGRES_DBNAME": "mail", "POSTGRES_HOST": "db.local",
                   "POSTGRES_PORT": "5433", "POSTGRES_USER": "u", "POSTGRES_PASSWORD": "p@ss"}


@pytest.mark.parametrize(("env", "needle"), [
    ({"LETTERLOG_EVENT_STORE": "mysql"}, "LETTERLOG_EVENT_STORE"),
    ({"LETTERLOG_EVENT_STORE": "postgres"}, "LETTERLOG_POSTGRES_DSN"),
    ({"LETTERLOG_HBASE_PORT": "99999"}, "LETTERLOG_HBASE_PORT"),
    ({"LETTERLOG_DURABILITY": "sometimes"}, "LETTERLOG_DURABILITY"),
])
def test_invalid_settings_fail_naming_the_setting(monkeypatch, env, needle):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(SettingsError, match=needle):
        load_settings()


def test_a_malformed_dsn_is_refused():
    with pytest.raises(SettingsError, match="LETTERLOG_POSTGRES_DSN"):
        postgres_env_from_dsn("mysql://x")
