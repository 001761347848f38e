"""`evaltrace collect -- CMD`: the command run under the receiver, its OTLP settings, signals and exit code.

The command is told where to export through the variables every OTel SDK reads: the endpoint and
protocol of the receiver's listener (HTTP unless only gRPC is served, or the command's environment
asks for gRPC) and, when the receiver requires a token, an `authorization` header; headers set for
another backend are dropped, so its keys do not reach the receiver. An endpoint already set (general
or per signal) is left alone: the user said where to export. The token goes only into the command's
environment, never into anything printed.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import NamedTuple
from urllib.parse import quote

from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.receive.config import Address
from evaltrace.collector.terminal import inline

ENDPOINT_VARIABLES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
)
_PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"
_HEADERS = "OTEL_EXPORTER_OTLP_HEADERS"
_HEADER_VARIABLES = (_HEADERS, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_LOGS_HEADERS")
_HTTP_PROTOCOLS = ("http/protobuf", "http/json")
_ANY_HOST = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}
"""A listener on every address is reached by the command through loopback."""


class ChildSettings(NamedTuple):
    """The command's environment, and what to tell the user about it (no secret in `shown`)."""

    env: dict[str, str]
    shown: str


def child_settings(
    environ: Mapping[str, str], http: Address | None, grpc: Address | None, token: str | None
) -> ChildSettings:
    """`environ` with the OTLP endpoint, protocol and token header pointing at the receiver.

    Raises:
        InputError: $OTEL_EXPORTER_OTLP_PROTOCOL asks for a protocol no listener serves.
    """
    env = dict(environ)
    already = [name for name in ENDPOINT_VARIABLES if env.get(name, "").strip()]
    if already:
        return ChildSettings(env, f"{already[0]} is already set: the command exports where it says")
    wanted = env.get(_PROTOCOL, "").strip().lower()
    use_grpc = grpc is not None and (http is None or wanted == "grpc")
    if (wanted == "grpc" and grpc is None) or (wanted in _HTTP_PROTOCOLS and http is None):
        raise InputError(f"${_PROTOCOL} is {wanted}, but that listener is off (--http / --grpc)")
    address = grpc if use_grpc else http
    assert address is not None  # the receiver's config requires a listener
    host = _ANY_HOST.get(address.host, address.host)
    endpoint = f"http://{Address(host, address.port)}"
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    env[_PROTOCOL] = wanted if wanted in ("grpc", *_HTTP_PROTOCOLS) else ("grpc" if use_grpc else "http/protobuf")
    # Headers set for the exporter's own backend hold that backend's keys (a Langfuse or Phoenix API
    # key): now that the command exports here, they would be sent to this receiver instead.
    for name in _HEADER_VARIABLES:
        env.pop(name, None)
    if token is not None:
        env[_HEADERS] = "authorization=" + quote(f"Bearer {token}", safe="")
    return ChildSettings(env, f"OTEL_EXPORTER_OTLP_ENDPOINT={endpoint} OTEL_EXPORTER_OTLP_PROTOCOL={env[_PROTOCOL]}")


def start(command: Sequence[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """The command, started with `env` (stdin, stdout and stderr are this process's).

    Raises:
        InputError: it cannot be run (not found, not executable), naming it.
    """
    try:
        return subprocess.Popen(list(command), env=env)
    except OSError as exc:
        raise InputError(f"cannot run {inline(command[0])}: {exc.strerror or exc}") from None


def wait(child: subprocess.Popen[bytes]) -> int:
    """Wait for the command, passing SIGTERM and SIGINT on to it; its exit code (128+N if signal N ended it)."""

    def forward(signum: int, _frame: FrameType | None) -> None:
        if not (signum == signal.SIGINT and _terminal_sent_it()):
            child.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        code = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 128 - code if code < 0 else code


def _terminal_sent_it() -> bool:
    """Whether a SIGINT came from the terminal's Ctrl-C, which reaches the command too (its process group).

    Forwarding it again would interrupt the command a second time, possibly in its own shutdown,
    before its exporter has flushed.
    """
    try:
        tty = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:  # no controlling terminal: the signal was sent to this process alone
        return False
    try:
        return os.tcgetpgrp(tty) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(tty)
