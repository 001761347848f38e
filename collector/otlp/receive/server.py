"""The receiver: its listeners, queue and writer, started together and stopped in order.

`stop()` is what SIGTERM and Ctrl-C lead to: new requests are refused (as retryable), requests
in progress finish (up to `drain_seconds`), then the queue is closed, drained into the
exporters, and the files are written and closed. Whatever was acknowledged with a 200 (or an OK
gRPC status) is in a file when `stop()` returns.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.receive.config import Address, ReceiverConfig
from evaltrace.collector.otlp.receive.grpc_server import GrpcListener
from evaltrace.collector.otlp.receive.handling import Counts, Intake
from evaltrace.collector.otlp.receive.http_server import HttpContext, HttpListener
from evaltrace.collector.otlp.receive.refusals import RefusalLog
from evaltrace.collector.otlp.receive.workqueue import WorkQueue
from evaltrace.collector.otlp.receive.writer import RunWriter, Written
from evaltrace.collector.recorder.exporter import ExporterSettings


@dataclass(frozen=True)
class Summary:
    """What a receiver took and wrote, from start to stop."""

    counts: Counts
    written: Written
    refusals: dict[str, int] = field(default_factory=dict)
    """Refused requests by kind (`HTTP 401`, `gRPC INVALID_ARGUMENT`, ...)."""


class Receiver:
    """An OTLP receiver writing run files with `settings` (folder, run id, redaction, rolls).

    `say` gets a line for refused requests while it runs (rate-limited; default: the `evaltrace` logger).

    Raises:
        InputError: an address cannot be listened on (in use, or not this machine's).
    """

    def __init__(
        self, config: ReceiverConfig, settings: ExporterSettings, say: Callable[[str], None] | None = None
    ) -> None:
        self.config = config
        self.queue = WorkQueue(config.queue_items)
        self.intake = Intake(self.queue, config.queue_wait_seconds, refusals=RefusalLog(say))
        self.stopping = threading.Event()
        self._permits = threading.BoundedSemaphore(config.max_concurrent_requests)
        self.writer = RunWriter(self.queue, settings)
        self.http: HttpListener | None = None
        self.grpc: GrpcListener | None = None
        try:
            self._bind()
        except BaseException:
            if self.http is not None:
                self.http.stop()
            raise

    def _bind(self) -> None:
        config = self.config
        if config.http is not None:
            context = HttpContext(config, self.intake, self._permits, self.stopping)
            try:
                self.http = HttpListener(config.http, context)
            except OSError as exc:
                raise InputError(f"--http {config.http}: cannot listen there ({exc.strerror or exc})") from None
        if config.grpc is not None:
            try:
                self.grpc = GrpcListener(config.grpc, config, self.intake, self.stopping)
            except RuntimeError:  # gRPC says only "Failed to bind"
                why = "the port is in use, or the address is not this machine's"
                raise InputError(f"--grpc {config.grpc}: cannot listen there ({why})") from None

    @property
    def http_address(self) -> Address | None:
        """Where OTLP/HTTP is served (the bound port when 0 was asked for)."""
        return self.http.address if self.http is not None else None

    @property
    def grpc_address(self) -> Address | None:
        """Where OTLP/gRPC is served (the bound port when 0 was asked for)."""
        return self.grpc.address if self.grpc is not None else None

    def start(self) -> None:
        """Start writing and accepting requests."""
        self.writer.start()
        if self.http is not None:
            self.http.start()
        if self.grpc is not None:
            self.grpc.start()

    def stop(self) -> Summary:
        """Refuse new requests, let those in progress finish, write and close every file."""
        self.stopping.set()
        deadline = time.monotonic() + self.config.drain_seconds
        if self.http is not None:
            self.http.stop()
        if self.grpc is not None:
            self.grpc.stop(self.config.drain_seconds)
        # Holding every permit means no HTTP request is being read or decoded any more.
        for _ in range(self.config.max_concurrent_requests):
            if not self._permits.acquire(timeout=max(0.0, deadline - time.monotonic())):
                break
        written = self.writer.finish()
        return Summary(self.intake.snapshot(), written, self.intake.refusals.counts())
