"""The OTLP sending options shared by `evaltrace replay` and `score --send-results`, declared once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from evaltrace.collector.send.exporters import OtlpTarget

SEND = "Sending over OTLP"

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
        help="A header sent with every request (repeatable), after those of OTEL_EXPORTER_OTLP_HEADERS. Prefer the "
        "variable for secrets: a command line is visible to other users (ps).",
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
