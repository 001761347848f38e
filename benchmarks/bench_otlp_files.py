"""OTLP JSON file benchmark: `evaltrace import` and `evaltrace score` on large OTLP JSON lines files.

Run: `.venv/bin/python benchmarks/bench_otlp_files.py [--sizes-mb 128,1024] [--keep]`

For each size the benchmark writes (outside the measured window) an OTLP JSON lines file of about
that many MB, the layout of the official OTLP JSON file exporter: one `ExportTraceServiceRequest`
per line, each one agent trace of 5 spans (`invoke_agent`, `chat` with a tool call, `execute_tool`,
`chat` with the answer, plus a retrieval span) whose chat spans carry ~1.5 KB of messages. Ids
differ per trace; the payload text repeats (the measure is of the reading path, not compression).

Then, each in a fresh subprocess with its own empty cache folder, timed (wall) and measured
(peak RSS of the process, from `wait4`):

- `import`: `evaltrace import FILE --out DIR`;
- `score cold`: `evaltrace score FILE --no-store --json R`: the import into the cache, then
  reading and scoring every trace with the default scorers;
- `score warm`: the same again: the import and the traces table are read from the cache.

The generated files are deleted afterwards unless `--keep`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_TEXT = "The forecast for the coming days shows mild temperatures, light wind and a chance of rain. " * 8


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _span(name: str, span_id: str, parent: str, start: int, attributes: dict[str, Any]) -> dict[str, Any]:
    return {
        "traceId": "@TRACE@",
        "spanId": span_id,
        "parentSpanId": parent,
        "flags": 256,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": f"@T{start}@",
        "endTimeUnixNano": f"@T{start + 1}@",
        "attributes": [_attr(k, v) for k, v in attributes.items()],
        "status": {},
    }


def _template() -> str:
    """One request (one trace) with placeholders for the trace id, span ids' prefix and times."""
    user = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris? " + _TEXT}]}])
    call = {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}
    tool_reply = json.dumps([{"role": "assistant", "parts": [call], "finish_reason": "tool_call"}])
    answer = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "18C, sunny. " + _TEXT}]}])
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", "gen_ai.input.messages": user}
    spans = [
        _span("invoke_agent weather", "@S@00000001", "", 0, {"gen_ai.operation.name": "invoke_agent"}),
        _span("chat gpt-4o", "@S@00000002", "@S@00000001", 2, {**chat, "gen_ai.output.messages": tool_reply}),
        _span(
            "execute_tool get_weather",
            "@S@00000003",
            "@S@00000001",
            4,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "call_1",
            },
        ),
        _span("retrieve docs", "@S@00000004", "@S@00000003", 5, {"db.system": "vector", "hits": 3}),
        _span("chat gpt-4o", "@S@00000005", "@S@00000001", 7, {**chat, "gen_ai.output.messages": answer}),
    ]
    resource = {"attributes": [_attr("service.name", "bench-agent")]}
    request = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {"name": "bench"}, "spans": spans}]}]}
    return json.dumps(request, separators=(",", ":"))


def generate(path: Path, size_mb: int) -> tuple[int, int]:
    """Write the file; returns (traces, bytes)."""
    template = _template()
    base = 1_767_225_600_000_000_000
    written = traces = 0
    limit = size_mb * 1_000_000
    with path.open("w", encoding="utf-8") as out:
        while written < limit:
            traces += 1
            line = template.replace("@TRACE@", f"{traces:032x}").replace("@S@", f"{traces:08x}")
            start = base + traces * 1_000_000
            for step in range(9):
                line = line.replace(f'"@T{step}@"', f'"{start + step * 1000}"')
            out.write(line + "\n")
            written += len(line) + 1
    return traces, path.stat().st_size


def measure(args: list[str], cache: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of `evaltrace ARGS` in a fresh subprocess with the given cache folder."""
    env = {**os.environ, "EVALTRACE_CACHE_DIR": str(cache)}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "evaltrace.cli", *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"evaltrace {' '.join(args)} failed ({code}): {proc.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024  # KiB on Linux


def run(size_mb: int, folder: Path) -> None:
    """Generate the file, then measure and print each stage as it ends."""
    source = folder / f"otlp-{size_mb}mb.jsonl"
    traces, size = generate(source, size_mb)
    cache = folder / f"cache-{size_mb}"
    imported = folder / f"imported-{size_mb}"
    report = str(folder / "report.json")
    stages = {
        "import": (["import", str(source), "--out", str(imported)], folder / "unused"),
        "score cold": (["score", str(source), "--no-store", "--json", report], cache),
        "score warm": (["score", str(source), "--no-store", "--json", report], cache),
    }
    for stage, (args, cache_dir) in stages.items():
        wall, rss = measure(args, cache_dir)
        print(f"| {size / 1e6:.0f} MB | {traces} | {traces * 5} | {stage} | {wall:.1f} | {rss:.0f} |", flush=True)
        shutil.rmtree(imported, ignore_errors=True)
    imports = list((cache / "imports").iterdir())
    if len(imports) != 1:  # the warm run imported again: the sources changed meanwhile (an edited checkout)
        print(f"(warm run not warm: {len(imports)} imports in the cache)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", default="128,1024", help="File sizes to generate, in MB (comma-separated).")
    parser.add_argument(
        "--dir", type=Path, default=None, help="Where to write the files (default: a temporary folder)."
    )
    parser.add_argument("--keep", action="store_true", help="Keep the generated files.")
    options = parser.parse_args()
    folder = options.dir or Path(tempfile.mkdtemp(prefix="bench-otlp-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        print("| file | traces | spans | stage | wall s | peak RSS MB |")
        print("|---:|---:|---:|---|---:|---:|")
        for size in (int(s) for s in options.sizes_mb.split(",")):
            run(size, folder)
    finally:
        if not options.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
