"""The receiver's settings: listen addresses, the run folder, limits and the optional bearer token."""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from evaltrace.collector.errors import InputError
from evaltrace.collector.network import is_loopback

TOKEN_ENV = "EVALTRACE_COLLECT_TOKEN"
"""The environment variable holding the bearer token (a command line is visible to other users)."""


class Address(NamedTuple):
    """A host and port to listen on (port 0: any free port, reported once bound)."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def is_loopback(self) -> bool:
        """Whether only this machine can connect."""
        return is_loopback(self.host)


def parse_address(text: str, option: str) -> Address | None:
    """`HOST:PORT` (`[v6]:PORT` for IPv6) as an `Address`; `off` for no listener.

    Raises:
        InputError: not HOST:PORT with a port from 0 to 65535, naming the option.
    """
    text = text.strip()
    if text.lower() == "off":
        return None
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise InputError(f"{option} {text!r}: expected HOST:PORT (e.g. 127.0.0.1:4318, [::1]:4318) or 'off'")
    return Address(host, int(port))


class ReceiverConfig(BaseModel):
    """What `evaltrace collect` listens on, where it writes and how much it holds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    http: Address | None = Address("127.0.0.1", 4318)
    """OTLP/HTTP listener (POST /v1/traces, /v1/logs), or None."""
    grpc: Address | None = Address("127.0.0.1", 4317)
    """OTLP/gRPC listener, or None."""
    directory: Path = Path("runs")
    """Folder the run files are written to."""
    run_id: str | None = None
    """Run label of every row (default: a new one per receiver, as per exporting process)."""
    token: SecretStr | None = None
    """Bearer token every request must carry (`Authorization: Bearer ...`), if set; never blank."""
    allow_unauthenticated: bool = False
    """Listen beyond loopback without a token (`--allow-unauthenticated`); refused otherwise."""
    max_body_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    """Largest request accepted, after decompression (HTTP 413, gRPC RESOURCE_EXHAUSTED beyond)."""
    queue_items: int = Field(default=20_000, gt=0)
    """Spans (with their events and links) and log records decoded but not yet written; beyond, requests are refused."""
    max_concurrent_requests: int = Field(default=16, gt=0)
    """Requests read and decoded at once (each holds at most `max_body_bytes`); more are refused."""
    queue_wait_seconds: float = Field(default=2.0, ge=0)
    """How long a request waits for room in a full queue before it is refused."""
    max_connections: int = Field(default=128, gt=0)
    """OTLP/HTTP connections open at once (a thread each); a connection beyond is answered 503 and closed."""
    header_seconds: float = Field(default=10.0, gt=0)
    """From a request line's arrival to the end of its headers; a client slower than that is cut off."""
    body_seconds: float = Field(default=60.0, gt=0)
    """From the end of the headers to the end of the body (16 MB in 60 s is 2.2 Mbit/s); beyond, 408."""
    retry_after_seconds: int = Field(default=1, gt=0)
    """What a refused client is told to wait (HTTP Retry-After)."""
    drain_seconds: float = Field(default=30.0, gt=0)
    """On shutdown, how long requests in progress may take to finish."""

    @model_validator(mode="after")
    def _one_listener(self) -> ReceiverConfig:
        if self.http is None and self.grpc is None:
            raise ValueError("--http and --grpc are both off: nothing to listen on")
        if self.token is not None:
            check_token(self.token.get_secret_value())
        exposed = [f"{o} {a}" for o, a in (("--http", self.http), ("--grpc", self.grpc)) if a and not a.is_loopback]
        if exposed and self.token is None and not self.allow_unauthenticated:
            raise ValueError(
                f"{', '.join(exposed)} listens beyond this machine without ${TOKEN_ENV}: "
                "set a token, or pass --allow-unauthenticated to accept anyone who can connect"
            )
        return self


def check_token(token: str) -> None:
    """Refuse a token that would turn authentication off or never match.

    A blank token (empty or whitespace) must not mean "no token"; spaces around a token or control
    characters cannot survive an HTTP header or gRPC metadata, so every request would be refused.

    Raises:
        ValueError: naming the variable, never the token.
    """
    if not token.strip():
        raise ValueError(f"${TOKEN_ENV} is set but blank: set a token, or unset it to require none")
    if token != token.strip() or not token.isascii() or not token.isprintable():
        raise ValueError(f"${TOKEN_ENV} must be printable ASCII without spaces around it")


def bearer_matches(token: SecretStr, authorization: bytes) -> bool:
    """Whether an `Authorization` value is `Bearer <token>` (the token compared in constant time).

    The scheme's name is case-insensitive (RFC 9110, 11.1): clients that send `bearer` are not refused.
    """
    scheme, _, given = authorization.partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(given, token.get_secret_value().encode())
