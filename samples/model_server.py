"""A deterministic OpenAI-compatible model for the sample agent, so the demo runs offline.

It serves `POST /v1/chat/completions` (plain and streaming) on 127.0.0.1 and plays a travel
assistant by fixed rules instead of a neural network:

* a user turn asking about weather, local time or a currency conversion gets tool calls
  (several in parallel when several cities are named);
* once the tool results are in, it answers in one sentence built from those results;
* anything else gets a polite fallback answer with no tool call.

Token usage is a fixed function of the text sizes, so recorded runs are reproducible.

`SAMPLE_MODEL_FAULT` makes the model regress the way real model or prompt changes do, so the
demo (and the tests) can show evaltrace catching it: `wrong_tool` (weather questions call
`get_local_time`), `missing_argument` (tool calls lose their arguments), `forbidden_text`
(answers carry an error notice) or `verbose` (prompts cost twenty times the tokens).

Run it alone with `python samples/model_server.py --port 8765`, or start it in-process with
`serve_in_thread()`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CITY = r"([A-Z][a-zA-Z]+(?: [A-Z][a-zA-Z]+)*)"
_WEATHER = re.compile(rf"weather (?:in|for) {CITY}((?:(?:,| and) {CITY})*)")
_TIME = re.compile(rf"time (?:is it )?in {CITY}")
_CONVERT = re.compile(r"convert (\d+(?:\.\d+)?) ([A-Z]{3}) (?:to|into) ([A-Z]{3})", re.IGNORECASE)


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _cities(match: re.Match[str]) -> list[str]:
    rest = re.findall(CITY, match.group(2) or "")
    return [match.group(1), *rest]


FAULTS = ("wrong_tool", "missing_argument", "forbidden_text", "verbose")


def _fault() -> str | None:
    fault = os.environ.get("SAMPLE_MODEL_FAULT") or None
    if fault is not None and fault not in FAULTS:
        raise ValueError(f"SAMPLE_MODEL_FAULT={fault!r}: expected one of {', '.join(FAULTS)}")
    return fault


def plan_tool_calls(question: str) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls the rules choose for a user question (empty: answer directly)."""
    calls: list[tuple[str, dict[str, Any]]] = []
    weather_tool = "get_local_time" if _fault() == "wrong_tool" else "get_weather"
    if weather := _WEATHER.search(question):
        calls += [(weather_tool, {"city": city}) for city in _cities(weather)]
    if clock := _TIME.search(question):
        calls.append(("get_local_time", {"city": clock.group(1)}))
    if convert := _CONVERT.search(question):
        amount = float(convert.group(1))
        calls.append(
            (
                "convert_currency",
                {
                    "amount": int(amount) if amount.is_integer() else amount,
                    "from": convert.group(2).upper(),
                    "to": convert.group(3).upper(),
                },
            )
        )
    if _fault() == "missing_argument":
        calls = [(name, {}) for name, _ in calls]
    return calls


def _answer_from_results(results: list[dict[str, Any]]) -> str:
    sentences = []
    for result in results:
        if "error" in result:
            sentences.append(f"I could not get that information ({result['error']}).")
        elif "temp_c" in result:
            sentences.append(f"In {result['city']} it is {result['temp_c']}°C and {result['conditions']}.")
        elif "local_time" in result:
            sentences.append(f"The local time in {result['city']} is {result['local_time']}.")
        elif "converted" in result:
            sentences.append(f"{result['amount']} {result['from']} is {result['converted']} {result['to']}.")
    return " ".join(sentences) or "I have no answer."


def reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message for a conversation: tool calls, or a final answer."""
    turn_start = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    turn = messages[turn_start:]
    tool_results = [m for m in turn if m.get("role") == "tool"]
    if tool_results:
        parsed = []
        for message in tool_results:
            try:
                parsed.append(json.loads(message.get("content") or "{}"))
            except json.JSONDecodeError:
                parsed.append({"error": str(message.get("content"))})
        answer = _answer_from_results(parsed)
        if _fault() == "forbidden_text":
            answer += " (error: upstream cache miss)"
        return {"role": "assistant", "content": answer}
    question = str(turn[0].get("content") or "")
    calls = plan_tool_calls(question)
    if not calls:
        return {"role": "assistant", "content": "I can help with weather, local time and currency conversion."}
    base = _tokens(question)
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{base}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args, separators=(",", ":"))},
            }
            for i, (name, args) in enumerate(calls)
        ],
    }


def completion(body: dict[str, Any]) -> dict[str, Any]:
    """A full chat.completion object for a request body."""
    messages = body.get("messages") or []
    message = reply(messages)
    prompt_tokens = _tokens(json.dumps(messages)) + _tokens(json.dumps(body.get("tools") or []))
    if _fault() == "verbose":
        prompt_tokens *= 20
    completion_tokens = _tokens(json.dumps(message))
    return {
        "id": f"chatcmpl-{prompt_tokens}-{completion_tokens}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "sample-model"),
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _stream_chunks(full: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    choice = full["choices"][0]
    message = choice["message"]
    delta: dict[str, Any] = {"role": "assistant"}
    if message.get("content") is not None:
        delta["content"] = message["content"]
    if message.get("tool_calls"):
        delta["tool_calls"] = [dict(call, index=i) for i, call in enumerate(message["tool_calls"])]
    base = {key: full[key] for key in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    chunks = [
        base | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        base | {"choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
    ]
    if include_usage:
        chunks.append(base | {"choices": [], "usage": full["usage"]})
    return chunks


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # http.server names handlers do_<METHOD>
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"unknown path {self.path}"}})
            return
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        full = completion(body)
        if not body.get("stream"):
            self._send(200, full)
            return
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for chunk in _stream_chunks(full, include_usage):
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # silence per-request logging
        return


def serve_in_thread(port: int = 0) -> tuple[ThreadingHTTPServer, str]:
    """Start the server on 127.0.0.1 in a daemon thread; returns it and its `/v1` base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="sample-model").start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    port = parser.parse_args().port
    httpd = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
    print(f"sample model on http://127.0.0.1:{httpd.server_address[1]}/v1", flush=True)
    httpd.serve_forever()
