"""Settings: defaults, environment, and clear errors for invalid values."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from adapters.config.settings import Settings, load_settings, postgres_env_from_dsn
from domain.errors import SettingsError


def test_defaults_are_the_embedded_store(monkeypatch):
    monkeypatch.delenv("LETTERLOG_DATA", raising=False)
    s = load_settings()
    assert (s.event_store, s.table_store, s.durability, s.inline_limit) == (
        "sqlite", "embedded", "full", 10 * 1024)


@pytest.mark.parametrize(("overrides", "in_hbase"), [
    ({}, False),
    ({"table_store": "hbase"}, True),
    ({"table_store": "hbase", "payload_store": "files"}, False),
    ({"table_store": "hbase", "payload_store": "hbase"}, True),
])
def test_payloads_go_to_hbase_with_the_hbase_tables_unless_told_otherwise(
        monkeypatch, overrides, in_hbase):
    monkeypatch.delenv("LETTERLOG_TABLE_STORE", raising=False)
    monkeypatch.delenv("LETTERLOG_PAYLOAD_STORE", raising=False)
    assert load_settings(**overrides).payloads_in_hbase() is in_hbase


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
    ({"LETTERLOG_DIRECTORY": "ldap"}, "LETTERLOG_LDAP_BASE_DN"),
    ({"LETTERLOG_DIRECTORY": "nis"}, "LETTERLOG_DIRECTORY"),
    ({"LETTERLOG_LDAP_URL": "http://x"}, "LETTERLOG_LDAP_URL"),
    ({"LETTERLOG_USER_PURGE_MIN_RATIO": "2"}, "LETTERLOG_USER_PURGE_MIN_RATIO"),
    ({"LETTERLOG_PAYLOAD_STORE": "s3"}, "LETTERLOG_PAYLOAD_STORE"),
    ({"LETTERLOG_PAYLOAD_STORE": "hbase"}, "LETTERLOG_TABLE_STORE=hbase"),
])
def test_invalid_settings_fail_naming_the_setting(monkeypatch, env, needle):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(SettingsError, match=needle):
        load_settings()


def test_a_malformed_dsn_is_refused():
    with pytest.raises(SettingsError, match="LETTERLOG_POSTGRES_DSN"):
        postgres_env_from_dsn("mysql://x")


# -- the stdlib reader of the read path agrees with Settings ------------------------------------
ENVIRONMENTS = [
    {},
    {"LETTERLOG_DATA": "/srv/mail"},
    {"letterlog_data": "/srv/lower", "LETTERLOG_DURABILITY": "normal"},
    {"LETTERLOG_TABLE_STORE": "hbase"},
    {"LETTERLOG_EVENT_STORE": "postgres"},
    {"LETTERLOG_EVENT_STORE": "Postgres"},
    {"LETTERLOG_DURABILITY": "sometimes"},
    {"LETTERLOG_DATA": ""},
    {"LETTERLOG_DATA": "a", "letterlog_data": "b"},
    {"LETTERLOG_HBASE_PORT": "99999"},
    {"LETTERLOG_STREAM_BATCH": "5"},
    {"LETTERLOG_INLINE_LIMIT": "1"},
    {"LETTERLOG_DIRECTORY": "ldap", "LETTERLOG_LDAP_BASE_DN": "ou=people,dc=example,dc=org"},
    {"LETTERLOG_DIRECTORY": "ldap"},
    {"OTHER": "x", "LETTERLOGDATA": "y"},
]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_the_read_paths_settings_are_settings_or_none(monkeypatch, env):
    """``read_settings`` gives every field Settings would, or declines (None) and leaves it
    to Settings; it never accepts what Settings refuses."""
    from adapters.startup.envsettings import DEFAULTS, read_settings

    for key in [k for k in os.environ if k.upper().startswith("LETTERLOG_")]:
        monkeypatch.delenv(key)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    fast = read_settings()
    try:
        full = load_settings()
    except SettingsError:
        assert fast is None or not fast.embedded
        return
    if fast is not None:
        assert {name: str(getattr(fast, name)) for name in DEFAULTS} == {
            name: str(getattr(full, name)) for name in DEFAULTS}


def test_settings_take_the_read_paths_defaults_and_choices():
    from typing import get_args

    from adapters.startup.envsettings import CHOICES, DEFAULTS

    fields = Settings.model_fields
    assert {name: str(fields[name].default) for name in DEFAULTS} == DEFAULTS
    assert {name: get_args(fields[name].annotation) for name in CHOICES} == CHOICES


def test_the_read_path_declines_any_setting_it_does_not_read():
    from adapters.startup.envsettings import read_settings

    assert read_settings({"LETTERLOG_INLINE_LIMIT": "4096"}) is None
    assert read_settings({"LETTERLOG_DATA": "/d", "PATH": "/bin"}).data == Path("/d")


# -- the environment, as pydantic-settings reads it for Settings --------------------------------

@pytest.mark.parametrize(("env", "overrides", "expected"), [
    ({"LETTERLOG_STREAM_HBASE_POOL": "3", "letterlog_stream_within": "0.25"}, {},
     {"hbase_pool": 3, "within": 0.25}),
    ({"LETTERLOG_STREAM": '{"batch": 7, "threads": 2}'}, {}, {"batch": 7, "threads": 2}),
    ({"LETTERLOG_STREAM": '{"batch": 7, "threads": 2}', "LETTERLOG_STREAM_BATCH": "9"}, {},
     {"batch": 9, "threads": 2}),
    ({"LETTERLOG_STREAM_THREADS": "2"}, {"stream": {"batch": 3}}, {"batch": 3, "threads": 2}),
    ({"LETTERLOG_STREAM_NOSUCH": "1", "LETTERLOG_NOSUCH": "2"}, {}, {"batch": 5000}),
], ids=["options", "json-group", "option-beats-json", "override-merged", "unknown-ignored"])
def test_option_groups_come_from_the_environment_and_overrides(monkeypatch, env, overrides,
                                                              expected):
    for key in [k for k in os.environ if k.upper().startswith("LETTERLOG_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    stream = load_settings(**overrides).stream
    assert {name: getattr(stream, name) for name in expected} == expected


@pytest.mark.parametrize(("env", "named"), [
    ({"LETTERLOG_STREAM_BATCH": "0"}, "LETTERLOG_STREAM_BATCH"),
    ({"LETTERLOG_MAX_PARTS": "many"}, "LETTERLOG_MAX_PARTS"),
    ({"LETTERLOG_HBASE_TABLE_PREFIX": "no-dashes"}, "LETTERLOG_HBASE_TABLE_PREFIX"),
    ({"LETTERLOG_PURGE_THREADS": "17"}, "LETTERLOG_PURGE_THREADS"),
    ({"LETTERLOG_QUOTA_BYTES": "ten"}, "LETTERLOG_QUOTA_BYTES"),
    ({"LETTERLOG_QUOTA_EXCEEDED": "bounce"}, "LETTERLOG_QUOTA_EXCEEDED"),
])
def test_a_bad_value_names_its_variable(monkeypatch, env, named):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SettingsError, match=named):
        load_settings()


def test_an_option_group_that_is_not_json_is_named():
    os.environ["LETTERLOG_STREAM"] = "batch=5"
    try:
        with pytest.raises(SettingsError, match="LETTERLOG_STREAM: not a JSON object"):
            load_settings()
    finally:
        del os.environ["LETTERLOG_STREAM"]


def test_quota_settings_take_sizes_from_the_environment(monkeypatch):
    monkeypatch.setenv("LETTERLOG_QUOTA_BYTES", "10M")
    monkeypatch.setenv("LETTERLOG_QUOTA_MESSAGES", "5000")
    monkeypatch.setenv("LETTERLOG_QUOTA_EXCEEDED", "permanent")
    settings = load_settings()
    assert (settings.quota_bytes, settings.quota_messages) == (10 * 1024 * 1024, 5000)
    assert settings.quota_exceeded == "permanent"
    assert load_settings(quota_bytes="1G").quota_limits().bytes == 1024**3
