"""``letterlog processes start|status|restart|stop``: relay, workers, purger in supervisord."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from adapters.cli.common import fail, group, out, state
from adapters.operations.supervision import SupervisorError
from adapters.streaming.processes import restart, start, status, stop
from domain.errors import InvalidCommand

app = group("Scale-out processes.")
SECTION = (102, 'Scale-out')  # the root help's section (adapters.cli.table)
proc_app = group("The relay, the workers and the purger under supervisord.")
app.add_typer(proc_app, name="processes")


def _proc_line(r: dict[str, Any]) -> str:
    up = "-" if r["uptime"] is None else f"{int(r['uptime'])}s"
    return (f"{r['name']:10} {r['state']:9} pid {r['pid'] or '-':<8} up {up:>7}  "
            f"metrics {r['metrics_port'] or '-':<6} {r['log']}")


def _supervised(fn: Any) -> Any:
    try:
        return fn()
    except SupervisorError as error:
        fail(str(error), 1)


@proc_app.command("start")
def processes_start(
    workers: Annotated[int, typer.Option(metavar="N", min=0, help="stream workers")] = 1,
    purger: Annotated[bool, typer.Option("--purger/--no-purger",
                                         help="run `letterlog purger` too")] = True,
    relay: Annotated[bool, typer.Option("--relay/--no-relay",
                                        help="run the outbox relay (to Kafka)")] = True,
    lmtp: Annotated[str | None, typer.Option(
        metavar="HOST:PORT|unix:PATH", help="run `letterlog lmtp --listen` there too")] = None,
    dispatcher: Annotated[bool, typer.Option(
        "--dispatcher/--no-dispatcher",
        help="run `letterlog dispatcher` too (event rules)")] = False,
    lmtp_socket_mode: Annotated[str | None, typer.Option(
        metavar="MODE", help="the LMTP unix socket's permission bits (lmtp --socket-mode)")
    ] = None,
    imap: Annotated[str | None, typer.Option(
        metavar="HOST:PORT", help="run `letterlog imap --listen` there too")] = None,
    imap_tls: Annotated[str | None, typer.Option(
        metavar="HOST:PORT", help="... and `--listen-tls` there (needs --imap-tls-cert)")] = None,
    imap_tls_cert: Annotated[str | None, typer.Option(
        metavar="FILE", help="the IMAP server's certificate chain (imap --tls-cert)")] = None,
    imap_tls_key: Annotated[str | None, typer.Option(
        metavar="FILE", help="its private key (imap --tls-key)")] = None,
    imap_plaintext_auth: Annotated[bool, typer.Option(
        help="imap --plaintext-auth: LOGIN without TLS")] = False,
) -> None:
    """Start the relay, N workers, the purger (the LMTP server, the IMAP server, the event
    rules' dispatcher) under supervisord (restarted on a crash)."""
    imap_args: list[str] = []
    for option, value in (("--listen", imap), ("--listen-tls", imap_tls),
                          ("--tls-cert", imap_tls_cert), ("--tls-key", imap_tls_key)):
        if value is not None:
            imap_args += [option, value]
    if imap_plaintext_auth:
        imap_args.append("--plaintext-auth")
    if imap_args and imap is None and imap_tls is None:
        raise InvalidCommand("the IMAP server's options need --imap HOST:PORT or "
                             "--imap-tls HOST:PORT")
    for row in _supervised(lambda: start(state.data, workers, purger, relay=relay,
                                         lmtp=lmtp, dispatcher=dispatcher,
                                         lmtp_socket_mode=lmtp_socket_mode,
                                         imap=tuple(imap_args))):
        out(row, _proc_line(row))


@proc_app.command("status")
def processes_status() -> None:
    """Each process: state, pid, uptime, metrics port, log file (exit 3 if one is down)."""
    rows = _supervised(lambda: status(state.data))
    for row in rows:
        out(row, _proc_line(row))
    if not all(r["state"] == "RUNNING" for r in rows):
        raise typer.Exit(3)


@proc_app.command("restart")
def processes_restart(name: Annotated[str, typer.Argument(
        metavar="NAME", help="relay, worker-N, purger, lmtp or imap")]) -> None:
    """Restart one process (SIGTERM, then start it again)."""
    done = _supervised(lambda: restart(state.data, name))
    out(done, f"{name} restarted in {done['seconds']} s (pid {done['pid']})")


@proc_app.command("stop")
def processes_stop() -> None:
    """Stop every process and supervisord (logs stay in DATA/supervisor)."""
    stopped = stop(state.data)
    out({"stopped": stopped}, "stopped" if stopped else "nothing was running")
