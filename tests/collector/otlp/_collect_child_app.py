"""An app `evaltrace collect -- python _collect_child_app.py ...` runs in the tests: the real OTel SDK's
OTLP exporter, configured only by the environment collect gives it.

`python _collect_child_app.py send N CODE`: records N spans with the SDK's OTLP exporter for
$OTEL_EXPORTER_OTLP_PROTOCOL (HTTP protobuf or gRPC; endpoint and headers read from the
environment as the SDK reads them), flushes them (`shutdown`) and exits with CODE.
`python _collect_child_app.py env`: prints the OTLP variables it was given as JSON, exits 0.
`python _collect_child_app.py wait-term CODE`: says `ready` on stdout, then on SIGTERM or SIGINT
waits a second, records one span naming how many signals it got, flushes and exits with CODE.
`python _collect_child_app.py kill-self`: ends itself with SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor


def _provider() -> TracerProvider:
    exporter: Any
    if os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans

        exporter = GrpcSpans()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "child-app"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def send(count: int, code: int) -> None:
    provider = _provider()
    tracer = provider.get_tracer("collect-child")
    for n in range(count):
        with tracer.start_as_current_span(f"span {n}") as span:
            span.set_attribute("n", n)
    provider.shutdown()  # flushes: every span exported before the process exits
    sys.exit(code)


def wait_term(code: int) -> None:
    provider = _provider()
    received: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _: received.append(signum))
    signal.signal(signal.SIGINT, lambda signum, _: received.append(signum))
    print("ready", flush=True)
    while not received:
        time.sleep(0.05)
    time.sleep(1.0)  # a second copy of the signal (a Ctrl-C passed on again) would arrive by now
    with provider.get_tracer("collect-child").start_as_current_span(f"terminated after {len(received)} signal(s)"):
        pass
    provider.shutdown()
    sys.exit(code)


def main() -> None:
    what = sys.argv[1]
    if what == "send":
        send(int(sys.argv[2]), int(sys.argv[3]))
    elif what == "env":
        print(json.dumps({k: v for k, v in os.environ.items() if k.startswith("OTEL_EXPORTER_OTLP")}))
    elif what == "wait-term":
        wait_term(int(sys.argv[2]))
    elif what == "kill-self":
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
