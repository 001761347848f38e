"""GenAI message parsing shortcuts: reused history prefixes and replies, shared system instructions.

Each shortcut must give exactly what a fresh parse gives (equal records, identical JSON) and must
never hide a warning; the identity checks prove the shortcut was actually taken.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from genai_spans import Recorder, agent_attrs, chat, messages, text, tool_call, tool_response
from pydantic import ValidationError

from evaltrace.collector.runfiles.spans import span_from_readable
from evaltrace.collector.traces import _genai_messages as gm
from evaltrace.collector.traces._lenient_json import json_list, parse_json
from evaltrace.collector.traces.rebuild import convert_spans
from evaltrace.collector.traces.records import Message

SYSTEM = ("system", [text("Be brief.")])
USER = ("user", [text("weather in Paris?")])
REPLY = ("assistant", [tool_call("c1", "get_weather", {"city": "Paris"})])
RESULT = ("tool", [tool_response("c1", {"sky": "clear"})])


@pytest.fixture(autouse=True)
def _fresh_caches() -> None:
    gm._recent.clear()
    gm._SYSTEM.clear()


def _fresh(value: str) -> list[Message] | None:
    """What a parse without any remembered text gives."""
    saved = list(gm._recent)
    gm._recent.clear()
    try:
        return gm.parse_messages(value, "here", [])
    finally:
        gm._recent[:] = saved


def _dump(found: list[Message] | None) -> list[dict[str, Any]]:
    return [m.model_dump(mode="json") for m in found or []]


def test_history_extending_the_previous_reply_reuses_its_messages_and_equals_a_fresh_parse() -> None:
    warnings: list[str] = []
    first = gm.parse_messages(messages(SYSTEM, USER), "chat 1", warnings)
    reply = gm.parse_messages(messages(REPLY), "chat 1", warnings)
    second_text = messages(SYSTEM, USER, REPLY, RESULT)
    second = gm.parse_messages(second_text, "chat 2", warnings)
    assert first is not None and reply is not None and second is not None
    assert second == _fresh(second_text) and _dump(second) == _dump(_fresh(second_text))
    assert second[0] is first[0] and second[2] is reply[0]  # prefix and reply were reused
    assert second[3].parts[0].result == {"sky": "clear"}
    assert warnings == []


def test_history_ending_with_the_reply_reuses_it() -> None:
    gm.parse_messages(messages(USER), "chat 1", [])
    reply = gm.parse_messages(messages(REPLY), "chat 1", [])
    later_text = messages(USER, REPLY)
    later = gm.parse_messages(later_text, "agent", [])
    assert later == _fresh(later_text) and later is not None and reply is not None
    assert later[1] is reply[0]


def test_appended_item_that_only_starts_like_the_reply_is_parsed_afresh() -> None:
    gm.parse_messages(messages(USER), "chat 1", [])
    reply = gm.parse_messages(messages(("assistant", [text("hi")])), "chat 1", [])
    # The same text, then more keys in the same object: no item boundary after the reply's text.
    items = json.loads(messages(USER)) + [{"role": "assistant", "parts": [text("hi")], "name": "bot"}]
    later_text = json.dumps(items)
    later = gm.parse_messages(later_text, "chat 2", [])
    assert later == _fresh(later_text) and later is not None and reply is not None
    assert later[1].name == "bot" and later[1] is not reply[0]


def test_reply_with_warnings_is_not_reused_so_the_history_warns_again() -> None:
    gm.parse_messages(messages(USER), "chat 1", [])
    redacted = ("assistant", [text("[REDACTED]")])
    first_warnings: list[str] = []
    gm.parse_messages(messages(redacted), "chat 1", first_warnings)
    later_warnings: list[str] = []
    later_text = messages(USER, redacted, RESULT)
    later = gm.parse_messages(later_text, "chat 2", later_warnings)
    assert later == _fresh(later_text)
    assert len(first_warnings) == 1 and len(later_warnings) == 1 and "chat 2" in later_warnings[0]


def test_broken_text_after_a_reused_reply_falls_back_to_the_full_parse_warning() -> None:
    gm.parse_messages(messages(USER), "chat 1", [])
    gm.parse_messages(messages(REPLY), "chat 1", [])
    broken = messages(USER, REPLY)[:-1] + ", {"
    warnings: list[str] = []
    assert gm.parse_messages(broken, "chat 2", warnings) is None
    assert warnings == ["chat 2: messages are not a JSON array; ignored"]


def test_system_instructions_are_built_once_and_redacted_ones_warn_every_time() -> None:
    first = gm.system_message('[{"type": "text", "content": "Be brief."}]', "chat 1", [])
    again = gm.system_message('[{"type": "text", "content": "Be brief."}]', "chat 2", [])
    assert first is again and first is not None and first.text == "Be brief."
    for where in ("chat 1", "chat 2"):
        warnings: list[str] = []
        message = gm.system_message("[REDACTED]", where, warnings)
        assert message is not None and message.text is None
        assert len(warnings) == 1 and where in warnings[0]


def test_call_without_tool_span_takes_its_result_from_a_reused_history() -> None:
    rec = Recorder()
    with rec.span("invoke_agent a", agent_attrs("a")):
        chat(rec, "m", messages(USER), messages(REPLY), (10, 1), "tool_call")
        chat(rec, "m", messages(USER, REPLY, RESULT), messages(("assistant", [text("Clear skies.")])), (20, 2))
    (trace,) = convert_spans([span_from_readable(s) for s in rec.finished()])
    (call,) = trace.tool_calls
    assert (call.name, call.arguments, call.result, call.iteration, call.span_id) == (
        "get_weather",
        {"city": "Paris"},
        {"sky": "clear"},
        0,
        None,
    )
    assert trace.iterations[0].tool_calls == [call] and trace.output == "Clear skies."
    assert trace.iterations[1].input_messages is not None
    assert trace.iterations[1].input_messages[1] is trace.iterations[0].output_messages[0]  # type: ignore[index]


def test_invalid_part_raises_the_error_of_that_part() -> None:
    value = json.dumps([{"role": "user", "parts": [text("hi"), {"type": "tool_call", "id": "c", "name": 5}]}])
    with pytest.raises(ValidationError) as info:
        gm.parse_messages(value, "chat 1", [])
    assert info.value.title == "MessagePart"
    assert [error["loc"] for error in info.value.errors()] == [("name",)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(" [1, 2] ", [1, 2]), ("\u00a0[1]\u2003", [1]), ("[1, ", None), ("", None), ('{"a": 1}', None), ([3], [3])],
)
def test_json_list_fast_path_agrees_with_the_lenient_parse(value: object, expected: list[int] | None) -> None:
    assert json_list(value) == expected
    outcome = parse_json(value)
    assert (outcome.value if outcome.parsed and isinstance(outcome.value, list) else None) == expected
