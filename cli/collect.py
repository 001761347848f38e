"""`evaltrace collect`: an OTLP receiver (HTTP and gRPC) that records what it receives as run files.

Alone it runs until SIGTERM or Ctrl-C. With `-- CMD [ARGS...]` it runs the command pointed at itself
(`_collect_child.py`) and stops when the command exits: the files are complete when it returns, so
a CI step can score them next. Its own lines then go to stderr, leaving stdout to the command.
"""

from __future__ import annotations

import gc
import os
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from evaltrace.collector.terminal import inline, plural, printable

if TYPE_CHECKING:
    from evaltrace.collector.otlp.receive.config import ReceiverConfig
    from evaltrace.collector.otlp.receive.server import Receiver, Summary

_EXIT_UNWRITTEN = 1
"""Exit code when something received could not be written (the files' loss counts say how much)."""
RECEIVED_BY = {"received_by": "collect"}
"""Every file `collect` writes has `evaltrace.received_by: collect` in its Parquet metadata."""
_EXIT_RECEIVER_FAILED = 2
"""With a command: the exit code when the receiver failed (something received not written)."""


def collect(
    http: Annotated[
        str,
        typer.Option(
            "--http", metavar="HOST:PORT", help="OTLP/HTTP address (POST /v1/traces, /v1/logs), or 'off'. Port 0: any."
        ),
    ] = "127.0.0.1:4318",
    grpc: Annotated[
        str, typer.Option("--grpc", metavar="HOST:PORT", help="OTLP/gRPC address, or 'off'. Port 0: any free port.")
    ] = "127.0.0.1:4317",
    directory: Annotated[
        Path | None,
        typer.Option("--dir", metavar="DIR", help="Folder the run files go to (default: $EVALTRACE_DIR or runs)."),
    ] = None,
    run_id: Annotated[
        str | None,
        typer.Option("--run-id", metavar="ID", help="Run label of every row (default: $EVALTRACE_RUN_ID, else new)."),
    ] = None,
    max_request_mb: Annotated[
        float,
        typer.Option("--max-request-mb", metavar="MB", min=0.001, help="Largest request, after decompression."),
    ] = 16.0,
    queue_items: Annotated[
        int,
        typer.Option(
            "--queue-items",
            metavar="N",
            min=1,
            help="Spans (with their events and links) and log records held before writing; beyond it clients "
            "are told to retry (503, UNAVAILABLE).",
        ),
    ] = 20_000,
    allow_unauthenticated: Annotated[
        bool,
        typer.Option(
            "--allow-unauthenticated",
            help="Listen beyond loopback without $EVALTRACE_COLLECT_TOKEN: anyone who can connect may send.",
        ),
    ] = False,
    command: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[-- CMD [ARGS...]]",
            help="Run CMD exporting here (OTEL_EXPORTER_OTLP_ENDPOINT/_PROTOCOL, and the token header, unless "
            "an endpoint is set); when it exits, write every file and exit with its exit code (2 if the "
            "receiver failed).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Receive OTLP traces and logs from any app or Collector and write them as run files.

    Loopback unless told otherwise; with $EVALTRACE_COLLECT_TOKEN set, requests need that bearer token.
    Beyond loopback a token is required, unless --allow-unauthenticated says otherwise.

    Ctrl-C or SIGTERM stops it after writing everything it acknowledged. With `-- CMD`, it stops
    when CMD exits (Ctrl-C and SIGTERM are passed to CMD), and the files are complete when it returns.
    """
    # gRPC's C core logs its own errors (a port in use...) to stderr, before the one `Error:` line
    # this command prints for them; read when grpc is first imported, below.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    from evaltrace.collector.otlp.receive.server import Receiver
    from evaltrace.collector.recorder.exporter import ExporterSettings

    config = _config(http, grpc, directory, run_id, max_request_mb, queue_items, allow_unauthenticated)
    # Files say who wrote them (`evaltrace doctor` tells a sender's spans from an in-process recording's).
    settings = ExporterSettings.from_env(directory=config.directory, run_id=run_id, file_labels=RECEIVED_BY)
    _check_folder(settings.directory)
    receiver = Receiver(config, settings, say=_say)
    if command:
        _run_command(receiver, command, settings.directory, settings.run_id)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    # Everything imported and built so far lives as long as the process: frozen, the collector's
    # full collections stop walking it (decoding 512-span requests measured ~40% cheaper).
    gc.freeze()
    receiver.start()
    _announce(receiver, settings.directory, settings.run_id)
    while not stop.wait(0.5):
        pass
    typer.echo("evaltrace collect: stopping: writing what was received...", err=True)
    summary = receiver.stop()
    _report(summary, settings.directory)
    if summary.written.unwritten:
        raise typer.Exit(_EXIT_UNWRITTEN)


def _config(
    http: str,
    grpc: str,
    directory: Path | None,
    run_id: str | None,
    max_request_mb: float,
    queue_items: int,
    allow_unauthenticated: bool,
) -> ReceiverConfig:
    from pydantic import SecretStr, ValidationError

    from evaltrace.collector.errors import InputError
    from evaltrace.collector.otlp.receive.config import TOKEN_ENV, ReceiverConfig, parse_address
    from evaltrace.collector.recorder.exporter import runs_directory

    token = os.environ.get(TOKEN_ENV)  # set but blank is refused by the config, not taken as "no token"
    try:
        return ReceiverConfig(
            http=parse_address(http, "--http"),
            grpc=parse_address(grpc, "--grpc"),
            directory=directory or runs_directory(),
            run_id=run_id,
            token=SecretStr(token) if token is not None else None,
            allow_unauthenticated=allow_unauthenticated,
            max_body_bytes=int(max_request_mb * 1024 * 1024),
            queue_items=queue_items,
        )
    except ValidationError as exc:
        raise InputError("; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())) from None


def _check_folder(folder: Path) -> None:
    """Fail at start, not at the first file roll after acknowledging requests, when `folder` is unusable."""
    from evaltrace.collector.errors import InputError

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--dir {printable(str(folder))}: cannot create it ({exc.strerror or exc})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"--dir {printable(str(folder))}: not writable")


def _say(line: str) -> None:
    typer.echo(line, err=True)


def _run_command(receiver: Receiver, command: list[str], directory: Path, run_id: str) -> NoReturn:
    """Run `command` exporting to `receiver`, stop when it exits, and exit with its code."""
    from evaltrace.cli import _collect_child as child

    token = receiver.config.token
    shown = child.child_settings(
        os.environ, receiver.http_address, receiver.grpc_address, token.get_secret_value() if token else None
    )
    gc.freeze()
    receiver.start()
    try:
        process = child.start(command, shown.env)
    except BaseException:
        receiver.stop()
        raise
    _announce(receiver, directory, run_id, err=True, running=f"Running {inline(command[0])} with {shown.shown}")
    code = child.wait(process)
    _say(f"evaltrace collect: {inline(command[0])} exited with {code}; writing what was received...")
    summary = receiver.stop()
    _report(summary, directory, err=True)
    raise typer.Exit(_EXIT_RECEIVER_FAILED if summary.written.unwritten else code)


def _announce(receiver: Receiver, directory: Path, run_id: str, *, err: bool = False, running: str = "") -> None:
    lines = [f"evaltrace collect: recording into {printable(str(directory))} (run id {printable(run_id)})"]
    http, grpc = receiver.http_address, receiver.grpc_address
    if http is not None:
        lines.append(f"  OTLP/HTTP  http://{http}  (POST /v1/traces, /v1/logs; protobuf or JSON, gzip)")
    if grpc is not None:
        lines.append(f"  OTLP/gRPC  {grpc}")
    if http is not None:
        lines.append(f"An app exports here with OTEL_EXPORTER_OTLP_ENDPOINT=http://{http}")
    if grpc is not None:
        lines.append(f"  (over gRPC: OTEL_EXPORTER_OTLP_PROTOCOL=grpc OTEL_EXPORTER_OTLP_ENDPOINT=http://{grpc})")
    if receiver.config.token is not None:
        lines.append("Requests must carry the bearer token in $EVALTRACE_COLLECT_TOKEN.")
    lines.append(running or "Stop with Ctrl-C or SIGTERM: everything acknowledged is written first.")
    typer.echo("\n".join(lines), err=err)
    exposed = [a for a in (http, grpc) if a is not None and not a.is_loopback]
    if exposed and receiver.config.token is None:  # only with --allow-unauthenticated (the config refuses it otherwise)
        shown = ", ".join(str(a) for a in exposed)
        typer.echo(f"Warning: listening beyond this machine ({shown}) with no $EVALTRACE_COLLECT_TOKEN", err=True)


def _report(summary: Summary, directory: Path, *, err: bool = False) -> None:
    from evaltrace.collector.otlp.receive.refusals import summary as refusal_summary

    counts, written = summary.counts, summary.written
    typer.echo(
        f"evaltrace collect: received {plural(counts.spans, 'span')} and {plural(counts.log_records, 'log record')} "
        f"in {plural(counts.requests, 'request')}; wrote them to {printable(str(directory))}",
        err=err,
    )
    notes = []
    if counts.rejected_items:
        notes.append(f"{plural(counts.rejected_items, 'invalid item')} rejected (partial success)")
    if counts.dropped_items:
        dropped = plural(counts.dropped_items, "event, link or attribute", "events, links or attributes")
        notes.append(f"{dropped} over the SDK limits dropped (counted in the files)")
    if summary.refusals:
        refused = sum(summary.refusals.values())
        notes.append(f"{plural(refused, 'request')} refused: {refusal_summary(summary.refusals)}")
    if notes:
        typer.echo("  " + "; ".join(notes), err=err)
    if written.unwritten:
        typer.echo(f"Error: {plural(written.unwritten, 'received item')} could not be written", err=True)
