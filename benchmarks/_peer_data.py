"""The peer benchmark's workload: seeded agent traces written once through the real OTel SDK to both tools.

Every trace is one run of `_scoring_data.build_trace` (an `invoke_agent` root, 3 to 10 `chat`
iterations, one `execute_tool` span per call, ~4% failed calls retried once) with its own
case: case `case-NNNNN` carries the trace's own tool-call list, names and arguments, as a
strict trajectory. The case id is on the root span twice, once per tool's attribute
(`evaltrace.case_id`, `agentevals.eval.case.id`), so both tools match cases by id.

About 10% of cases are planted failures: their expected list swaps the first two adjacent
calls whose names differ, so the trace made the right calls in the wrong order. Both tools
must fail exactly these cases.

The spans are made by one `TracerProvider` with two `BatchSpanProcessor`s: the official
`opentelemetry-exporter-otlp-json-file` `FileSpanExporter` (what agentevals reads) and
evaltrace's `ParquetSpanExporter`. So both tools read the very same spans, with the SDK's own
span objects, ids from a seeded generator, and the SDK's timing of the batches.

Written for one (traces, seed): `otlp/spans.jsonl`, `runs/*.parquet`, `evalset.json` (ADK
EvalSet), `spec.json` (evaltrace spec), `expected.json` (case id -> expected names, for the
DuckDB floor and the agreement check) and `dataset.json` (counts, planted case ids).
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace.id_generator import IdGenerator

HERE = Path(__file__).resolve().parent
PLANTED_SHARE = 0.10
AGENTEVALS_CASE_ID = "agentevals.eval.case.id"  # agentevals.genai.matching.EVAL_CASE_ID
EVALTRACE_CASE_ID = "evaltrace.case_id"


@dataclass(frozen=True)
class Expected:
    """One case's expectation: the calls (name, arguments) in order, and whether it is planted to fail."""

    case_id: str
    question: str
    calls: list[tuple[str, dict[str, Any]]]
    planted: bool


def _planted_order(calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """`calls` with the first adjacent pair of different names swapped (a wrong order)."""
    swapped = list(calls)
    for i in range(len(swapped) - 1):
        if swapped[i][0] != swapped[i + 1][0]:
            swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
            return swapped
    raise ValueError("no two adjacent calls with different names to swap")


class _SeededIds(IdGenerator):
    """Span and trace ids from a seeded generator, so a dataset is the same on every machine."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(f"ids-{seed}")

    def generate_span_id(self) -> int:
        return self._rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._rng.getrandbits(128) or 1


def generate(folder: Path, traces: int, seed: int) -> dict[str, Any]:
    """Write the dataset for (`traces`, `seed`) into `folder`; returns its `dataset.json` content."""
    from opentelemetry import trace as trace_api
    from opentelemetry.exporter.otlp.json.file.trace_exporter import FileSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import SpanKind, Status, StatusCode

    from evaltrace.collector import ParquetSpanExporter, resolve_paths
    from evaltrace.collector.runfiles.reader import summarize_runs

    sys.path.insert(0, str(HERE))
    import _scoring_data as data  # a sibling script, not a package

    (folder / "otlp").mkdir(parents=True, exist_ok=True)
    resource = Resource.create({"service.name": "travel-agent", "deployment.environment": "bench"})
    provider = TracerProvider(resource=resource, id_generator=_SeededIds(seed))
    parquet = ParquetSpanExporter(folder / "runs", run_id=f"peer-{seed}", flush_interval=3600, max_rows=50_000)
    for exporter in (FileSpanExporter(folder / "otlp" / "spans.jsonl"), parquet):
        # A queue that holds the whole run: generating is faster than exporting, and nothing may drop.
        processor = BatchSpanProcessor(
            exporter, max_queue_size=1_000_000, max_export_batch_size=512, schedule_delay_millis=200
        )
        provider.add_span_processor(processor)
    tracer = provider.get_tracer("opentelemetry.instrumentation.openai_v2", "2.1b0")

    rng = random.Random(seed)
    random.seed(seed)  # response ids in `_scoring_data._chat_attributes`
    templates = data.case_templates(seed)
    expected: list[Expected] = []
    trace_cases: dict[str, str] = {}  # trace id (hex) -> case id, to read agentevals' results by
    spans = 0
    for serial in range(traces):
        case_id = f"case-{serial:05d}"
        template = templates[serial % data.CASES]
        start = data._BASE_NS + serial * 20_000_000_000
        planned = data.build_trace(rng, template, serial, start, with_case_id=True)
        root_attrs = planned.spans[0][2]
        root_attrs[EVALTRACE_CASE_ID] = case_id
        root_attrs[AGENTEVALS_CASE_ID] = case_id
        question = json.loads(root_attrs["gen_ai.input.messages"])[-1]["parts"][0]["content"]
        calls = [
            (attrs["gen_ai.tool.name"], json.loads(attrs["gen_ai.tool.call.arguments"]))
            for _, _, attrs, _, _, _ in planned.spans
            if attrs.get("gen_ai.operation.name") == "execute_tool"
        ]
        planted = rng.random() < PLANTED_SHARE
        expected.append(Expected(case_id, question, _planted_order(calls) if planted else calls, planted))
        made: list[Any] = []
        for name, parent, attrs, begin, _, error in planned.spans:
            context = trace_api.set_span_in_context(made[parent]) if parent is not None else None
            kind = SpanKind.CLIENT if name.startswith("chat") else SpanKind.INTERNAL
            span = tracer.start_span(name, context=context, kind=kind, attributes=attrs, start_time=begin)
            if error:
                span.set_status(Status(StatusCode.ERROR, error))
            made.append(span)
        trace_cases[f"{made[0].get_span_context().trace_id:032x}"] = case_id
        # Children end before their root, as a live run ends them.
        for (_, _, _, _, end, _), span in reversed(list(zip(planned.spans, made, strict=True))):
            span.end(end_time=end)
        spans += len(made)
    provider.shutdown()
    lost = summarize_runs(resolve_paths([folder / "runs"]))  # the files' own counts, as `evaltrace runs` reads them
    if lost.unwritten_spans or lost.dropped_spans:
        counts = f"{lost.unwritten_spans} unwritten, {lost.dropped_spans} dropped"
        raise SystemExit(f"the Parquet exporter lost spans: {counts}")
    _write_expectations(folder, expected)
    meta = {
        "traces": traces,
        "spans": spans,
        "seed": seed,
        "planted": sorted(e.case_id for e in expected if e.planted),
        "tool_calls": sum(len(e.calls) for e in expected),
        "trace_cases": trace_cases,
    }
    (folder / "dataset.json").write_text(json.dumps(meta), encoding="utf-8")
    return meta


def _write_expectations(folder: Path, expected: list[Expected]) -> None:
    """The same expectations in both tools' formats, plus the names list the DuckDB floor compares."""
    spec_cases = [
        {
            "id": e.case_id,
            "input": e.question,
            "expect": {
                "tool_calls": [{"name": name, "arguments": args} for name, args in e.calls],
                # Arguments compared by equality of the same keys: ADK's EXACT compares `args ==`.
                "trajectory": {"mode": "strict", "arguments": {"mode": "exact"}},
            },
        }
        for e in expected
    ]
    spec = {"confidence": 0.5, "scorers": [], "cases": spec_cases}
    (folder / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    eval_cases = [
        {
            "eval_id": e.case_id,
            "conversation": [
                {
                    "invocation_id": f"{e.case_id}-1",
                    "user_content": {"role": "user", "parts": [{"text": e.question}]},
                    "intermediate_data": {
                        "tool_uses": [{"name": name, "args": args} for name, args in e.calls],
                        "tool_responses": [],
                        "intermediate_responses": [],
                    },
                }
            ],
        }
        for e in expected
    ]
    eval_set = {"eval_set_id": "peer-benchmark", "name": "peer benchmark", "eval_cases": eval_cases}
    (folder / "evalset.json").write_text(json.dumps(eval_set), encoding="utf-8")
    names = {e.case_id: [name for name, _ in e.calls] for e in expected}
    (folder / "expected.json").write_text(json.dumps(names), encoding="utf-8")
