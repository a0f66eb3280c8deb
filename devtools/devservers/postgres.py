"""A throw-away PostgreSQL server from Debian's `postgresql` package.

`initdb` into a fresh directory, `postgres -h 127.0.0.1 -p <free port> -k <socket dir>` as a
foreground child (as the `postgres` OS user when we are root: PostgreSQL refuses to run as
root), then a password login role and a database owned by it.
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import secrets
import signal
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
    ServiceFailed,
    free_port,
    run_checked,
    terminate,
    wait_for,
)
from .toolchain import apt_install

__all__ = ["PostgresServer", "find_pg_bindir"]


def _version_key(path: str) -> tuple[int, ...]:
    m = re.search(r"/postgresql/([\d.]+)/bin", path)
    return tuple(int(x) for x in m.group(1).split(".")) if m else (0,)


def find_pg_bindir() -> Path | None:
    """$LETTERLOG_PG_BINDIR, else the newest `/usr/lib/postgresql/<ver>/bin` with initdb."""
    env = os.environ.get("LETTERLOG_PG_BINDIR")
    if env:
        return Path(env)
    found = [
        d
        for d in glob.glob("/usr/lib/postgresql/*/bin")
        if os.access(os.path.join(d, "initdb"), os.X_OK)
        and os.access(os.path.join(d, "postgres"), os.X_OK)
    ]
    if not found:
        return None
    return Path(max(found, key=_version_key))


def _os_user() -> pwd.struct_passwd | None:
    """The account to run PostgreSQL as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in (os.environ.get("LETTERLOG_PG_OS_USER"), "postgres", "letterlog"):
        if not name:
            continue
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    # no postgres account (package from elsewhere?): make a system user for it
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "letterlog"],
        check=True,
        capture_output=True,
    )
    return pwd.getpwnam("letterlog")


class PostgresServer(Service):
    """PostgreSQL on 127.0.0.1:<free port>, database `dbname` owned by password role `user`.

    >>> with PostgresServer() as pg:
    ...     psycopg.connect(pg.dsn)

    Attributes after `start()`: `host`, `port`, `user`, `password`, `dbname`, `dsn`,
    `admin_dsn` (superuser `postgres`), `socket_dir`, `log_paths`.
    `settings` are extra `-c name=value` server settings (e.g. ``{"fsync": "off"}``).
    """

    name = "postgres"

    def __init__(
        self,
        *,
        user: str = "letterlog",
        dbname: str = "letterlog",
        password: str | None = None,
        admin_password: str | None = None,
        port: int | None = None,
        host: str = LOCALHOST,
        settings: dict[str, Any] | None = None,
        startup_timeout: float = 60.0,
        workdir: str | os.PathLike[str] | None = None,
        keep_workdir: bool | None = None,
    ) -> None:
        super().__init__(
            workdir=workdir, startup_timeout=startup_timeout, keep_workdir=keep_workdir
        )
        self.host = host  # the address it listens on (a bridge's, for other namespaces)
        self.port: int = port or 0
        self._fixed_port = port
        self.user = user
        self.dbname = dbname
        self.password = password or secrets.token_urlsafe(18)
        self.admin_user = "postgres"
        self.admin_password = admin_password or secrets.token_urlsafe(18)
        self.settings = dict(settings or {})
        self.bindir: Path | None = None
        self._proc: Handle | None = None
        self._account: str | None = None
        self._env: dict[str, str] = {}

    # ------------------------------------------------------------------ info
    @property
    def dsn(self) -> str:
        return f"postgresql://{self.user}:{self.password}@{self.host}:{self.port}/{self.dbname}"

    @property
    def admin_dsn(self) -> str:
        return (
            f"postgresql://{self.admin_user}:{self.admin_password}@{self.host}:{self.port}/postgres"
        )

    @property
    def socket_dir(self) -> Path | None:
        return self.workdir / "sock" if self.workdir else None

    @property
    def log_paths(self) -> list[Path]:
        if self.workdir is None:
            return []
        return [self.workdir / "initdb.log", self.workdir / "postgres.log"]

    def eventsourcing_env(self, *, include_module: bool = False) -> dict[str, str]:
        """Env vars for the eventsourcing library's postgres module.

        With `include_module`, also the letterlog PostgreSQL factory as `PERSISTENCE_MODULE`.
        """
        env = {
            "POSTGRES_DBNAME": self.dbname,
            "POSTGRES_HOST": self.host,
            "POSTGRES_PORT": str(self.port),
            "POSTGRES_USER": self.user,
            "POSTGRES_PASSWORD": self.password,
        }
        if include_module:
            env["PERSISTENCE_MODULE"] = "adapters.eventlog.postgreslog:SerialisedPostgresFactory"
        return env

    # ------------------------------------------------------------------ lifecycle
    def install(self) -> None:
        """`apt-get install -y postgresql` unless initdb/postgres are already there."""
        self.bindir = find_pg_bindir()
        if self.bindir is None:
            apt_install(["postgresql"])
            self.bindir = find_pg_bindir()
        if self.bindir is None:
            raise ServiceFailed("postgres: initdb not found under /usr/lib/postgresql/*/bin")

    @property
    def initialized(self) -> bool:
        """Whether `workdir/data` holds a database cluster already (kept data: no initdb)."""
        return self.workdir is not None and (self.workdir / "data" / "PG_VERSION").exists()

    def prepare(self) -> None:
        """initdb into `workdir/data` (as the `postgres` account when we are root), unless
        it holds a cluster already (then its superuser password must be the one given), and
        pick the port."""
        try:
            import psycopg  # noqa: F401
        except ImportError as exc:
            raise ServiceFailed(
                "postgres: the readiness probe needs psycopg (pip install 'psycopg[binary]')"
            ) from exc
        assert self.workdir is not None and self.bindir is not None
        wd = self.workdir
        account = _os_user()
        self._account = account.pw_name if account else None
        uid = account.pw_uid if account else None
        gid = account.pw_gid if account else None
        (wd / "sock").mkdir(mode=0o700, exist_ok=True)
        self._env = {
            "PATH": f"{self.bindir}:/usr/bin:/bin",
            "LC_ALL": "C",
            "LANG": "C",
            "HOME": str(wd),
        }
        self.port = self._fixed_port or free_port(self.host)
        if self.initialized:
            return
        pwfile = wd / "pwfile"
        pwfile.write_text(self.admin_password + "\n")
        os.chmod(pwfile, 0o600)
        if account is not None:
            os.chmod(wd, 0o700)
            for p in (wd, wd / "sock", pwfile):
                os.chown(p, account.pw_uid, account.pw_gid)
        run_checked(
            [
                str(self.bindir / "initdb"),
                "-D",
                str(wd / "data"),
                "-U",
                self.admin_user,
                f"--pwfile={pwfile}",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ],
            what="postgres: initdb",
            log=wd / "initdb.log",
            cwd=wd,
            env=self._env,
            user=uid,
            group=gid,
            timeout=300,
            umask=PRIVATE_UMASK,
        )
        pwfile.unlink()
        if self.host != LOCALHOST:  # clients in other network namespaces, on its /24
            net = ".".join(self.host.split(".")[:3]) + ".0/24"
            with open(wd / "data" / "pg_hba.conf", "a") as hba:
                hba.write(f"host all all {net} scram-sha-256\n")
        if account is not None:
            os.chown(wd / "initdb.log", account.pw_uid, account.pw_gid)
            # the server's log file is created by whoever launches it; let the account write it
            (wd / "postgres.log").touch()
            os.chown(wd / "postgres.log", account.pw_uid, account.pw_gid)

    def programs(self) -> list[Program]:
        assert self.workdir is not None and self.bindir is not None
        wd = self.workdir
        # a socket path longer than a unix socket takes (~107 bytes) stops the server from
        # starting; then TCP only (every client here connects over TCP)
        sockets = str(wd / "sock")
        if len(f"{sockets}/.s.PGSQL.65535".encode()) > 100:
            sockets = ""
        cmd = [
            str(self.bindir / "postgres"),
            "-D",
            str(wd / "data"),
            "-h",
            self.host,
            "-p",
            str(self.port),
            "-k",
            sockets,
            "-c",
            "logging_collector=off",
            "-c",
            "log_destination=stderr",
            "-c",
            "unix_socket_permissions=0700",  # its socket for its own account (default 0777)
        ]
        for key, value in self.settings.items():
            cmd += ["-c", f"{key}={value}"]
        # SIGINT = PostgreSQL's "fast shutdown" (roll back clients, checkpoint, exit)
        return [
            Program("postgres", tuple(cmd), cwd=wd, log=wd / "postgres.log", env=self._env,
                    user=self._account, stop_signal="INT", start_seconds=2, priority=10)
        ]

    def bring_up(self, launch: Launch) -> None:
        [program] = self.programs()
        self._proc = launch(program)

        def probe_admin() -> bool:
            import psycopg

            with psycopg.connect(self.admin_dsn, connect_timeout=5) as conn:
                return conn.execute("select 1").fetchone() == (1,)

        wait_for(
            probe_admin,
            what=f"postgres on {self.host}:{self.port}",
            timeout=self.startup_timeout,
            log_paths=self.log_paths,
            procs=[self._proc],
            interval=0.2,
        )
        self._create_role_and_db()

        def probe_app() -> bool:
            import psycopg

            with psycopg.connect(self.dsn, connect_timeout=5) as conn:
                return conn.execute("select 1").fetchone() == (1,)

        wait_for(
            probe_app,
            what=f"postgres database {self.dbname!r} as {self.user!r}",
            timeout=30,
            log_paths=self.log_paths,
            procs=[self._proc],
        )

    def _create_role_and_db(self) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.admin_dsn, autocommit=True, connect_timeout=10) as conn:
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s",
                            (self.user,)).fetchone():
                return  # kept data: made by an earlier start
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(self.user), sql.Literal(self.password)
                )
            )
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(self.dbname), sql.Identifier(self.user)
                )
            )

    def _stop(self) -> None:
        # SIGINT = PostgreSQL's "fast shutdown" (roll back clients, checkpoint, exit)
        terminate(self._proc, sig=signal.SIGINT, timeout=30)  # type: ignore[arg-type]
        self._proc = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None
