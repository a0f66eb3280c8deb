"""Install or run the real servers from the command line (no third-party CLI library).

python -m adapters.devservers install [--only pg,hbase,kafka,dovecot,spark,postfix]
    apt (PostgreSQL, Dovecot, Postfix, a JDK 17 if missing, Maven if missing) + Maven jars;
    starts nothing. (Postfix is installed only: the tests start their own instances, `up`
    does not run it.)
python -m adapters.devservers up [--only pg,hbase,kafka,dovecot,spark] [--env-file PATH]
    [--detach]
    start them under supervisord (a crashed server is restarted, the others keep running),
    write <cache>/services.env (LETTERLOG_... lines), stay in the foreground reporting
    restarts until Ctrl-C / SIGTERM, then stop them all (logs and data stay in
    <tmp>/letterlog-services-<uid> until the next `up`). --detach: return once they are up.
python -m adapters.devservers status [--json]     each server's state, pid, port, uptime
python -m adapters.devservers restart NAME        one of them (postgres, hbase-thrift, ...)
python -m adapters.devservers down                stop what `up --detach` started
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from adapters.supervision import Supervisor, SupervisorError

from ._common import Service, ServiceFailed, cache_dir
from .dovecot import DovecotServer
from .hbase import HBaseServer
from .kafka import KafkaServer
from .postfix import PostfixServer
from .postgres import PostgresServer
from .spark import SparkCluster
from .supervised import SupervisedServices, default_root, restart, status

ALIASES = {
    "pg": "pg",
    "postgres": "pg",
    "postgresql": "pg",
    "hbase": "hbase",
    "kafka": "kafka",
    "dovecot": "dovecot",
    "spark": "spark",
    "postfix": "postfix",
}
ORDER = ("pg", "hbase", "kafka", "dovecot", "spark")
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
    if name == "hbase":
        return HBaseServer()
    if name == "dovecot":
        return DovecotServer()
    if name == "spark":
        return SparkCluster()
    if name == "postfix":
        return PostfixServer()
    return KafkaServer()


def env_lines(servers: dict[str, Service]) -> list[str]:
    lines: list[str] = []
    pg = servers.get("pg")
    if isinstance(pg, PostgresServer):
        lines += ["LETTERLOG_EVENT_STORE=postgres", f"LETTERLOG_POSTGRES_DSN={pg.dsn}"]
    hb = servers.get("hbase")
    if isinstance(hb, HBaseServer):
        lines += [
            "LETTERLOG_TABLE_STORE=hbase",
            f"LETTERLOG_HBASE_HOST={hb.thrift_host}",
            f"LETTERLOG_HBASE_PORT={hb.thrift_port}",
            f"LETTERLOG_HBASE_THRIFT2_PORT={hb.thrift2_port}",
        ]
    kf = servers.get("kafka")
    if isinstance(kf, KafkaServer):
        lines += [f"LETTERLOG_KAFKA_BOOTSTRAP={kf.bootstrap}"]
    sp = servers.get("spark")
    if isinstance(sp, SparkCluster):
        lines += [f"LETTERLOG_SPARK_MASTER={sp.master_url}"]
    return lines


def cmd_install(names: Sequence[str]) -> int:
    for name in names:
        svc = make(name)
        t0 = time.monotonic()
        print(f"installing {name} ...", flush=True)
        try:
            svc.install()
        except ServiceFailed as exc:
            print(f"FAILED: {exc}", file=sys.stderr)
            return 1
        print(f"  {name}: ready to start ({time.monotonic() - t0:.1f} s)", flush=True)
    return 0


class _Stop(BaseException):
    pass


def _raise_stop(signum: int, frame: object) -> None:
    raise _Stop(signal.Signals(signum).name)


def _write_env(services: SupervisedServices, env_file: Path) -> None:
    lines = env_lines(services.servers)
    env_file.parent.mkdir(parents=True, exist_ok=True)
    env_file.write_text(
        f"# written by `python -m adapters.devservers up` (supervisord in {services.root});"
        " removed when they stop\n" + "\n".join(lines) + "\n"
    )
    print()
    print("\n".join(lines))
    pg = services.servers.get("pg")
    if isinstance(pg, PostgresServer):
        print(
            "# eventsourcing library:",
            " ".join(f"{k}={v}" for k, v in pg.eventsourcing_env().items()),
        )
    print()
    print(f"wrote {env_file}; point letterlog at these servers with:")
    print(f"    set -a; . {env_file}; set +a")


def _watch(services: SupervisedServices) -> None:
    """Reports every change of a program's state or pid (a crash, a restart) until stopped."""
    seen = {row["name"]: (row["state"], row["pid"]) for row in services.supervisor.status()}
    while True:
        time.sleep(1.0)
        for row in services.supervisor.status():
            now = (row["state"], row["pid"])
            if seen.get(row["name"]) != now:
                print(f"{time.strftime('%H:%M:%S')} {row['name']}: {row['state']}"
                      f" (pid {row['pid'] or '-'}); log: {row['log']}", flush=True)
                seen[row["name"]] = now


def cmd_up(names: Sequence[str], env_file: Path, *, detach: bool = False,
           root: Path | None = None) -> int:
    services = SupervisedServices(names, root)
    old_term = signal.signal(signal.SIGTERM, _raise_stop)
    # explicit, so Ctrl-C/SIGINT stops us even when started in the background (SIGINT ignored)
    old_int = signal.signal(signal.SIGINT, _raise_stop)
    written = False
    try:
        print(f"starting {', '.join(names)} under supervisord in {services.root} ...",
              flush=True)
        services.start()
        for name, seconds in services.startup_seconds.items():
            print(f"  {name} up in {seconds:.1f} s", flush=True)
        _write_env(services, env_file)
        written = True
        if detach:
            print("running in the background: `python -m adapters.devservers status`, "
                  "`... restart NAME`, `... down`.", flush=True)
            return 0
        print("Ctrl-C stops them all.", flush=True)
        _watch(services)
        return 0
    except (ServiceFailed, SupervisorError) as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, _Stop):
        print("\nstopping ...", flush=True)
        return 0
    finally:
        # finish tearing down undisturbed
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if not detach or not written:
            if written:
                with contextlib.suppress(OSError):
                    env_file.unlink()
            services.stop()
            print(f"stopped; logs kept in {services.root}", flush=True)
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)


def _uptime(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def cmd_status(root: Path, as_json: bool) -> int:
    try:
        rows = status(root)
    except SupervisorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for row in rows:
        if as_json:
            print(json.dumps(row, sort_keys=True))
        else:
            print(f"{row['name']:14} {row['state']:9} pid {row['pid'] or '-':<8} "
                  f"port {row['port'] or '-':<6} up {_uptime(row['uptime']):>9}  {row['log']}")
    return 0 if all(row["state"] == "RUNNING" for row in rows) else 3


def cmd_restart(root: Path, name: str) -> int:
    try:
        done = restart(root, name)
    except SupervisorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{name} restarted in {done['seconds']} s (pid {done['pid']}"
          + (f", port {done['port']})" if done["port"] else ")"))
    return 0


def cmd_down(root: Path, env_file: Path) -> int:
    supervisor = Supervisor(root)
    if not supervisor.alive():
        print(f"nothing runs under {root}")
        return 0
    supervisor.shutdown()
    with contextlib.suppress(OSError):
        env_file.unlink()
    print(f"stopped; logs kept in {root}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m adapters.devservers",
        description="Install / run real PostgreSQL, HBase (standalone + Thrift1) and Kafka (KRaft) "
        "servers on 127.0.0.1 for letterlog tests and local runs.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_install = sub.add_parser("install", help="install packages and jars; start nothing")
    p_install.add_argument(
        "--only", help="comma list of pg,hbase,kafka,dovecot,spark,postfix (default: all)")
    p_up = sub.add_parser("up", help="start servers and stay in the foreground until Ctrl-C")
    p_up.add_argument("--only",
                      help="comma list of pg,hbase,kafka,dovecot,spark (default: all)")
    p_up.add_argument(
        "--env-file",
        type=Path,
        default=None,
        help="where to write the LETTERLOG_... lines (default: <cache>/services.env)",
    )
    p_up.add_argument("--detach", action="store_true", help="return once the servers are up")
    p_status = sub.add_parser("status", help="state, pid, port and uptime of each server")
    p_status.add_argument("--json", action="store_true", help="one JSON object per line")
    p_restart = sub.add_parser("restart", help="restart one server (a name `status` shows)")
    p_restart.add_argument("name")
    p_down = sub.add_parser("down", help="stop the servers `up --detach` started")
    p_down.add_argument("--env-file", type=Path, default=None, help="the file `up` wrote")
    for p in (p_up, p_status, p_restart, p_down):
        p.add_argument("--root", type=Path, default=None,
                       help="supervisord's directory (default: <tmp>/letterlog-services-<uid>)")
    args = parser.parse_args(argv)
    root = getattr(args, "root", None) or default_root()
    env_file = getattr(args, "env_file", None) or cache_dir() / "services.env"
    if args.command == "install":
        return cmd_install(parse_only(args.only, INSTALL_ORDER))
    if args.command == "status":
        return cmd_status(root, args.json)
    if args.command == "restart":
        return cmd_restart(root, args.name)
    if args.command == "down":
        return cmd_down(root, env_file)
    return cmd_up(parse_only(args.only), env_file, detach=args.detach, root=root)


if __name__ == "__main__":
    sys.exit(main())
