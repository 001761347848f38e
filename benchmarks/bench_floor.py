"""Yardstick: how far the converter is from the least work that rebuilds the scoring benchmark's traces.

Run: `.venv/bin/python benchmarks/bench_floor.py [--traces 10000] [--rounds 4]`

`lean` below rebuilds the same `Trace` records (pydantic, validated) from the same span files, but
knows the data in advance: GenAI v1.37+ spans only, one agent per trace, tool calls paired by id,
no warnings, no other conventions, no span tree, no prompt parsing. It is not a converter; it
measures how much of the converter's time is its generality rather than reading the files or
building the records. First the two are checked to agree on what scoring reads (input, output,
calls with names, arguments and results, iterations, usage, case id); then each runs in its own
process, both at once, pinned to different cores and swapped every round (this VM's speed drifts
within minutes, so only simultaneous runs compare fairly). Reported: CPU seconds per round.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
COLUMNS = (
    "trace_id", "span_id", "name", "status_code", "status_message", "start_time", "end_time",
    "gen_ai_operation_name", "gen_ai_response_model", "gen_ai_tool_call_id",
    "gen_ai_usage_input_tokens", "gen_ai_usage_output_tokens", "case_id", "gen_ai_conversation_id",
    "large_attributes",
)  # fmt: skip
TRACE, SPAN, NAME, STATUS, MESSAGE, START, END, OP, MODEL, CALL_ID, IN_TOK, OUT_TOK, CASE, CONV, LARGE = range(15)
Row = tuple[Any, ...]


def lean_traces(runs: Path) -> Iterator[Any]:
    """The benchmark's traces, rebuilt with the least work (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in sorted(glob.glob(str(runs / "*.parquet"))):
        groups: dict[str, list[Row]] = {}
        for batch in pq.ParquetFile(path).iter_batches(columns=list(COLUMNS), batch_size=65536):
            columns = [batch.column(name) for name in COLUMNS]
            values = [c.cast(pa.int64()) if i in (START, END) else c for i, c in enumerate(columns)]
            for row in zip(*(v.to_pylist() for v in values), strict=True):
                groups.setdefault(row[TRACE], []).append(row)
        # The generator writes each trace into one file: no trace spans two.
        for rows in groups.values():
            yield _lean_trace(rows)


def _lean_trace(rows: list[Row]) -> Any:
    from evaltrace.collector.traces.records import Iteration, Trace, Usage

    agent = next(r for r in rows if r[OP] == "invoke_agent")
    chats = sorted((r for r in rows if r[OP] == "chat"), key=lambda r: r[START])
    tools = {r[CALL_ID]: r for r in rows if r[OP] == "execute_tool"}
    iterations, calls = [], []
    for index, chat in enumerate(chats):
        output = json.loads(dict(chat[LARGE])["gen_ai.output.messages"])
        made = [_lean_call(part, tools.get(part["id"]), index) for part in _parts(output, "tool_call")]
        calls += made
        iterations.append(
            Iteration(
                index=index,
                span_id=chat[SPAN],
                model=chat[MODEL],
                output_messages=[_lean_message(m) for m in output],
                tool_calls=made,
                usage=Usage(input_tokens=chat[IN_TOK], output_tokens=chat[OUT_TOK]),
                start_time=_time(chat[START]),
                end_time=_time(chat[END]),
            )
        )
    large = dict(agent[LARGE])
    return Trace(
        trace_id=agent[TRACE],
        root_span_id=agent[SPAN],
        name=agent[NAME],
        input=_last_text(json.loads(large["gen_ai.input.messages"])),
        output=_last_text(json.loads(large["gen_ai.output.messages"])),
        iterations=iterations,
        tool_calls=calls,
        usage=Usage.combined(it.usage for it in iterations),
        start_time=_time(agent[START]),
        end_time=_time(agent[END]),
        case_id=agent[CASE],
        conversation_id=agent[CONV],
        span_count=len(rows),
    )


def _lean_call(part: dict[str, Any], tool: Row | None, iteration: int) -> Any:
    from evaltrace.collector.traces.records import ToolCall

    large = dict(tool[LARGE]) if tool is not None else {}
    result = large.get("gen_ai.tool.call.result")
    return ToolCall(
        call_id=part["id"],
        name=part["name"],
        arguments=json.loads(large["gen_ai.tool.call.arguments"]) if large else part["arguments"],
        result=json.loads(result) if result else None,
        error=tool[MESSAGE] or "error" if tool is not None and tool[STATUS] == "ERROR" else None,
        iteration=iteration,
        span_id=tool[SPAN] if tool is not None else None,
        start_time=_time(tool[START]) if tool is not None else None,
        end_time=_time(tool[END]) if tool is not None else None,
    )


def _lean_message(message: dict[str, Any]) -> Any:
    from evaltrace.collector.traces.records import Message, MessagePart

    parts = [
        MessagePart(type="text", text=p["content"])
        if p["type"] == "text"
        else MessagePart(type="tool_call", call_id=p["id"], name=p["name"], arguments=p["arguments"])
        for p in message["parts"]
    ]
    return Message(role=message["role"], parts=parts)


def _parts(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [p for m in messages for p in m["parts"] if p["type"] == kind]


def _last_text(messages: list[dict[str, Any]]) -> str | None:
    texts = _parts(messages[-1:], "text")
    return "\n".join(p["content"] for p in texts) if texts else None


def _time(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, UTC)


def current_traces(runs: Path) -> Iterator[Any]:
    """The converter, as `evaltrace score` calls it for the benchmark's spec."""
    from evaltrace.collector import resolve_paths
    from evaltrace.collector.traces.rebuild import read_traces

    return read_traces(resolve_paths([runs]), histories=False)


def what_scoring_reads(trace: Any) -> tuple[Any, ...]:
    """The fields the benchmark's scorers read; a failed call's result is left out (the converter
    takes it from the next prompt, which `lean` does not read)."""
    calls = [(c.name, c.arguments, None if c.error else c.result, c.error is not None) for c in trace.tool_calls]
    iterations = [(it.model, it.output_text, len(it.tool_calls)) for it in trace.iterations]
    return trace.input, trace.output, trace.case_id, trace.usage.total_tokens, calls, iterations


def check_agreement(runs: Path) -> int:
    """Compare both rebuilds trace by trace; returns the number of traces compared."""
    current = {t.trace_id: what_scoring_reads(t) for t in current_traces(runs)}
    compared = 0
    for trace in lean_traces(runs):
        if current.pop(trace.trace_id) != what_scoring_reads(trace):
            raise SystemExit(f"lean and current rebuilds disagree on trace {trace.trace_id}")
        compared += 1
    if current:
        raise SystemExit(f"lean rebuild missed {len(current)} traces")
    return compared


def _child(mode: str, runs: Path) -> None:
    started = time.process_time()
    source = lean_traces(runs) if mode == "lean" else current_traces(runs)
    count = sum(1 for _ in source)
    print(json.dumps({"mode": mode, "cpu": time.process_time() - started, "traces": count}))


def _pinned(mode: str, core: int, runs: Path) -> subprocess.Popen[str]:
    env = {"ARROW_DEFAULT_MEMORY_POOL": "system", **os.environ}
    cmd = ["taskset", "-c", str(core), sys.executable, __file__, "--_child", mode, str(runs)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--_child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._child:
        _child(args._child[0], Path(args._child[1]))
        return
    sys.path.insert(0, str(HERE))
    from bench_scoring import dataset  # a sibling script

    runs, _, spans = dataset(args.traces, 7)
    print(f"{check_agreement(runs):,} traces ({spans:,} spans): lean and current agree on what scoring reads")
    ratios = []
    for round_ in range(args.rounds):
        lean_core = round_ % 2
        procs = {"lean": _pinned("lean", lean_core, runs), "current": _pinned("current", 1 - lean_core, runs)}
        cpu = {mode: json.loads(proc.communicate()[0])["cpu"] for mode, proc in procs.items()}
        ratios.append(cpu["current"] / cpu["lean"])
        print(f"round {round_ + 1}: current {cpu['current']:.2f} s, lean {cpu['lean']:.2f} s CPU")
    print(f"current / lean: median {statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})")


if __name__ == "__main__":
    main()
