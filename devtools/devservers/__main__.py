"""Install or run the real servers from the command line (no third-party CLI library).

python -m devtools.devservers install [--only pg,keys,hbase,kafka,dovecot,spark,ldap,postfix]
    apt (PostgreSQL, Dovecot, Postfix, slapd, a JDK 17 if missing, Maven if missing) + Maven jars;
    starts nothing. (Postfix is installed only: the tests start their own instances, `up`
    does not run it.)
python -m devtools.devservers up [--only pg,keys,hbase,kafka,dovecot,spark,ldap] [--env-file PATH]
    [--detach]
    start them under supervisord (a crashed server is restarted, the others keep running) on
    the data kept in the root (default <checkout>/.letterlog-services), write
    <root>/services.env (LETTERLOG_... lines), stay in the foreground reporting restarts
    until Ctrl-C / SIGTERM, then stop them all cleanly (data and logs kept).
    --detach: return once they are up.
python -m devtools.devservers status [--json]     each server's state, pid, port, uptime
python -m devtools.devservers restart NAME        one of them (postgres, hbase-thrift, ...)
python -m devtools.devservers down                stop them cleanly; data and services.env stay
python -m devtools.devservers reset [--yes]       delete the root (all their data), saying what
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from adapters.files.filemodes import private_file
from adapters.operations.supervision import Supervisor, SupervisorError

from ._common import ServiceFailed
from .postgres import PostgresServer
from .servers import INSTALL_ORDER, env_lines, make, parse_only
from .supervised import (
    RootBusy,
    SupervisedServices,
    default_root,
    installation,
    read_kept,
    restart,
    root_lock,
    status,
    stop_all,
)


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
    private_file(env_file)  # the PostgreSQL password
    env_file.write_text(
        f"# written by `python -m devtools.devservers up` (supervisord in {services.root});"
        " the same servers, ports and passwords at every start until `reset`\n"
        + "\n".join(lines) + "\n"
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
    """Reports every change of a program's state or pid (a crash, a restart) until stopped,
    here or by `down` from another shell (then it returns)."""
    seen = {row["name"]: (row["state"], row["pid"]) for row in services.supervisor.status()}
    while True:
        time.sleep(1.0)
        try:
            rows = services.supervisor.status()
        except SupervisorError:
            if services.supervisor.alive():
                raise
            print(f"{time.strftime('%H:%M:%S')} supervisord stopped (`down`?)", flush=True)
            return
        for row in rows:
            now = (row["state"], row["pid"])
            if seen.get(row["name"]) != now:
                print(f"{time.strftime('%H:%M:%S')} {row['name']}: {row['state']}"
                      f" (pid {row['pid'] or '-'}); log: {row['log']}", flush=True)
                seen[row["name"]] = now


def _say(line: str) -> None:
    print(line, flush=True)


def cmd_up(names: Sequence[str], env_file: Path, *, detach: bool = False,
           root: Path | None = None) -> int:
    services = SupervisedServices(names, root, report=_say)
    try:
        services.refuse_if_running()
    except RootBusy as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
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
            print("running in the background: `python -m devtools.devservers status`, "
                  "`... restart NAME`, `... down`.", flush=True)
            return 0
        print("Ctrl-C stops them all.", flush=True)
        _watch(services)
        return 0
    except RootBusy as exc:  # another `up` got there first: its servers are not ours
        print(f"error: {exc}", file=sys.stderr)
        written = detach = True  # nothing of ours to stop
        return 1
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
            t0 = time.monotonic()
            try:
                services.stop()
            except SupervisorError as exc:
                print(f"FAILED to stop cleanly: {exc}", file=sys.stderr)
            print(f"stopped in {time.monotonic() - t0:.1f} s; data and logs kept in "
                  f"{services.root}", flush=True)
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


def _foreign(root: Path) -> str | None:
    """The installation that made ``root`` if it is not this one."""
    owner = read_kept(root).get("installation")
    return owner if owner and owner != str(installation()) else None


def cmd_down(root: Path) -> int:
    supervisor = Supervisor(root)
    if not supervisor.alive():
        print(f"nothing runs under {root}")
        return 0
    owner = _foreign(root)
    if owner:
        print(f"error: the servers under {root} belong to another installation ({owner}); "
              "not stopping them (stop them from there)", file=sys.stderr)
        return 1
    t0 = time.monotonic()
    print(f"stopping the servers under {root} ...", flush=True)
    try:
        with root_lock(root):
            stop_all(root, report=_say)
    except (RootBusy, SupervisorError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"stopped in {time.monotonic() - t0:.1f} s; data, logs and services.env kept in "
          f"{root} (`up` starts them again on it, `reset` deletes it)")
    return 0


#: what each entry of a root holds, for `reset`
CONTENTS = {
    "pg": "PostgreSQL: the event log and the wrapped data keys",
    "keys": "PostgreSQL: the key cluster (the key-encryption keys)",
    "hbase": "HBase: the read-model tables and their write-ahead logs",
    "kafka": "Kafka: the event topics and the consumer groups' offsets",
    "dovecot": "Dovecot: its mail",
    "spark": "Spark: the workers' files and logs",
    "ldap": "slapd: the user directory (users and groups)",
    "services.env": "the LETTERLOG_... settings `up` wrote",
    "servers.json": "the servers' ports and passwords",
}


def _size(path: Path) -> int:
    """Bytes under ``path`` (files a running server removes meanwhile count as 0)."""
    def one(p: Path) -> int:
        try:
            return p.lstat().st_size
        except OSError:
            return 0

    if path.is_symlink() or not path.is_dir():
        return one(path)
    return sum(one(p) for p in path.rglob("*"))


def cmd_reset(root: Path, env_file: Path, yes: bool) -> int:
    if not root.exists():
        print(f"nothing to delete: {root} does not exist")
        return 0
    if not ((root / "servers.json").exists() or (root / "supervisord.conf").exists()):
        print(f"error: {root} does not look like a dev servers' directory (no servers.json "
              "or supervisord.conf); not deleting it", file=sys.stderr)
        return 2
    owner = _foreign(root)
    if owner and Supervisor(root).alive():
        print(f"error: the servers under {root} belong to another installation ({owner}) "
              "and are running; not touching them", file=sys.stderr)
        return 1
    entries = sorted(root.iterdir())
    print(f"reset deletes {root}, all the dev servers' data:")
    for entry in entries:
        if entry.name in CONTENTS:
            print(f"  {entry.name + ('/' if entry.is_dir() else ''):16} "
                  f"{_size(entry) / 1e6:9.1f} MB  {CONTENTS[entry.name]}")
    rest = [e for e in entries if e.name not in CONTENTS]
    if rest:
        print(f"  {'the rest':16} {sum(map(_size, rest)) / 1e6:9.1f} MB  supervisord's "
              f"configuration, socket and log ({', '.join(e.name for e in rest)})")
    extra = env_file if env_file.exists() and root not in env_file.parents else None
    if extra:
        print(f"  and {extra}")
    if not yes:
        if not sys.stdin.isatty():
            print("error: not confirmed: pass --yes to delete without asking",
                  file=sys.stderr)
            return 2
        if input("delete all of this? [y/N] ").strip().lower() not in ("y", "yes"):
            print("nothing deleted")
            return 1
    try:
        with root_lock(root):
            if Supervisor(root).alive():
                print("stopping the servers first ...", flush=True)
                stop_all(root, report=_say)
            shutil.rmtree(root)
    except (RootBusy, SupervisorError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if extra:
        extra.unlink(missing_ok=True)
    print(f"deleted {root}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.devservers",
        description="Install / run real PostgreSQL, HBase (standalone + Thrift1) and Kafka (KRaft) "
        "servers on 127.0.0.1 for letterlog tests and local runs.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_install = sub.add_parser("install", help="install packages and jars; start nothing")
    p_install.add_argument(
        "--only",
        help="comma list of pg,keys,hbase,kafka,dovecot,spark,ldap,postfix (default: all)")
    p_up = sub.add_parser("up", help="start servers and stay in the foreground until Ctrl-C")
    p_up.add_argument("--only",
                      help="comma list of pg,keys,hbase,kafka,dovecot,spark,ldap (default: all)")
    p_up.add_argument(
        "--env-file",
        type=Path,
        default=None,
        help="where to write the LETTERLOG_... lines (default: <root>/services.env)",
    )
    p_up.add_argument("--detach", action="store_true", help="return once the servers are up")
    p_status = sub.add_parser("status", help="state, pid, port and uptime of each server")
    p_status.add_argument("--json", action="store_true", help="one JSON object per line")
    p_restart = sub.add_parser("restart", help="restart one server (a name `status` shows)")
    p_restart.add_argument("name")
    sub.add_parser("down", help="stop the servers cleanly; their data and services.env stay")
    p_reset = sub.add_parser("reset", help="delete the servers' directory and all their data "
                             "(stops them first)")
    p_reset.add_argument("--yes", action="store_true", help="do not ask")
    p_reset.add_argument("--env-file", type=Path, default=None,
                         help="a services.env `up` wrote outside the root (deleted too)")
    for p in sub.choices.values():
        if p is p_install:
            continue
        p.add_argument("--root", type=Path, default=None,
                       help="the servers' directory (default: $LETTERLOG_SERVICES_DIR, else "
                       "<checkout>/.letterlog-services)")
    args = parser.parse_args(argv)
    root = (getattr(args, "root", None) or default_root()).resolve()
    env_file = getattr(args, "env_file", None) or root / "services.env"
    if args.command == "install":
        return cmd_install(parse_only(args.only, INSTALL_ORDER))
    if args.command == "status":
        return cmd_status(root, args.json)
    if args.command == "restart":
        return cmd_restart(root, args.name)
    if args.command == "down":
        return cmd_down(root)
    if args.command == "reset":
        return cmd_reset(root, env_file, args.yes)
    return cmd_up(parse_only(args.only), env_file, detach=args.detach, root=root)


if __name__ == "__main__":
    sys.exit(main())
