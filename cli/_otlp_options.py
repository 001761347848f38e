"""The OTLP sending options shared by `evaltrace replay` and `score --send-results`, declared once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from evaltrace.collector.otlp.send.exporters import OtlpTarget
    from evaltrace.collector.otlp.send.targets import ResultsTarget

SEND = "Sending over OTLP"

SendResults = Annotated[
    str | None,
    typer.Option(
        "--send-results",
        metavar="[KIND:]URL",
        help="Also send every score to this backend. KIND otlp (the default): a gen_ai.evaluation.result event on the "
        "scored trace's root span, as an OTLP log record (e.g. http://127.0.0.1:4318); phoenix: an annotation of the "
        "root span through Phoenix's REST API ($PHOENIX_API_KEY when set; e.g. phoenix:http://127.0.0.1:6006); "
        "langfuse: a score on the trace through Langfuse's public API ($LANGFUSE_PUBLIC_KEY, $LANGFUSE_SECRET_KEY; "
        "e.g. langfuse:https://cloud.langfuse.com).",
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
    from evaltrace.collector.otlp.send.exporters import PROTOCOLS, OtlpTarget, check_target, parse_headers

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


def results_target(value: str | None, protocol: str, headers: list[str] | None) -> ResultsTarget | None:
    """The `--send-results [KIND:]URL` backend, or `None`; `--protocol` and `--header` need kind otlp.

    Raises:
        InputError: `--header` or a `--protocol` other than the default without an otlp `--send-results`,
            an unknown kind (the kinds are listed), a bad protocol, header or URL, or a key the kind
            needs that is missing or would go over plain http to another host.
    """
    from evaltrace.collector.errors import InputError

    otlp_only = bool(headers) or protocol != "http/protobuf"
    if value is None:
        if otlp_only:
            raise InputError("--protocol and --header say how to send results: pass --send-results URL")
        return None
    # Imported only now: the senders pull in the OTLP exporters and HTTP clients (~0.1-0.4 s a scoring).
    from evaltrace.collector.otlp.send.targets import OPTION, ResultsTarget, open_results, split_kind

    kind, url = split_kind(value)
    if kind != "otlp":
        if otlp_only:
            raise InputError(f"--protocol and --header apply to OTLP results, not to --send-results {kind}:URL")
        target = ResultsTarget(kind=kind, url=url)
        open_results(target).close()  # the URL, the key and its transport are checked before any work
        return target
    return ResultsTarget(kind=kind, url=url, otlp=otlp_target(url, protocol, headers, None, OPTION))
