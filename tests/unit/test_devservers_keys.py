"""The dev servers start the key cluster (ADR 0073) and `services.env` points at it."""

from __future__ import annotations

from devtools.devservers.keycluster import KEY_CLUSTER_SETTINGS, KeyClusterServer
from devtools.devservers.servers import ORDER, env_lines, parse_only
from devtools.devservers.supervised import ports


def test_the_key_cluster_is_a_dev_server_of_its_own_with_the_wal_policy_of_adr_0073():
    assert "keys" in ORDER and parse_only("keys,pg") == ["pg", "keys"]
    server = KeyClusterServer(port=5999)
    assert ports(server) == {"keys-postgres": 5999}
    assert {k: KEY_CLUSTER_SETTINGS[k] for k in ("archive_mode", "wal_recycle", "wal_init_zero")
            } == {"archive_mode": "off", "wal_recycle": "off", "wal_init_zero": "on"}
    assert server.settings["wal_recycle"] == "off"
    lines = env_lines({"keys": server})
    assert lines == [f"LETTERLOG_KEY_STORE_DSN={server.dsn}"]
    assert "/letterlog_keys" in server.dsn
