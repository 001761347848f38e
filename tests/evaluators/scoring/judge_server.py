"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 for judge tests.

Each request takes the next scripted `Reply` (or, when the script is empty, the `responder`'s
reply for that request body); every request is recorded with its body, headers and arrival time
so tests can assert what the judge client sent and when.

    with JudgeServer() as server:
        server.script(Reply(status=429, headers={"Retry-After": "1"}), verdict(True, "fine"))
        ... JudgeSettings(model="m", base_url=server.base_url) ...
        assert len(server.requests) == 2

Replies can delay (`delay` seconds, in the server thread: requests are served concurrently),
answer any status with any headers, or send a raw body (`raw`) instead of a chat completion.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer."""

    content: str | None = None
    """The assistant message content of a 200 chat completion."""
    status: int = 200
    raw: bytes | None = None
    """A raw body sent instead of a chat completion (garbage, error bodies)."""
    delay: float = 0.0
    drip: float = 0.0
    """Seconds between single bytes of the body, sent after the headers (a server that answers slowly)."""
    headers: dict[str, str] = field(default_factory=dict)
    prompt_tokens: int = 40
    completion_tokens: int = 9


def verdict(passed: bool, reason: str = "scripted verdict", **kwargs: Any) -> Reply:
    """A 200 reply whose content is a well-formed verdict."""
    return Reply(content=json.dumps({"passed": passed, "reason": reason}), **kwargs)


@dataclass
class Recorded:
    """One request as the server saw it."""

    body: dict[str, Any]
    headers: dict[str, str]
    path: str
    arrived: float
    """`time.monotonic()` at arrival."""

    @property
    def system(self) -> str:
        return str(self.body["messages"][0]["content"])

    @property
    def user(self) -> str:
        return str(self.body["messages"][1]["content"])


class JudgeServer:
    """The scripted server; `base_url` ends in `/v1`."""

    def __init__(self, responder: Callable[[dict[str, Any]], Reply] | None = None, host: str = "127.0.0.1") -> None:
        self.host = host
        """The loopback address to listen on: 127.0.0.2 and others stand for "another host" in key tests."""
        self.responder = responder
        """Answers requests once the script is empty; `None` answers 500 ("script exhausted")."""
        self.requests: list[Recorded] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def script(self, *replies: Reply) -> JudgeServer:
        """Queue replies for the next requests, in order."""
        with self._lock:
            self._script.extend(replies)
        return self

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        return f"http://{self.host}:{self._server.server_address[1]}/v1"

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._script:
                return self._script.popleft()
        if self.responder is not None:
            return self.responder(body)
        return Reply(status=500, raw=b'{"error": {"message": "judge script exhausted"}}')

    def _record(self, body: dict[str, Any], headers: dict[str, str], path: str) -> None:
        with self._lock:
            self.requests.append(Recorded(body=body, headers=headers, path=path, arrived=time.monotonic()))

    def start(self) -> JudgeServer:
        server = ThreadingHTTPServer((self.host, 0), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="judge-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> JudgeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _completion(reply: Reply, model: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-judge",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": reply.content}, "finish_reason": "stop"}
            ],
            "usage": {
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            },
        }
    ).encode()


def _handler_for(owner: JudgeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            # Recorded like a POST (a test can assert no GET was sent), answered 404.
            owner._record({}, {k.lower(): v for k, v in self.headers.items()}, self.path)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = {"_unparsed": raw.decode("utf-8", "replace")}
            owner._record(body, {k.lower(): v for k, v in self.headers.items()}, self.path)
            reply = owner._next(body)
            if reply.delay:
                time.sleep(reply.delay)
            payload = reply.raw if reply.raw is not None else _completion(reply, str(body.get("model")))
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if reply.drip:
                    for index in range(len(payload)):
                        self.wfile.write(payload[index : index + 1])
                        self.wfile.flush()
                        time.sleep(reply.drip)
                else:
                    self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test); nothing to answer

    return Handler


def closed_port_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (the port was bound, then released)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def judge_settings(base_url: str, cache_dir: Any, **overrides: Any) -> Any:
    """Test settings: fast backoff, short timeout, cache in `cache_dir`."""
    from evaltrace.evaluators.scoring.judge.settings import JudgeSettings

    values: dict[str, Any] = {
        "model": "judge-model",
        "base_url": base_url,
        "api_key": "sk-test-secret",
        "timeout": 5.0,
        "max_retries": 2,
        "backoff_base": 0.01,
        "backoff_max": 0.05,
        "cache_dir": cache_dir,
    }
    values.update(overrides)
    return JudgeSettings.model_validate(values)
