"""OpenLDAP's ``slapd`` (Debian's ``slapd`` package) as the user directory for tests and
local runs.

Debian's package is installed with debconf's "no configuration" answer: no system
directory is made and nothing is started. This server has its own ``slapd.conf`` and an
``mdb`` database in its work directory (under the dev servers' root when supervised), listens
on ``ldap://127.0.0.1:<port>/`` only, and runs in the foreground (``slapd -d 0``) as one
program. The first start loads the suffix ``dc=letterlog,dc=test`` with ``ou=people``
(users: ``inetOrgPerson`` entries with a ``uid``) and ``ou=groups`` (``groupOfNames`` or
``posixGroup``) with ``slapadd``; later starts keep what is there. The administrator
``cn=admin,dc=letterlog,dc=test`` binds with ``password`` (stored hashed in ``slapd.conf``).
Ready when that bind and a search of the suffix answer.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Any

from ._common import (
    LOCALHOST,
    PRIVATE_UMASK,
    Handle,
    Launch,
    Program,
    Service,
    free_port,
    run_checked,
    terminate,
    wait_for,
)
from .toolchain import apt_install

__all__ = ["LdapServer"]

PACKAGES = ("slapd", "ldap-utils")
#: debconf answer that installs slapd without a system directory (and starts nothing)
DEBCONF = "slapd slapd/no_configuration boolean true\n"
SCHEMAS = ("core", "cosine", "nis", "inetorgperson")
SUFFIX = "dc=letterlog,dc=test"

CONFIG = """\
# written by devtools/devservers/ldap.py
{includes}
pidfile {run}/slapd.pid
argsfile {run}/slapd.args
modulepath /usr/lib/ldap
moduleload back_mdb
sizelimit 500
database mdb
maxsize 268435456
suffix "{suffix}"
rootdn "{admin}"
rootpw {password}
directory {data}
index objectClass eq
index uid,cn,memberUid,member eq
"""

BASE = """\
dn: {suffix}
objectClass: dcObject
objectClass: organization
dc: letterlog
o: letterlog

dn: ou=people,{suffix}
objectClass: organizationalUnit
ou: people

dn: ou=groups,{suffix}
objectClass: organizationalUnit
ou: groups
"""


def _slapd() -> str | None:
    return shutil.which("slapd") or ("/usr/sbin/slapd" if Path("/usr/sbin/slapd").exists()
                                     else None)


def _slapadd() -> str | None:
    return shutil.which("slapadd") or ("/usr/sbin/slapadd" if Path("/usr/sbin/slapadd").exists()
                                       else None)


def ssha(password: str) -> str:
    """``{SSHA}`` of ``password`` (what ``slappasswd`` writes)."""
    salt = secrets.token_bytes(8)
    digest = hashlib.sha1(password.encode() + salt).digest()  # noqa: S324 - LDAP's scheme
    return "{SSHA}" + base64.b64encode(digest + salt).decode()


class LdapServer(Service):
    """slapd on 127.0.0.1:``port`` (a free one unless given) serving ``suffix``."""

    name = "slapd"

    def __init__(self, *, port: int | None = None, password: str | None = None,
                 suffix: str = SUFFIX, startup_timeout: float = 60.0,
                 workdir: str | os.PathLike[str] | None = None,
                 keep_workdir: bool | None = None) -> None:
        super().__init__(workdir=workdir, startup_timeout=startup_timeout,
                         keep_workdir=keep_workdir)
        self.host = LOCALHOST
        self.port: int = port or 0
        self.password = password or secrets.token_urlsafe(18)
        self.suffix = suffix
        self.proc: Handle | None = None

    # -- what clients need ------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"ldap://{self.host}:{self.port}"

    @property
    def admin_dn(self) -> str:
        return f"cn=admin,{self.suffix}"

    @property
    def people_dn(self) -> str:
        return f"ou=people,{self.suffix}"

    @property
    def groups_dn(self) -> str:
        return f"ou=groups,{self.suffix}"

    def settings_env(self) -> dict[str, str]:
        """The ``LETTERLOG_...`` settings of a store whose directory is this server."""
        return {"LETTERLOG_DIRECTORY": "ldap", "LETTERLOG_LDAP_URL": self.url,
                "LETTERLOG_LDAP_BASE_DN": self.people_dn,
                "LETTERLOG_LDAP_GROUP_BASE_DN": self.groups_dn,
                "LETTERLOG_LDAP_BIND_DN": self.admin_dn,
                "LETTERLOG_LDAP_PASSWORD": self.password}

    def connection(self, timeout: int = 10) -> Any:
        """An ldap3 connection bound as the administrator (the caller unbinds it)."""
        from ldap3 import NONE, Connection, Server

        server = Server(self.url, connect_timeout=timeout, get_info=NONE)
        return Connection(server, user=self.admin_dn, password=self.password,
                          receive_timeout=timeout, raise_exceptions=True, auto_bind=True)

    # -- Service ----------------------------------------------------------------------------
    def install(self) -> None:
        """``apt-get install slapd ldap-utils`` (debconf: no configuration) unless there."""
        if _slapd() is None or _slapadd() is None:
            if shutil.which("debconf-set-selections"):
                subprocess.run(["debconf-set-selections"], input=DEBCONF.encode(),
                               check=True, capture_output=True, timeout=60)
            apt_install(list(PACKAGES))
        if _slapd() is None or _slapadd() is None:
            raise self.fail("slapd or slapadd not found after apt-get install")

    @property
    def config(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "slapd.conf"

    @property
    def log_paths(self) -> list[Path]:
        return [self.workdir / "slapd.log"] if self.workdir is not None else []

    def prepare(self) -> None:
        """``slapd.conf`` (every start: the password may be new), and on the first start an
        empty database loaded with the suffix and its two organisational units."""
        assert self.workdir is not None
        w = self.workdir
        if not self.port:
            self.port = free_port()
        for d in ("data", "run"):
            (w / d).mkdir(mode=0o700, exist_ok=True)
        includes = "\n".join(f"include /etc/ldap/schema/{s}.schema" for s in SCHEMAS)
        self.config.write_text(CONFIG.format(
            includes=includes, run=w / "run", suffix=self.suffix, admin=self.admin_dn,
            password=ssha(self.password), data=w / "data"))
        os.chmod(self.config, 0o600)
        if not (w / "data" / "data.mdb").exists():
            base = w / "base.ldif"
            base.write_text(BASE.format(suffix=self.suffix))
            run_checked([str(_slapadd()), "-f", str(self.config), "-l", str(base)],
                        what="slapadd (the suffix and its units)", log=w / "slapadd.log",
                        umask=PRIVATE_UMASK)

    def programs(self) -> list[Program]:
        assert self.workdir is not None
        command = (str(_slapd()), "-d", "0", "-f", str(self.config),
                   "-h", f"ldap://{self.host}:{self.port}/")
        return [Program("slapd", command, cwd=self.workdir, log=self.workdir / "slapd.log",
                        stop_signal="TERM", stop_wait=20, start_seconds=1, priority=30)]

    def bring_up(self, launch: Launch) -> None:
        [program] = self.programs()
        self.proc = launch(program)
        wait_for(self.probe, what=f"slapd on {self.url}", timeout=self.startup_timeout,
                 log_paths=self.log_paths, procs=[self.proc], interval=0.1)

    def await_ready(self, timeout: float | None = None) -> None:
        """Waits until ``probe`` passes (after a restart of the program)."""
        wait_for(self.probe, what=f"slapd on {self.url}",
                 timeout=timeout or self.startup_timeout, log_paths=self.log_paths,
                 interval=0.1)

    def probe(self) -> bool:
        """The administrator binds and the suffix answers a search."""
        conn = self.connection(timeout=5)
        try:
            return bool(conn.search(self.suffix, "(objectClass=organization)",
                                    search_scope="BASE"))
        finally:
            conn.unbind()

    def _stop(self) -> None:
        terminate(self.proc)  # type: ignore[arg-type]
        self.proc = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None
