"""Install or run the real servers from the command line (no third-party CLI library).

python -m adapters.devservers install [--only pg,hbase,kafka,dovecot]
    apt (PostgreSQL, Dovecot, a JDK 17 if missing, Maven if missing) + Maven jars; starts
    nothing.
python -m adapters.devservers up [--only pg,hbase,kafka,dovecot] [--env-file PATH]
    start them, write <cache>/services.env (LETTERLOG_... lines), stay in the foreground
    until Ctrl-C / SIGTERM, then tear everything down (and remove the env file).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ._common import Service, ServiceFailed, cache_dir
from .dovecot import DovecotServer
from .hbase import HBaseServer
from .kafka import KafkaServer
from .postgres import PostgresServer

ALIASES = {
    "pg": "pg",
    "postgres": "pg",
    "postgresql": "pg",
    "hbase": "hbase",
    "kafka": "kafka",
    "dovecot": "dovecot",
}
ORDER = ("pg", "hbase", "kafka", "dovecot")


def parse_only(raw: str | None) -> list[str]:
    if not raw:
        return list(ORDER)
    chosen = []
    for part in raw.split(","):
        part = part.strip().lower()
        if not part:
            continue
        if part not in ALIASES:
            raise SystemExit(
                f"--only: unknown service {part!r} (choose from pg, hbase, kafka, dovecot)")
        chosen.append(ALIASES[part])
    return [name for name in ORDER if name in chosen]


def make(name: str) -> Service:
    if name == "pg":
        return PostgresServer()
    if name == "hbase":
        return HBaseServer()
    if name == "dovecot":
        return DovecotServer()
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


def cmd_up(names: Sequence[str], env_file: Path) -> int:
    servers: dict[str, Service] = {}
    old_term = signal.signal(signal.SIGTERM, _raise_stop)
    # explicit, so Ctrl-C/SIGINT stops us even when started in the background (SIGINT ignored)
    old_int = signal.signal(signal.SIGINT, _raise_stop)
    written = False
    try:
        for name in names:
            svc = make(name)
            print(f"starting {name} ...", flush=True)
            svc.start()
            servers[name] = svc
            print(f"  {name} up in {svc.startup_seconds:.1f} s; logs: {svc.workdir}", flush=True)
        lines = env_lines(servers)
        env_file.parent.mkdir(parents=True, exist_ok=True)
        env_file.write_text(
            f"# written by `python -m adapters.devservers up` (pid {os.getpid()});"
            " removed when it stops\n" + "\n".join(lines) + "\n"
        )
        written = True
        print()
        print("\n".join(lines))
        pg = servers.get("pg")
        if isinstance(pg, PostgresServer):
            print(
                "# eventsourcing library:",
                " ".join(f"{k}={v}" for k, v in pg.eventsourcing_env().items()),
            )
        print()
        print(f"wrote {env_file}; point letterlog at these servers with:")
        print(f"    set -a; . {env_file}; set +a")
        print("Ctrl-C stops them all.", flush=True)
        while True:
            for name, svc in servers.items():
                if not getattr(svc, "running", True):
                    print(f"\n{name} stopped unexpectedly:\n{svc.tail_logs(40)}", file=sys.stderr)
                    return 1
            time.sleep(1.0)
    except ServiceFailed as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, _Stop):
        print("\nstopping ...", flush=True)
        return 0
    finally:
        # finish tearing down undisturbed
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if written:
            with contextlib.suppress(OSError):
                env_file.unlink()
        for name in reversed(list(servers)):
            with contextlib.suppress(Exception):
                servers[name].stop()
                print(f"  {name} stopped", flush=True)
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m adapters.devservers",
        description="Install / run real PostgreSQL, HBase (standalone + Thrift1) and Kafka (KRaft) "
        "servers on 127.0.0.1 for letterlog tests and local runs.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_install = sub.add_parser("install", help="install packages and jars; start nothing")
    p_install.add_argument("--only", help="comma list of pg,hbase,kafka,dovecot (default: all)")
    p_up = sub.add_parser("up", help="start servers and stay in the foreground until Ctrl-C")
    p_up.add_argument("--only", help="comma list of pg,hbase,kafka,dovecot (default: all)")
    p_up.add_argument(
        "--env-file",
        type=Path,
        default=None,
        help="where to write the LETTERLOG_... lines (default: <cache>/services.env)",
    )
    args = parser.parse_args(argv)
    names = parse_only(args.only)
    if args.command == "install":
        return cmd_install(names)
    return cmd_up(names, args.env_file or cache_dir() / "services.env")


if __name__ == "__main__":
    sys.exit(main())
