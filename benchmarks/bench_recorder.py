"""Recorder benchmark: exporter CPU per span and bytes per span on disk.

Run: `.venv/bin/python benchmarks/bench_recorder.py [--traces N] [--repeats R]`

Each mode runs in a fresh subprocess. The subprocess first generates a seeded, realistic GenAI
workload (outside the measured window), then creates its spans through a BatchSpanProcessor
(queue raised so no span is dropped) and shuts the provider down. The process CPU time of all
threads from the first measured span to the end of `provider.shutdown()` is measured for:

- (a) `noop`: an exporter that does nothing (baseline: SDK and span creation cost),
- (b) `evaltrace`: ParquetSpanExporter,
- (c) `otlp_json_file`: the official opentelemetry-exporter-otlp-json-file FileSpanExporter,
  writing to a real file through the BatchSpanProcessor its documentation recommends.

Exporter CPU per span = (mode CPU - baseline CPU) / spans, medians over the repeats. Bytes per
span = size of the files written / spans written.

Workload: agent sessions of 1-3 user turns; each turn is one trace (an `invoke_agent` span, then
0-3 rounds of `chat` + `execute_tool`, then a final `chat`). Every chat span carries the whole
conversation so far in `gen_ai.input.messages` (system prompt in `gen_ai.system_instructions`),
so histories grow within a session and repeat earlier turns, as agents resend them. Text is drawn
from a Zipf-weighted vocabulary of ~3,100 words with numbers, dates and ids mixed in; tool
results are JSON documents with varying values; ids (response ids, tool call ids) are random.
Everything is seeded, so every mode and every run gets identical payloads.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import random
import resource
import statistics
import string
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODES = ("noop", "evaltrace", "otlp_json_file")

# The ~100 most frequent English words (they make up about half of running text).
_COMMON = (
    "the of and to a in is you that it he was for on are as with his they i at be this have from or one had by "
    "word but not what all were we when your can said there use an each which she do how their if will up other "
    "about out many then them these so some her would make like him into time has look two more write go see "
    "number no way could people my than first been call who its now find long down day did get come made may part "
    "please thanks need want check also just here order trip price"
).split()
_ONSETS = ("b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "st", "tr", "pl", "ch")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ou", "io")
_CODAS = ("", "", "n", "r", "s", "t", "l", "nd", "st", "ck", "ng", "m")
_CITIES = ("Paris", "Lisbon", "Tokyo", "Nairobi", "Denver", "Oslo", "Lima", "Hanoi", "Austin", "Kraków", "Seoul")
_AGENTS = ("travel", "support", "research")
_MODELS = ("gpt-4o", "gpt-4o-mini", "claude-sonnet-4")


def _vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        parts = [rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(rng.randint(1, 3))]
        words.add("".join(parts))
    shuffled = sorted(words)  # a set's order varies with hash randomization; sort, then shuffle
    rng.shuffle(shuffled)
    return _COMMON + shuffled


@dataclass
class _Text:
    """Seeded sentence source: Zipf-Mandelbrot word frequencies, numbers, dates and ids."""

    rng: random.Random
    words: list[str] = field(init=False)
    cum: list[float] = field(init=False)

    def __post_init__(self) -> None:
        self.words = _vocabulary(self.rng)
        self.cum = list(itertools.accumulate(1.0 / (rank + 2.7) for rank in range(len(self.words))))

    def token(self) -> str:
        kind = self.rng.random()
        if kind < 0.3:
            return str(self.rng.randint(2, 5000))
        if kind < 0.5:
            return f"{self.rng.uniform(0, 999):.2f}"
        if kind < 0.7:
            return f"2025-{self.rng.randint(1, 12):02d}-{self.rng.randint(1, 28):02d}"
        if kind < 0.85:
            return self.rng.choice(_CITIES)
        return f"ORD-{self.rng.randint(10000, 99999)}"

    def sentence(self) -> str:
        words = self.rng.choices(self.words, cum_weights=self.cum, k=self.rng.randint(6, 22))
        for _ in range(self.rng.randint(0, 2)):
            words.insert(self.rng.randrange(len(words)), self.token())
        return words[0].capitalize() + " " + " ".join(words[1:]) + self.rng.choice((".", ".", ".", "?", "!"))

    def paragraph(self, low: int, high: int) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randint(low, high)))

    def ident(self, prefix: str, n: int) -> str:
        return prefix + "".join(self.rng.choices(string.ascii_letters + string.digits, k=n))


def _tool_call(text: _Text) -> tuple[str, dict[str, Any], Any]:
    """A tool name, arguments and a JSON result with varying values."""
    rng = text.rng
    tool = rng.choice(("get_weather", "search_docs", "query_orders"))
    if tool == "get_weather":
        city, days = rng.choice(_CITIES), rng.randint(2, 7)
        forecast = [
            {"date": f"2025-06-{d + 1:02d}", "temp_c": round(rng.uniform(-5, 35), 1), "summary": text.sentence()}
            for d in range(days)
        ]
        return tool, {"city": city, "days": days}, {"city": city, "forecast": forecast}
    if tool == "search_docs":
        hits = [
            {
                "title": text.sentence()[:60],
                "url": f"https://docs.example.com/{text.ident('', 10)}",
                "snippet": text.paragraph(1, 3),
                "score": round(rng.random(), 4),
            }
            for _ in range(rng.randint(2, 5))
        ]
        return tool, {"query": text.sentence(), "top_k": len(hits)}, {"results": hits}
    rows = [
        {
            "order_id": f"ORD-{rng.randint(10000, 99999)}",
            "amount": round(rng.uniform(5, 2000), 2),
            "status": rng.choice(("paid", "shipped", "refunded", "pending")),
            "created_at": f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00Z",
            "note": text.sentence(),
        }
        for _ in range(rng.randint(1, 6))
    ]
    return tool, {"customer_id": text.ident("cus_", 14), "limit": 10}, {"rows": rows}


def _msg(role: str, **part: Any) -> dict[str, Any]:
    return {"role": role, "parts": [part]}


Span = tuple[str, dict[str, Any]]


@dataclass
class _Session:
    text: _Text
    agent: str
    model: str
    system: str
    session_id: str
    history: list[dict[str, Any]] = field(default_factory=list)

    def chat(self, output: dict[str, Any], finish: str) -> Span:
        n_in = len(json.dumps(self.history)) // 4 + len(self.system) // 4
        return f"chat {self.model}", {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": self.model,
            "gen_ai.response.model": self.model + "-2025-06-01",
            "gen_ai.response.id": self.text.ident("chatcmpl-", 24),
            "gen_ai.conversation.id": self.session_id,
            "gen_ai.request.temperature": 0.2,
            "gen_ai.usage.input_tokens": n_in,
            "gen_ai.usage.output_tokens": len(json.dumps(output)) // 4,
            "gen_ai.response.finish_reasons": (finish,),
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": self.system}]),
            "gen_ai.input.messages": json.dumps(self.history, ensure_ascii=False),
            "gen_ai.output.messages": json.dumps([{**output, "finish_reason": finish}], ensure_ascii=False),
            "server.address": "api.openai.com",
        }

    def turn(self) -> list[Span]:
        """One user turn = one trace: the root span first, then its children in order."""
        text = self.text
        self.history.append(_msg("user", type="text", content=text.paragraph(1, 4)))
        root = (
            "invoke_agent " + self.agent,
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": self.agent,
                "gen_ai.conversation.id": self.session_id,
            },
        )
        children: list[Span] = []
        for _ in range(text.rng.randint(0, 3)):
            tool, args, result = _tool_call(text)
            call_id = text.ident("call_", 24)
            call = _msg("assistant", type="tool_call", id=call_id, name=tool, arguments=args)
            children.append(self.chat(call, "tool_call"))
            self.history.append(call)
            children.append(
                (
                    f"execute_tool {tool}",
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": tool,
                        "gen_ai.tool.type": "function",
                        "gen_ai.tool.call.id": call_id,
                        "gen_ai.tool.call.arguments": json.dumps(args, ensure_ascii=False),
                        "gen_ai.tool.call.result": json.dumps(result, ensure_ascii=False),
                    },
                )
            )
            self.history.append(_msg("tool", type="tool_call_response", id=call_id, response=result))
        answer = _msg("assistant", type="text", content=text.paragraph(2, 8))
        children.append(self.chat(answer, "stop"))
        self.history.append(answer)
        return [root, *children]


def workload(traces: int, seed: int) -> list[list[Span]]:
    """`traces` traces of (name, attributes) spans, deterministic for a seed."""
    text = _Text(random.Random(seed))
    systems = {agent: text.paragraph(5, 9) for agent in _AGENTS}
    out: list[list[Span]] = []
    while len(out) < traces:
        agent = text.rng.choice(_AGENTS)
        session = _Session(text, agent, text.rng.choice(_MODELS), systems[agent], text.ident("conv_", 16))
        for _ in range(min(text.rng.randint(1, 3), traces - len(out))):
            out.append(session.turn())
    return out


def _replay(traces: list[list[Span]]) -> int:
    from opentelemetry import trace

    tracer = trace.get_tracer("bench", "1.0")
    for (root_name, root_attrs), *children in traces:
        with tracer.start_as_current_span(root_name, attributes=root_attrs):
            for name, attrs in children:
                with tracer.start_as_current_span(name, attributes=attrs):
                    pass
    return sum(len(t) for t in traces)


def _exporter(mode: str, out: Path) -> Any:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    if mode == "noop":

        class Noop(SpanExporter):
            def export(self, spans: Sequence[Any]) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        return Noop()
    if mode == "evaltrace":
        from evaltrace.collector.recorder.exporter import ParquetSpanExporter

        return ParquetSpanExporter(out, run_id="bench")
    from opentelemetry.exporter.otlp.json.file.trace_exporter import FileSpanExporter

    out.mkdir(parents=True, exist_ok=True)
    return FileSpanExporter(out / "spans.jsonl")


def child(mode: str, traces: int, seed: int, out: Path) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    warm_up, measured = workload(20, seed + 1), workload(traces, seed)
    payload = sum(len(k) + len(str(v)) for t in measured for _, attrs in t for k, v in attrs.items())
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(_exporter(mode, out), max_queue_size=1_000_000))
    trace.set_tracer_provider(provider)
    warm = _replay(warm_up)  # imports and first encodings happen here; the files include these spans
    gc.collect()
    gc.freeze()  # the pre-generated workload is not the exporter's garbage: keep it out of GC scans
    before = resource.getrusage(resource.RUSAGE_SELF)
    spans = _replay(measured)
    provider.shutdown()
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(json.dumps({"cpu_s": cpu, "spans": spans, "bytes": size, "bytes_spans": spans + warm, "payload": payload}))


def run_mode(mode: str, traces: int, seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, __file__, "--child", mode, "--traces", str(traces), "--seed", str(seed), "--out", tmp]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EVALTRACE_"))}
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        return result


def report(runs: dict[str, list[dict[str, Any]]], traces: int, repeats: int) -> None:
    spans = runs["noop"][0]["spans"]
    cpu = {m: statistics.median(r["cpu_s"] for r in runs[m]) for m in MODES}
    per_span = {m: (cpu[m] - cpu["noop"]) / spans * 1e6 for m in MODES}
    size = {m: statistics.median(r["bytes"] / r["bytes_spans"] for r in runs[m]) for m in MODES}
    payload = runs["noop"][0]["payload"] / spans
    print(f"spans per run: {spans} ({traces} traces), attribute text {payload:,.0f} B/span, repeats: {repeats}")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    # Spread: each run of a mode against the median baseline (the machine's noise, not an error bar).
    spread = {m: [(r["cpu_s"] - cpu["noop"]) / spans * 1e6 for r in runs[m]] for m in MODES}
    print(f"{'mode':<16}{'process CPU s':>14}{'exporter CPU us/span':>22}{'(min-max)':>14}{'bytes/span':>12}")
    for m in MODES:
        low_high = f"{min(spread[m]):.0f}-{max(spread[m]):.0f}"
        print(f"{m:<16}{cpu[m]:>14.3f}{per_span[m]:>22.1f}{low_high:>14}{size[m]:>12.1f}")
    official = "otlp_json_file"
    print(
        f"evaltrace/official: CPU {per_span['evaltrace'] / per_span[official]:.3f}, "
        f"bytes {size['evaltrace'] / size[official]:.4f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--traces", type=int, default=2000, help="agent turns, one trace each (~5 spans)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=20250601)
    parser.add_argument("--child", choices=MODES)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.traces, args.seed, args.out)
        return
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    for _ in range(args.repeats):
        for mode in MODES:  # interleaved so machine noise hits every mode alike
            runs[mode].append(run_mode(mode, args.traces, args.seed))
    report(runs, args.traces, args.repeats)


if __name__ == "__main__":
    main()
