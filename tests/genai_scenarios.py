"""Scripted span trees (GenAI shapes) shared by the golden and CLI tests; see `genai_spans.py`."""

from __future__ import annotations

import json

from genai_spans import Recorder, agent_attrs, chat, messages, text, tool_attrs, tool_call, tool_response


def sequential(rec: Recorder) -> None:
    """An agent: a tool call, its result, the answer; case id on a harness wrapper span."""
    prompt = messages(("user", [text("Weather in Paris?")]))
    with rec.span("case paris", {"evaltrace.case_id": "paris", "evaltrace.repeat": 0}):
        with rec.span("invoke_agent weather", agent_attrs("weather", **{"gen_ai.conversation.id": "c1"})):
            chat(
                rec,
                "gpt-x",
                prompt,
                messages(("assistant", [tool_call("c-1", "get_weather", {"city": "Paris"})])),
                (100, 10),
                "tool_call",
                **{
                    "gen_ai.tool.definitions": json.dumps(
                        [
                            {
                                "type": "function",
                                "name": "get_weather",
                                "description": "Weather",
                                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                            }
                        ]
                    )
                },
            )
            with rec.span("execute_tool get_weather", tool_attrs("get_weather", "c-1", '{"city": "Paris"}', "18C")):
                rec.tick(3)
            history = messages(
                ("user", [text("Weather in Paris?")]),
                ("assistant", [tool_call("c-1", "get_weather", {"city": "Paris"})]),
                ("tool", [tool_response("c-1", "18C")]),
            )
            chat(rec, "gpt-x", history, messages(("assistant", [text("It is 18C in Paris.")])), (150, 12))


def parallel_nested(rec: Recorder) -> None:
    """Parallel calls whose spans end out of order; one is an agent used as a tool; odd payloads."""
    with rec.span("invoke_agent planner", agent_attrs("planner")):
        reply = messages(
            (
                "assistant",
                [
                    tool_call("p-1", "research", "Rome"),
                    tool_call("p-2", "get_weather", '{"city": "Ro'),
                    tool_call("p-3", "get_time", {"tz": "CET"}),
                ],
            )
        )
        chat(
            rec,
            "gpt-x",
            messages(("user", [text("Plan a Rome trip")])),
            reply,
            (200, 30),
            "tool_call",
            **{
                "gen_ai.tool.definitions": json.dumps(
                    [
                        {
                            "type": "function",
                            "name": "research",
                            "parameters": {"type": "object", "properties": {"topic": {"type": "string"}}},
                        }
                    ]
                )
            },
        )
        with rec.span("execute_tool research", tool_attrs("research", "p-1")):
            with rec.span("invoke_agent researcher", agent_attrs("researcher")):
                chat(
                    rec,
                    "gpt-y",
                    messages(("user", [text("Rome")])),
                    messages(("assistant", [text("Rome is warm.")])),
                    (50, 5),
                )
        with rec.span("execute_tool get_time", tool_attrs("get_time", "p-3", '{"tz": "CET"}', "[REDACTED]")):
            rec.tick(1)
        with rec.span(
            "execute_tool get_weather",
            tool_attrs("get_weather", "p-2", '{"city": "Ro'),
            error=TimeoutError("weather service timed out"),
        ):
            rec.tick(1)
        chat(rec, "gpt-x", None, messages(("assistant", [text("Rome: warm.")])), (300, 20))


def old_events_no_agent(rec: Recorder) -> None:
    """v1.36-style per-message events on chat spans under a plain root span, no agent span."""
    with rec.span("request"):
        with rec.span(
            "chat gpt-z",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-z",
                "gen_ai.usage.input_tokens": 7,
                "gen_ai.usage.output_tokens": 3,
            },
        ) as span:
            span.add_event("gen_ai.system.message", {"content": "Be brief."}, timestamp=rec.tick())
            span.add_event("gen_ai.user.message", {"content": "2+2?"}, timestamp=rec.tick())
            span.add_event(
                "gen_ai.choice",
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": json.dumps(
                        {
                            "role": "assistant",
                            "tool_calls": [
                                {
                                    "id": "e-1",
                                    "type": "function",
                                    "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'},
                                }
                            ],
                        }
                    ),
                },
                timestamp=rec.tick(),
            )
        with rec.span(
            "chat gpt-z",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-z",
                "gen_ai.usage.input_tokens": 9,
                "gen_ai.usage.output_tokens": 1,
            },
        ) as span:
            span.add_event("gen_ai.user.message", {"content": "2+2?"}, timestamp=rec.tick())
            span.add_event("gen_ai.tool.message", {"content": "4", "id": "e-1"}, timestamp=rec.tick())
            span.add_event(
                "gen_ai.choice",
                {"index": 0, "finish_reason": "stop", "message": json.dumps({"role": "assistant", "content": "4"})},
                timestamp=rec.tick(),
            )


def unfinished_parent(rec: Recorder) -> None:
    """The agent span never ends (abandoned stream): its children are kept under a placeholder."""
    with rec.span("invoke_agent lost", agent_attrs("lost"), end=False):
        chat(rec, "gpt-x", messages(("user", [text("hi")])), messages(("assistant", [text("hello")])), (5, 2))
