"""Recorder benchmark: exporter CPU per span and bytes per span on disk.

Run: `.venv/bin/python benchmarks/bench_recorder.py [--turns N] [--repeats R]`

Each mode runs in a fresh subprocess: an app creates realistic GenAI spans (agent, chat spans
with input/output messages of a few KB, tool spans with arguments and results) through a
BatchSpanProcessor (max queue raised so no span is dropped), then shuts the provider down. The
process CPU time (all threads) of span creation + export + shutdown is measured:

- (a) `noop`: an exporter that does nothing (baseline: SDK and span creation cost),
- (b) `evaltrace`: ParquetSpanExporter,
- (c) `otlp_json_file`: the official opentelemetry-exporter-otlp-json-file FileSpanExporter.

Exporter CPU per span = (mode CPU - baseline CPU) / spans, median over repeats. Bytes per span
= size of the files written / spans.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MODES = ("noop", "evaltrace", "otlp_json_file")


def _messages(turn: int, size: int) -> str:
    text = (f"Turn {turn}: please look up the weather and plan a trip. " * (size // 55 + 1))[:size]
    return json.dumps(
        [
            {"role": "system", "parts": [{"type": "text", "content": "You are a helpful travel agent."}]},
            {"role": "user", "parts": [{"type": "text", "content": text}]},
        ]
    )


def _make_spans(turns: int) -> int:
    from opentelemetry import trace

    tracer = trace.get_tracer("bench", "1.0")
    spans = 0
    for turn in range(turns):
        with tracer.start_as_current_span(
            "invoke_agent travel",
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel", "session.id": "c1"},
        ):
            for step in range(2):
                attrs = {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-4o",
                    "gen_ai.response.model": "gpt-4o-2024-08-06",
                    "gen_ai.usage.input_tokens": 900 + step,
                    "gen_ai.usage.output_tokens": 120,
                    "gen_ai.response.finish_reasons": ("tool_call",),
                    "gen_ai.input.messages": _messages(turn, 3000),
                    "gen_ai.output.messages": _messages(turn, 800),
                    "server.address": "api.openai.com",
                }
                with tracer.start_as_current_span("chat gpt-4o", attributes=attrs):
                    pass
                tool = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "get_weather",
                    "gen_ai.tool.call.id": f"call_{turn}_{step}",
                    "gen_ai.tool.call.arguments": json.dumps({"city": "Paris", "days": step + 1}),
                    "gen_ai.tool.call.result": json.dumps({"forecast": ["sunny", 18.5] * 20}),
                }
                with tracer.start_as_current_span("execute_tool get_weather", attributes=tool):
                    pass
                spans += 2
            spans += 1
    return spans


def _exporter(mode: str, out: Path) -> Any:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    if mode == "noop":

        class Noop(SpanExporter):
            def export(self, spans: Sequence[Any]) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        return Noop()
    if mode == "evaltrace":
        from evaltrace.collector.exporter import ParquetSpanExporter

        return ParquetSpanExporter(out, run_id="bench")
    from opentelemetry.exporter.otlp.json.file.trace_exporter import FileSpanExporter

    out.mkdir(parents=True, exist_ok=True)
    return FileSpanExporter(out / "spans.jsonl")


def child(mode: str, turns: int, out: Path) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(_exporter(mode, out), max_queue_size=1_000_000))
    trace.set_tracer_provider(provider)
    _make_spans(5)  # warm-up (imports, first encodings); the next files include these 15 spans
    before = resource.getrusage(resource.RUSAGE_SELF)
    spans = _make_spans(turns)
    provider.shutdown()
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    warm = 15
    print(json.dumps({"cpu_s": cpu, "spans": spans, "bytes": size, "bytes_spans": spans + warm}))


def run_mode(mode: str, turns: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, __file__, "--child", mode, "--turns", str(turns), "--out", tmp]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EVALTRACE_"))}
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000, help="agent turns (5 spans each)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", choices=MODES)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.turns, args.out)
        return
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    for _ in range(args.repeats):
        for mode in MODES:  # interleaved so machine noise hits every mode alike
            runs[mode].append(run_mode(mode, args.turns))
    spans = runs["noop"][0]["spans"]
    cpu = {m: statistics.median(r["cpu_s"] for r in runs[m]) for m in MODES}
    per_span = {m: (cpu[m] - cpu["noop"]) / spans * 1e6 for m in MODES}
    size = {m: statistics.median(r["bytes"] / r["bytes_spans"] for r in runs[m]) for m in MODES}
    print(f"spans per run: {spans} ({args.turns} turns), repeats: {args.repeats}, python {sys.version.split()[0]}")
    print(f"{'mode':<16}{'process CPU s':>14}{'exporter CPU us/span':>22}{'bytes/span':>12}")
    for m in MODES:
        print(f"{m:<16}{cpu[m]:>14.3f}{per_span[m]:>22.1f}{size[m]:>12.1f}")
    official = "otlp_json_file"
    print(
        f"evaltrace/official: CPU {per_span['evaltrace'] / per_span[official]:.3f}, "
        f"bytes {size['evaltrace'] / size[official]:.4f}"
    )


if __name__ == "__main__":
    main()
