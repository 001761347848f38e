"""`evaltrace replay`: send stored spans and log records to an OTLP backend, with their original ids."""

from __future__ import annotations

from typing import Annotated

import typer

from evaltrace.cli import _options as opt
from evaltrace.cli import _otlp_options as otlp
from evaltrace.collector.terminal import plural, printable


def replay(
    paths: Annotated[list[str], typer.Argument(help=opt.PATHS_HELP, metavar="PATH")],
    endpoint: Annotated[
        str | None,
        typer.Option(
            "--endpoint",
            metavar="URL",
            help="The OTLP backend, e.g. http://127.0.0.1:6006 (Phoenix) or "
            "https://cloud.langfuse.com/api/public/otel (Langfuse); required unless --dry-run.",
        ),
    ] = None,
    protocol: otlp.Protocol = "http/protobuf",
    header: otlp.Headers = None,
    timeout: otlp.Timeout = None,
    no_logs: Annotated[
        bool,
        typer.Option(
            "--no-logs",
            metavar="",
            help="Send spans only, not the recorded log records (*.logs.parquet): for backends without an OTLP "
            "logs endpoint, such as Phoenix.",
        ),
    ] = False,
    batch_size: Annotated[
        int, typer.Option("--batch-size", metavar="N", min=1, help="Spans or log records per export request.")
    ] = 512,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", metavar="", help="Count the traces, spans and log records; send nothing.")
    ] = False,
) -> None:
    """Send stored spans and log records to an OTLP backend with their original trace and span ids."""
    from evaltrace.collector.errors import InputError
    from evaltrace.collector.otlp.files.inputs import resolve_paths
    from evaltrace.collector.otlp.send.exporters import shown_endpoint
    from evaltrace.collector.otlp.send.replay import replay as run_replay

    if endpoint is None and not dry_run:
        raise InputError("--endpoint URL is required (or --dry-run to count what would be sent)")
    target = (
        None if dry_run or endpoint is None else otlp.otlp_target(endpoint, protocol, header, timeout, "--endpoint")
    )
    counts = run_replay(resolve_paths(paths), target, batch_size, logs=not no_logs)
    what = (
        f"{plural(counts.traces, 'trace')}, {plural(counts.spans, 'span')}, {plural(counts.log_records, 'log record')}"
    )
    if counts.duplicate_log_records:
        typer.echo(
            f"{plural(counts.duplicate_log_records, 'log record')} found twice in the files, sent once", err=True
        )
    if target is None:
        typer.echo(f"would send {what} (dry run: nothing sent)")
    else:
        typer.echo(printable(f"sent {what} to {shown_endpoint(target.endpoint)} over {target.protocol}"))
