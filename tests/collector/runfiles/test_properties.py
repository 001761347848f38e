"""Converter invariants over random GenAI span trees (hypothesis, few examples so it stays fast).

Random trees of agent / chat / tool / plain spans with random attributes are made with the real
SDK, written by `ParquetSpanExporter` split over several files, and read back:

- every span survives the round trip with its attributes;
- rebuilding never crashes, and every span is counted by exactly one trace;
- the traces read from files equal the traces built from the in-memory spans, and shuffling the
  span order gives the same traces.
"""

from __future__ import annotations

import json
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genai_spans import Recorder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.trace import Status, StatusCode, set_span_in_context

from evaltrace.collector import resolve_paths
from evaltrace.collector.runfiles.reader import read_spans
from evaltrace.collector.runfiles.spans import span_from_readable
from evaltrace.collector.traces.rebuild import convert_spans, read_traces

ROLES = ("agent", "chat", "tool", "plain")
NAMES = ("get_weather", "lookup", "research")
IDS = ("c1", "c2", "c3", "unknown")
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@dataclass
class SpanSpec:
    parent: int | None
    role: str
    attributes: dict[str, Any]
    error: bool
    flush_after: bool


def _attributes(role: str, draw: Any) -> dict[str, Any]:
    if role == "agent":
        return {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": draw(st.sampled_from(NAMES)),
            **draw(st.dictionaries(st.just("evaltrace.case_id"), TEXT, max_size=1)),
        }
    if role == "tool":
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": draw(st.sampled_from(NAMES)),
            "gen_ai.tool.call.id": draw(st.sampled_from(IDS)),
        }
        args = draw(st.one_of(st.none(), st.just('{"city": "Pa'), TEXT.map(lambda t: json.dumps({"q": t}))))
        if args is not None:
            attrs["gen_ai.tool.call.arguments"] = args
        return attrs
    if role == "chat":
        parts = [
            {"type": "tool_call", "id": i, "name": n, "arguments": {"x": 1}}
            for i, n in draw(st.lists(st.tuples(st.sampled_from(IDS), st.sampled_from(NAMES)), max_size=3))
        ]
        parts += [{"type": "text", "content": t} for t in draw(st.lists(TEXT, max_size=1))]
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "m",
            "gen_ai.usage.input_tokens": draw(st.integers(0, 10_000)),
            "gen_ai.usage.output_tokens": draw(st.integers(0, 10_000)),
        }
        if draw(st.booleans()):
            attrs["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": parts}])
        return attrs
    return {"http.method": "GET", "misc.flag": draw(st.booleans()), "misc.ratio": draw(st.floats(allow_nan=True))}


@st.composite
def span_trees(draw: Any) -> list[SpanSpec]:
    count = draw(st.integers(1, 10))
    specs = []
    for index in range(count):
        parent = draw(st.one_of(st.none(), st.integers(0, index - 1))) if index else None
        role = draw(st.sampled_from(ROLES))
        specs.append(SpanSpec(parent, role, _attributes(role, draw), draw(st.booleans()), draw(st.booleans())))
    return specs


def _record(specs: list[SpanSpec], directory: Path) -> Recorder:
    rec = Recorder(directory)
    spans: list[Any] = []
    for spec in specs:
        context = set_span_in_context(spans[spec.parent]) if spec.parent is not None else None
        spans.append(
            rec.tracer.start_span(spec.role, context=context, attributes=spec.attributes, start_time=rec.tick())
        )
    for spec, span in reversed(list(zip(specs, spans, strict=True))):  # children end before their parents
        if spec.error:
            span.set_status(Status(StatusCode.ERROR, "failed"))
        span.end(end_time=rec.tick())
        if spec.flush_after:
            rec.provider.force_flush()  # a new file: traces end up split across files
    rec.close()
    return rec


def _dump(traces: list[Any]) -> list[dict[str, Any]]:
    return [t.model_dump(mode="json") for t in traces]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=span_trees(), seed=st.integers(0, 2**16))
def test_random_trees_survive_files_and_rebuild_the_same(specs: list[SpanSpec], seed: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        rec = _record(specs, Path(folder))
        memory = [span_from_readable(s, run_id="golden") for s in rec.finished()]
        read_back = list(read_spans(resolve_paths([folder])))
        assert {s.span_id for s in read_back} == {s.span_id for s in memory}
        by_id = {s.span_id: s for s in memory}
        for span in read_back:
            original = by_id[span.span_id]
            assert json.dumps(span.attributes, sort_keys=True) == json.dumps(original.attributes, sort_keys=True)
            assert (span.parent_span_id, span.status_code) == (original.parent_span_id, original.status_code)

        from_files = sorted(read_traces(resolve_paths([folder])), key=lambda t: (t.start_time, t.root_span_id or ""))
        from_memory = convert_spans(memory)
        assert sum(t.span_count for t in from_memory) == len(specs)
        assert not [w for t in from_memory for w in t.warnings if "failed (" in w]  # no extractor crashed
        assert _dump(from_files) == _dump(from_memory)

        shuffled = list(memory)
        random.Random(seed).shuffle(shuffled)
        assert _dump(convert_spans(shuffled)) == _dump(from_memory)
