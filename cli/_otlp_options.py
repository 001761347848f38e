"""The OTLP sending options shared by `evaltrace replay` and `score --send-results`, declared once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from evaltrace.collector.send.exporters import OtlpTarget

SEND = "Sending over OTLP"

SendResults = Annotated[
    str | None,
    typer.Option(
        "--send-results",
        metavar="URL",
        help="Also send every score to this OTLP backend, as a gen_ai.evaluation.result event on the scored trace's "
        "root span (e.g. http://127.0.0.1:4318).",
        rich_help_panel=SEND,
    ),
]
Protocol = Annotated[
    str,
    typer.Option(
        "--protocol",
        metavar="PROTOCOL",
        help="OTLP transport: http/protobuf (the endpoint's /v1/traces and /v1/logs) or grpc.",
        rich_help_panel=SEND,
    ),
]
Headers = Annotated[
    list[str] | None,
    typer.Option(
        "--header",
        metavar="NAME=VALUE",
        help="A header sent with every request (repeatable). Put secrets in $OTEL_EXPORTER_OTLP_HEADERS (read first) "
        "instead: other users can see a command line (ps).",
        rich_help_panel=SEND,
    ),
]
Timeout = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        metavar="SECONDS",
        min=0.1,
        help="Seconds one batch may take, retries of transient failures included (default: 10).",
        rich_help_panel=SEND,
    ),
]


def otlp_target(
    endpoint: str, protocol: str, headers: list[str] | None, timeout: float | None, option: str
) -> OtlpTarget:
    """The backend these options name, checked before any work (`option` is named in errors).

    Raises:
        InputError: an unknown protocol (the valid ones are listed), a malformed header or endpoint.
    """
    from evaltrace.collector.errors import InputError
    from evaltrace.collector.send.exporters import PROTOCOLS, OtlpTarget, check_target, parse_headers

    if protocol not in PROTOCOLS:
        raise InputError(f"--protocol {protocol!r}: not a protocol (protocols: {', '.join(PROTOCOLS)})")
    given = {"timeout": timeout} if timeout is not None else {}
    target = OtlpTarget(
        endpoint=endpoint,
        protocol=protocol,  # checked against PROTOCOLS above
        headers=parse_headers(headers or []),
        option=option,
        **given,
    )
    check_target(target)
    return target


def results_target(url: str | None, protocol: str, headers: list[str] | None) -> OtlpTarget | None:
    """The `--send-results` backend, or `None`; `--protocol` and `--header` need it.

    Raises:
        InputError: `--header` or a `--protocol` other than the default without `--send-results`,
            or a bad protocol, header or URL.
    """
    from evaltrace.collector.errors import InputError

    if url is None:
        if headers or protocol != "http/protobuf":
            raise InputError("--protocol and --header say how to send results: pass --send-results URL")
        return None
    return otlp_target(url, protocol, headers, None, "--send-results")
