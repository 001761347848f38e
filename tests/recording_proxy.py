"""A proxy on 127.0.0.1 that refuses every request and records what it was asked: request line and headers.

Tests name it in every proxy variable to show what a client would hand a proxy the environment
names (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `grpc_proxy`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from _serving import serving

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "grpc_proxy")
NO_PROXY_VARIABLES = ("NO_PROXY", "no_proxy")


@dataclass
class RecordingProxy:
    """The proxy's URL and what it received: one (request line, lower-cased headers) per request."""

    url: str
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def environment(self) -> dict[str, str]:
        """Every proxy variable naming this proxy, and no exception for loopback."""
        return {**{name: self.url for name in PROXY_VARIABLES}, **{name: "" for name in NO_PROXY_VARIABLES}}

    def saw(self, secret: str) -> bool:
        """Whether `secret` appeared in any request line or header the proxy received."""
        return any(
            secret in line or any(secret in value for value in headers.values()) for line, headers in self.requests
        )


def _handler(proxy: RecordingProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _refuse(self) -> None:
            proxy.requests.append((self.requestline, {k.lower(): v for k, v in self.headers.items()}))
            self.send_response(502)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_PUT = do_CONNECT = _refuse

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def recording_proxy() -> Iterator[RecordingProxy]:
    """A running `RecordingProxy`, stopped on exit."""
    proxy = RecordingProxy(url="")
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _handler(proxy))) as port:
        proxy.url = f"http://127.0.0.1:{port}"
        yield proxy
