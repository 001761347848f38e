"""A scripted OpenAI-compatible server on 127.0.0.1 for framework tests.

Every framework test (pydantic-ai, the openai client with openai-v2, the OpenAI Agents SDK,
LangGraph) points its OpenAI client at this server instead of the network. The test scripts the
model's turns; each request consumes the next turn, and every request body is recorded so the
test can assert what the framework sent.

Import it as `fake_llm` (pytest puts `tests/` on `sys.path` because `tests/conftest.py` sits in
a folder without `__init__.py`; a subprocess needs `tests/` on its `PYTHONPATH`)::

    from fake_llm import FakeLLM, call, text_turn, tool_turn

    with FakeLLM([
        tool_turn(call("get_weather", {"city": "Paris"}, call_id="call_1")),
        tool_turn(call("get_time", {"tz": "CET"}), call("get_weather", {"city": "Rome"})),  # parallel
        text_turn("It is 18C in Paris."),
    ]) as llm:
        client = openai.OpenAI(base_url=llm.base_url, api_key="test")
        ...
        assert llm.requests[1]["messages"][-1]["role"] == "tool"
        assert llm.total_usage() == (llm.turns[0].input_tokens + ..., ...)

Or through the `fake_llm` fixture in `tests/conftest.py` (a started, empty server; call
`fake_llm.script([...])` to give it turns).

Endpoints:

- `POST /v1/chat/completions`: non-streaming, and `stream: true` as SSE chunks (role, text
  in pieces, tool-call deltas by index with the arguments in two pieces, a finish chunk, then a
  usage chunk when `stream_options.include_usage` is set, then `[DONE]`).
- `POST /v1/responses`: the Responses API (the OpenAI Agents SDK default), non-streaming and
  streaming (`response.created`, output item / content part / text and function-call argument
  deltas, `response.completed` carrying the whole response with usage). Like the real API, the
  response echoes the request's `tools` and `instructions` (instrumentations read them from there).
- `POST /v1/messages`: Anthropic's Messages API, non-streaming (the `anthropic` SDK's
  `messages.create`): `text` and `tool_use` content blocks (arguments as the `input` object),
  `stop_reason` (`tool_use`, `end_turn`, or the turn's `stop_reason`), usage as `input_tokens` /
  `output_tokens`; an error turn answers with Anthropic's error envelope.
- `GET /v1/models`: a one-model list (some clients probe it).

Turns:

- `text_turn(text)`: an assistant reply with text only (finish reason `stop`).
- `tool_turn(call(...), call(...), text=None)`: tool calls (several = parallel calls); arguments
  are a dict (sent as JSON text) or raw text sent as is. Call ids default to `call_<turn>_<n>`.
- `error_turn(status, message)`: the server answers with that HTTP error (a failing model call).
- `stop_reason=` on a turn replaces its finish: the Messages API's `stop_reason` and the chat
  completion's `finish_reason` (`max_tokens`: a reply cut by the length limit).
- Every turn has `input_tokens` / `output_tokens`. When not given they default to distinct values
  per position (turn k: `100 * (k + 1) + 7` in, `10 * (k + 1) + 3` out), so token sums identify
  exactly which turns were consumed. `FakeLLM.total_usage()` sums the consumed turns.

A request arriving after the script is exhausted gets HTTP 500 with a message saying so, which
the framework raises and the test sees; it is also recorded in `FakeLLM.errors`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class ToolCallSpec:
    """One tool call the scripted model makes."""

    name: str
    arguments: str
    """JSON text as the model would send it."""
    call_id: str | None = None


@dataclass
class Turn:
    """One scripted model reply."""

    text: str | None = None
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    error_status: int | None = None
    error_message: str = "scripted error"
    stop_reason: str | None = None
    """The finish the reply reports instead of the default (`tool_calls`/`tool_use` or `stop`/`end_turn`)."""

    @property
    def finish_reason(self) -> str:
        if self.stop_reason is not None:
            return {"max_tokens": "length"}.get(self.stop_reason, self.stop_reason)
        return "tool_calls" if self.tool_calls else "stop"

    @property
    def anthropic_stop_reason(self) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if self.tool_calls else "end_turn"


def call(name: str, arguments: dict[str, Any] | str, *, call_id: str | None = None) -> ToolCallSpec:
    """A tool call; dict arguments are sent as JSON text."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCallSpec(name=name, arguments=args, call_id=call_id)


def text_turn(
    text: str, *, input_tokens: int | None = None, output_tokens: int | None = None, stop_reason: str | None = None
) -> Turn:
    """An assistant reply with text only (`stop_reason="max_tokens"`: cut by the length limit)."""
    return Turn(text=text, input_tokens=input_tokens, output_tokens=output_tokens, stop_reason=stop_reason)


def tool_turn(
    *calls: ToolCallSpec, text: str | None = None, input_tokens: int | None = None, output_tokens: int | None = None
) -> Turn:
    """An assistant reply requesting one or more (parallel) tool calls."""
    return Turn(text=text, tool_calls=list(calls), input_tokens=input_tokens, output_tokens=output_tokens)


def error_turn(status: int = 500, message: str = "scripted error") -> Turn:
    """The server answers this request with an HTTP error."""
    return Turn(error_status=status, error_message=message, input_tokens=0, output_tokens=0)


class FakeLLM:
    """The scripted server. Start with `start()` or a `with` block; `base_url` ends in `/v1`."""

    def __init__(self, turns: Sequence[Turn] = (), *, model: str = "fake-model") -> None:
        self.model = model
        self.turns: list[Turn] = []
        self.requests: list[dict[str, Any]] = []
        """Every request body, in arrival order."""
        self.paths: list[str] = []
        """The path of every request, in arrival order."""
        self.consumed = 0
        """How many turns have been served."""
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.script(turns)

    def script(self, turns: Sequence[Turn]) -> FakeLLM:
        """Append turns to the script, filling in default token counts and call ids."""
        for turn in turns:
            k = len(self.turns)
            if turn.input_tokens is None:
                turn.input_tokens = 100 * (k + 1) + 7
            if turn.output_tokens is None:
                turn.output_tokens = 10 * (k + 1) + 3
            for n, spec in enumerate(turn.tool_calls):
                spec.call_id = spec.call_id or f"call_{k}_{n}"
            self.turns.append(turn)
        return self

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>/v1`."""
        if self._server is None:
            raise RuntimeError("FakeLLM is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> FakeLLM:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.fake = self  # type: ignore[attr-defined]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="fake-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def total_usage(self) -> tuple[int, int]:
        """(input, output) tokens summed over the turns served so far (error turns count zero)."""
        served = self.turns[: self.consumed]
        return sum(t.input_tokens or 0 for t in served), sum(t.output_tokens or 0 for t in served)

    def next_turn(self, path: str, body: dict[str, Any]) -> tuple[int, Turn | None]:
        with self._lock:
            self.requests.append(body)
            self.paths.append(path)
            if self.consumed >= len(self.turns):
                self.errors.append(f"request {len(self.requests)} to {path} after the script ended")
                return len(self.requests), None
            turn = self.turns[self.consumed]
            self.consumed += 1
            return self.consumed - 1, turn


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: test output stays readable
        pass

    @property
    def fake(self) -> FakeLLM:
        return self.server.fake  # type: ignore[attr-defined,no-any-return]

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(200, {"object": "list", "data": [{"id": self.fake.model, "object": "model"}]})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.split("?")[0].rstrip("/")
        if not path.endswith(("/chat/completions", "/responses", "/messages")):
            self._send_json(404, {"error": {"message": f"no route {path}"}})
            return
        index, turn = self.fake.next_turn(path, body)
        if path.endswith("/messages"):
            self._answer_messages(index, turn, body)
            return
        if turn is None:
            self._send_json(500, {"error": {"message": "FakeLLM: script exhausted", "type": "server_error"}})
            return
        if turn.error_status is not None:
            self._send_json(turn.error_status, {"error": {"message": turn.error_message, "type": "server_error"}})
            return
        model = str(body.get("model") or self.fake.model)
        chat = path.endswith("/chat/completions")
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = (
                _chat_chunks(index, turn, model, include_usage) if chat else _response_events(index, turn, model, body)
            )
            self._send_sse(events, done_marker=chat)
        else:
            self._send_json(200, _chat_completion(index, turn, model) if chat else _response(index, turn, model, body))

    def _answer_messages(self, index: int, turn: Turn | None, body: dict[str, Any]) -> None:
        """Anthropic's Messages API: the reply, or its error envelope."""
        if turn is None or turn.error_status is not None:
            status, message = (
                (500, "FakeLLM: script exhausted") if turn is None else (turn.error_status, turn.error_message)
            )
            error = {"type": "error", "error": {"type": "api_error", "message": message}}
            self._send_json(status or 500, error)
            return
        self._send_json(200, _anthropic_message(index, turn, str(body.get("model") or self.fake.model)))

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_sse(self, events: Iterator[tuple[str | None, dict[str, Any]]], *, done_marker: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for event, payload in events:
            head = f"event: {event}\n" if event else ""
            self.wfile.write(f"{head}data: {json.dumps(payload)}\n\n".encode())
            self.wfile.flush()
        if done_marker:
            self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


# --- Chat Completions -------------------------------------------------------------------------


def _chat_usage(turn: Turn) -> dict[str, int]:
    i, o = turn.input_tokens or 0, turn.output_tokens or 0
    return {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o}


def _chat_completion(index: int, turn: Turn, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text}
    if turn.tool_calls:
        message["tool_calls"] = [
            {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in turn.tool_calls
        ]
    return {
        "id": f"chatcmpl-{index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": turn.finish_reason, "logprobs": None}],
        "usage": _chat_usage(turn),
    }


def _halves(text: str) -> list[str]:
    mid = len(text) // 2
    return [part for part in (text[:mid], text[mid:]) if part]


def _chat_chunks(index: int, turn: Turn, model: str, include_usage: bool) -> Iterator[tuple[None, dict[str, Any]]]:
    base = {"id": f"chatcmpl-{index}", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
        return None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    yield chunk({"role": "assistant", "content": ""})
    for piece in _halves(turn.text or ""):
        yield chunk({"content": piece})
    for n, c in enumerate(turn.tool_calls):
        head = {"index": n, "id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": ""}}
        yield chunk({"tool_calls": [head]})
        for piece in _halves(c.arguments):
            yield chunk({"tool_calls": [{"index": n, "function": {"arguments": piece}}]})
    yield chunk({}, turn.finish_reason)
    if include_usage:
        yield None, {**base, "choices": [], "usage": _chat_usage(turn)}


# --- Responses API ----------------------------------------------------------------------------


def _output_items(index: int, turn: Turn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if turn.text is not None:
        content = [{"type": "output_text", "text": turn.text, "annotations": [], "logprobs": []}]
        items.append(
            {"type": "message", "id": f"msg_{index}", "status": "completed", "role": "assistant", "content": content}
        )
    for n, c in enumerate(turn.tool_calls):
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{index}_{n}",
                "call_id": c.call_id,
                "name": c.name,
                "arguments": c.arguments,
                "status": "completed",
            }
        )
    return items


def _response(
    index: int, turn: Turn, model: str, request: dict[str, Any], *, status: str = "completed"
) -> dict[str, Any]:
    """A Responses API `response` object; like the real API, it echoes the request's `tools` and `instructions`."""
    i, o = turn.input_tokens or 0, turn.output_tokens or 0
    done = status == "completed"
    return {
        "id": f"resp_{index}",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": _output_items(index, turn) if done else [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": list(request.get("tools") or []),
        "error": None,
        "incomplete_details": None,
        "instructions": request.get("instructions"),
        "metadata": {},
        "temperature": 1.0,
        "top_p": 1.0,
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "usage": {
            "input_tokens": i,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": o,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": i + o,
        }
        if done
        else None,
    }


def _response_events(
    index: int, turn: Turn, model: str, request: dict[str, Any]
) -> Iterator[tuple[str, dict[str, Any]]]:
    seq = iter(range(1_000_000))

    def event(kind: str, **payload: Any) -> tuple[str, dict[str, Any]]:
        return kind, {"type": kind, "sequence_number": next(seq), **payload}

    pending = _response(index, turn, model, request, status="in_progress")
    yield event("response.created", response=pending)
    yield event("response.in_progress", response=pending)
    for pos, item in enumerate(_output_items(index, turn)):
        yield from _item_events(event, pos, item)
    yield event("response.completed", response=_response(index, turn, model, request))


def _item_events(event: Any, pos: int, item: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    item_id = item["id"]
    if item["type"] == "message":
        text = item["content"][0]["text"]
        yield event(
            "response.output_item.added", output_index=pos, item={**item, "status": "in_progress", "content": []}
        )
        empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        yield event("response.content_part.added", output_index=pos, item_id=item_id, content_index=0, part=empty)
        for piece in _halves(text):
            yield event(
                "response.output_text.delta",
                output_index=pos,
                item_id=item_id,
                content_index=0,
                delta=piece,
                logprobs=[],
            )
        yield event(
            "response.output_text.done", output_index=pos, item_id=item_id, content_index=0, text=text, logprobs=[]
        )
        yield event(
            "response.content_part.done", output_index=pos, item_id=item_id, content_index=0, part=item["content"][0]
        )
    else:
        yield event(
            "response.output_item.added", output_index=pos, item={**item, "arguments": "", "status": "in_progress"}
        )
        for piece in _halves(item["arguments"]):
            yield event("response.function_call_arguments.delta", output_index=pos, item_id=item_id, delta=piece)
        yield event(
            "response.function_call_arguments.done",
            output_index=pos,
            item_id=item_id,
            arguments=item["arguments"],
            name=item["name"],
        )
    yield event("response.output_item.done", output_index=pos, item=item)


# --- Anthropic Messages API -------------------------------------------------------------------


def _anthropic_message(index: int, turn: Turn, model: str) -> dict[str, Any]:
    """A Messages API `message`: text then `tool_use` blocks, the stop reason and the usage."""
    content: list[dict[str, Any]] = []
    if turn.text is not None:
        content.append({"type": "text", "text": turn.text})
    for c in turn.tool_calls:
        content.append({"type": "tool_use", "id": c.call_id, "name": c.name, "input": json.loads(c.arguments)})
    return {
        "id": f"msg_{index}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": turn.anthropic_stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": turn.input_tokens or 0,
            "output_tokens": turn.output_tokens or 0,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
