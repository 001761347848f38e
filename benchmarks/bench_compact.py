"""What compaction buys: a long recording's many small files, read before and after `evaltrace compact`.

    .venv/bin/python benchmarks/bench_compact.py --files 1000 --spans-per-file 20

A recording process writes a file per flush interval; this writes `--files` files of
`--spans-per-file` GenAI spans each (the real exporter, rolled by `max_rows`), then times, each in
a fresh subprocess: `evaltrace traces DIR --json` before, `evaltrace compact DIR`, and the same
`traces` after. It checks the traces read are identical and prints bytes on disk and CPU seconds.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_files(folder: Path, files: int, spans_per_file: int) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from evaltrace.collector.recorder.exporter import ParquetSpanExporter

    exporter = ParquetSpanExporter(folder, run_id="long-recording", max_rows=spans_per_file)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    question = "What is the weather in Paris and what should I wear tomorrow morning? " * 4
    for i in range(files * spans_per_file // 2):
        with tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
            attributes = {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.usage.input_tokens": 300 + i % 50,
                "gen_ai.input.messages": f'[{{"role":"user","parts":[{{"type":"text","content":"{question} #{i}"}}]}}]',
            }
            with tracer.start_as_current_span("chat gpt-4o-mini", attributes=attributes):
                pass
    provider.shutdown()


def timed(*args: str) -> tuple[float, str]:
    """CPU seconds of `python -m evaltrace.cli ARGS` in a fresh process, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "evaltrace.cli", *args], capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def disk(folder: Path) -> tuple[int, int]:
    files = list(folder.glob("*.parquet"))
    return len(files), sum(p.stat().st_size for p in files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--spans-per-file", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "runs"
        started = time.perf_counter()
        write_files(folder, args.files, args.spans_per_file)
        print(f"wrote {disk(folder)[0]} files in {time.perf_counter() - started:.1f} s")
        n_before, bytes_before = disk(folder)
        read_before, traces_before = timed("traces", str(folder), "--json")
        compact_cpu, _ = timed("compact", str(folder))
        n_after, bytes_after = disk(folder)
        read_after, traces_after = timed("traces", str(folder), "--json")
        if sorted(traces_before.splitlines()) != sorted(traces_after.splitlines()):
            raise SystemExit("the traces read after compaction differ from those before")
        print(f"{'':22}{'files':>8}{'bytes':>14}{'read CPU s':>12}")
        print(f"{'before':22}{n_before:>8}{bytes_before:>14,}{read_before:>12.2f}")
        print(f"{'after compact':22}{n_after:>8}{bytes_after:>14,}{read_after:>12.2f}")
        print(f"compaction CPU s: {compact_cpu:.2f}; traces identical: yes")


if __name__ == "__main__":
    main()
