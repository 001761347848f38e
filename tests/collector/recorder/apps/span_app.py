"""Helper application for the recorder tests: creates spans in one of several scenarios.

Run as `python span_app.py MODE [ARGS...]`. It prints JSON lines the tests parse: `{"span": hex}`
for every span it ended, plus scenario-specific lines. Span ids are how the tests check that
nothing is lost or duplicated.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time

from opentelemetry import trace


def emit(obj: object) -> None:
    # One write per line: processes share stdout, and print() writes the newline separately.
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def make_spans(n: int, prefix: str = "s") -> list[str]:
    tracer = trace.get_tracer("span_app")
    ids = []
    for i in range(n):
        attrs = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": i, "pid": os.getpid()}
        with tracer.start_as_current_span(f"{prefix}{i}", attributes=attrs) as span:
            ids.append(f"{span.get_span_context().span_id:016x}")
    for sid in ids:
        emit({"span": sid, "pid": os.getpid()})
    return ids


def _mp_worker(n: int) -> None:
    make_spans(n, "mp")


def main() -> None:
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "plain":  # whatever opentelemetry-instrument configured
        emit({"provider": type(trace.get_tracer_provider()).__name__})
        make_spans(int(args[0]))
        return
    from evaltrace.collector import record

    if mode == "existing":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        provider = TracerProvider()
        memory = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        trace.set_tracer_provider(provider)
        recorder = record()
        again = record()
        make_spans(int(args[0]))
        recorder.flush()
        emit(
            {
                "memory": len(memory.get_finished_spans()),
                "same_handle": again is recorder,
                "provider_kept": trace.get_tracer_provider() is provider,
            }
        )
        return
    recorder = record()
    emit({"run_id": recorder.run_id, "directory": str(recorder.directory)})
    if mode == "many":
        make_spans(int(args[0]))
    elif mode == "fork":
        make_spans(2, "parent-before")  # ended and queued/buffered in the parent before fork
        recorder.flush() if args and args[0] == "flush-first" else None
        pid = os.fork()
        if pid == 0:
            make_spans(3, "child")
            sys.exit(0)  # normal exit: atexit shuts the child's provider down
        os.waitpid(pid, 0)
        make_spans(2, "parent-after")
    elif mode == "mp":
        ctx = multiprocessing.get_context("fork")
        proc = ctx.Process(target=_mp_worker, args=(4,))
        proc.start()
        proc.join()
        with ctx.Pool(2) as pool:
            pool.map(_mp_worker, [2, 2, 2])
            pool.close()
            pool.join()
        make_spans(1, "main")
    elif mode == "sigterm":
        make_spans(int(args[0]))
        emit({"ready": True})
        time.sleep(60)
        emit({"survived": True})
    elif mode == "spin":  # for SIGKILL: roll files as fast as possible
        emit({"ready": True})
        tracer = trace.get_tracer("span_app")
        while True:
            with tracer.start_as_current_span("spin", attributes={"payload": "x" * 2000}):
                pass


if __name__ == "__main__":
    main()
