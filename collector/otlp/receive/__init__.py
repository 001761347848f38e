"""`evaltrace collect`: an OTLP receiver (HTTP and gRPC, traces and logs) writing run files.

Requests are checked and decoded where they arrive (`handling.py`, shared by `http_server.py`
and `grpc_server.py`; the HTTP wire level in `wire.py`, the SDK's limits in `otlp/limits.py`), so a bad
request gets its answer at once; the decoded spans and log records then pass through a queue
bounded in spans with their events and links, and log records (`workqueue.py`) to one writer thread (`writer.py`)
that hands them to the in-process exporters (`ParquetSpanExporter`, `ParquetLogExporter`), so
the files are the ones an instrumented process would have written. A full queue is answered
with a retryable refusal (HTTP 503 with Retry-After, gRPC UNAVAILABLE) instead of buffering
without bound. `server.py` starts the two listeners and stops them in order: no new requests,
in-flight ones finished, the queue drained, files flushed and closed.
"""
