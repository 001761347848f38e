"""The sample agent: a travel assistant built on the openai client with three tools.

It is an ordinary tool-calling loop. Model calls are traced by the real OpenTelemetry
instrumentation for the openai client (`opentelemetry-instrumentation-openai-v2`, in its
latest-experimental mode with message content on spans); the agent adds the OTel GenAI
`invoke_agent` span around the run and an `execute_tool` span per tool call, as the GenAI
semantic conventions describe. evaltrace records all of it with `evaltrace.collector.record()`.

`run(question)` is the agent function (`evaltrace run --agent samples.agent:run`); it talks to
`OPENAI_BASE_URL`, or to the offline model in `samples/model_server.py` when that is unset.
`run_broken` is the same agent after a bad change (it lower-cases the question before sending
it, and the model then stops calling tools): scoring it must fail the gate.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

AGENT_NAME = "travel-assistant"
MODEL = "sample-model"
SYSTEM_PROMPT = "You are a travel assistant. Use the tools for weather, local time and currency questions."

_WEATHER = {"Paris": (18, "sunny"), "Tokyo": (24, "cloudy"), "London": (12, "rainy"), "New York": (21, "windy")}
_LOCAL_TIME = {"Paris": "14:05", "Tokyo": "21:05", "London": "13:05", "New York": "08:05"}
_RATES = {("USD", "EUR"): 0.92, ("EUR", "USD"): 1.09, ("USD", "JPY"): 151.0, ("GBP", "EUR"): 1.17}


def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city."""
    if city not in _WEATHER:
        raise ValueError(f"unknown city: {city}")
    temp, conditions = _WEATHER[city]
    return {"city": city, "temp_c": temp, "conditions": conditions}


def get_local_time(city: str) -> dict[str, Any]:
    """Local time in a city."""
    if city not in _LOCAL_TIME:
        raise ValueError(f"unknown city: {city}")
    return {"city": city, "local_time": _LOCAL_TIME[city]}


def convert_currency(amount: float, **currencies: str) -> dict[str, Any]:
    """Convert an amount between two currencies (`from` and `to` are Python keywords, hence **)."""
    source, target = currencies["from"], currencies["to"]
    if (source, target) not in _RATES:
        raise ValueError(f"no rate for {source}->{target}")
    return {"amount": amount, "from": source, "to": target, "converted": round(amount * _RATES[source, target], 2)}


TOOLS: dict[str, Callable[..., dict[str, Any]]] = {
    "get_weather": get_weather,
    "get_local_time": get_local_time,
    "convert_currency": convert_currency,
}


def _city_schema(description: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": description.split(":")[0],
            "description": description.split(": ", 1)[1],
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name, e.g. Paris"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }


TOOL_SCHEMAS: list[dict[str, Any]] = [
    _city_schema("get_weather: Current temperature (Celsius) and conditions in a city."),
    _city_schema("get_local_time: Current local time in a city."),
    {
        "type": "function",
        "function": {
            "name": "convert_currency",
            "description": "Convert an amount of money from one currency to another.",
            "parameters": {
                "type": "object",
                "properties": {
                    "amount": {"type": "number"},
                    "from": {"type": "string", "description": "ISO 4217 code"},
                    "to": {"type": "string", "description": "ISO 4217 code"},
                },
                "required": ["amount", "from", "to"],
                "additionalProperties": False,
            },
        },
    },
]

_setup_lock = threading.Lock()
_client: Any = None


def _openai_client() -> Any:
    """One instrumented client per process, pointed at OPENAI_BASE_URL or the offline model."""
    global _client
    with _setup_lock:
        if _client is None:
            # Content on spans in the current GenAI shape; set before instrumenting, which reads them.
            os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
            os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
            from openai import OpenAI
            from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

            instrumentor = OpenAIInstrumentor()
            if not instrumentor.is_instrumented_by_opentelemetry:  # `evaltrace run` may have done it already
                instrumentor.instrument()
            base_url = os.environ.get("OPENAI_BASE_URL")
            if not base_url:
                from samples.model_server import serve_in_thread

                _, base_url = serve_in_thread()
            _client = OpenAI(base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY", "sample-key"), max_retries=0)
        return _client


def _call_tool(tracer: trace.Tracer, call: Any) -> str:
    name, raw_args = call.function.name, call.function.arguments
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.call.arguments": raw_args,
    }
    with tracer.start_as_current_span(f"execute_tool {name}", attributes=attributes) as span:
        try:
            result = TOOLS[name](**json.loads(raw_args))
        except Exception as exc:  # a failing tool is reported to the model, as agents do
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, str(exc)))
            span.set_attribute("error.type", type(exc).__qualname__)
            return json.dumps({"error": str(exc)})
        text = json.dumps(result)
        span.set_attribute("gen_ai.tool.call.result", text)
        return text


def _text_message(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def run(question: str, *, max_iterations: int = 5, _rewrite: Callable[[str], str] | None = None) -> str:
    """Answer one question, calling tools as the model asks; returns the final answer."""
    client = _openai_client()
    tracer = trace.get_tracer("evaltrace.samples.agent")
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": AGENT_NAME,
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": MODEL,
        "gen_ai.input.messages": _text_message("user", question),
        "gen_ai.tool.definitions": json.dumps([t["function"] | {"type": "function"} for t in TOOL_SCHEMAS]),
    }
    with tracer.start_as_current_span(f"invoke_agent {AGENT_NAME}", attributes=attributes) as span:
        sent = _rewrite(question) if _rewrite else question
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": sent},
        ]
        for _ in range(max_iterations):
            response = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOL_SCHEMAS)
            message = response.choices[0].message
            if not message.tool_calls:
                answer = message.content or ""
                span.set_attribute("gen_ai.output.messages", _text_message("assistant", answer))
                return answer
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": _call_tool(tracer, call)})
        span.set_status(Status(StatusCode.ERROR, "max iterations reached"))
        span.set_attribute("error.type", "MaxIterationsExceeded")
        raise RuntimeError(f"no answer after {max_iterations} model calls")


def run_broken(question: str) -> str:
    """The agent after a regression: the question is lower-cased, so city names are lost."""
    return run(question, _rewrite=str.lower)
