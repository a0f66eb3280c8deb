"""slapd among the dev servers, without starting it: its configuration (a hashed
administrator password, an mdb database in its own directory), what `up` writes into
services.env, and what the supervised root keeps from one start to the next."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from devtools.devservers.ldap import LdapServer, ssha
from devtools.devservers.servers import INSTALL_ORDER, ORDER, env_lines, parse_only
from devtools.devservers.supervised import PORTS, _kept_of, make, ports


def test_ssha_is_what_slapd_checks_a_password_against():
    hashed = ssha("secret")
    raw = base64.b64decode(hashed.removeprefix("{SSHA}"))
    digest, salt = raw[:20], raw[20:]
    assert hashlib.sha1(b"secret" + salt).digest() == digest and len(salt) == 8
    assert ssha("secret") != hashed  # salted


def test_slapd_is_installed_and_supervised_under_its_names():
    assert "ldap" in ORDER and "ldap" in INSTALL_ORDER
    assert parse_only("slapd,pg") == ["pg", "ldap"] and parse_only("openldap") == ["ldap"]


def test_services_env_points_letterlog_at_the_directory():
    ldap = LdapServer(port=24725, password="pw")
    assert env_lines({"ldap": ldap}) == [
        "LETTERLOG_DIRECTORY=ldap",
        "LETTERLOG_LDAP_URL=ldap://127.0.0.1:24725",
        "LETTERLOG_LDAP_BASE_DN=ou=people,dc=letterlog,dc=test",
        "LETTERLOG_LDAP_GROUP_BASE_DN=ou=groups,dc=letterlog,dc=test",
        "LETTERLOG_LDAP_BIND_DN=cn=admin,dc=letterlog,dc=test",
        "LETTERLOG_LDAP_PASSWORD=pw",
    ]


def test_the_root_keeps_its_port_and_password(tmp_path: Path):
    server = make("ldap", tmp_path, {"port": 24725, "password": "kept"})
    assert isinstance(server, LdapServer) and server.workdir is None
    assert (server.port, server.password) == (24725, "kept")
    assert _kept_of("ldap", server) == {"port": 24725, "password": "kept"}
    assert ports(server) == {"slapd": 24725} and PORTS["ldap"] == {"port": "slapd"}


def test_the_configuration_holds_no_clear_password_and_its_own_database(tmp_path: Path):
    server = LdapServer(port=24725, password="clear-text", workdir=tmp_path)
    server.workdir = tmp_path
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "data.mdb").touch()  # kept data: no slapadd
    server.prepare()
    conf = (tmp_path / "slapd.conf").read_text()
    assert "clear-text" not in conf and "rootpw {SSHA}" in conf
    assert f"directory {tmp_path / 'data'}" in conf and "database mdb" in conf
    assert (tmp_path / "slapd.conf").stat().st_mode & 0o777 == 0o600
    [program] = server.programs()
    assert program.name == "slapd" and program.command[-1] == "ldap://127.0.0.1:24725/"
