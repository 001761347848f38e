"""OTLP/gRPC: the trace and logs services' `Export`.

Without the configured bearer token a call is answered UNAUTHENTICATED by an interceptor, from its
metadata, before its message is received or parsed: the refusal is a streaming handler that never
reads its requests. gRPC itself decompresses (gzip) and enforces the size limit on the
decompressed message (RESOURCE_EXHAUSTED), and answers an undecodable message with an error. Here:
UNAVAILABLE (retryable for OTLP clients) when the queue is
full or the receiver is stopping, and otherwise the export response, with a partial success
when items were rejected.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from pydantic import SecretStr

from evaltrace.collector.receive.config import Address, ReceiverConfig, bearer_matches
from evaltrace.collector.receive.handling import Intake, Refused, Request, Response
from evaltrace.collector.receive.workqueue import Signal


class _Export:
    """What both services do with a request."""

    def __init__(self, config: ReceiverConfig, intake: Intake, stopping: threading.Event) -> None:
        self.config, self.intake, self.stopping = config, intake, stopping

    def __call__(self, signal: Signal, request: Request, context: grpc.ServicerContext) -> Response:
        if self.stopping.is_set():
            self.intake.count(refused_requests=1)
            context.abort(grpc.StatusCode.UNAVAILABLE, "the receiver is shutting down")
        try:
            return self.intake.accept(signal, request)
        except Refused as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
            raise  # not reached: abort raises


def _unauthenticated(requests: Iterator[bytes], context: grpc.ServicerContext) -> None:
    # A stream-request handler: gRPC hands it an iterator that reads the message only if asked.
    context.abort(grpc.StatusCode.UNAUTHENTICATED, "a valid bearer token is required")


_REFUSE = grpc.stream_unary_rpc_method_handler(_unauthenticated)


class _TokenCheck(grpc.ServerInterceptor):  # type: ignore[misc]
    """Lets a call through only with `authorization: Bearer <token>` in its metadata."""

    def __init__(self, token: SecretStr) -> None:
        self._token = token

    def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler], details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        given = dict(details.invocation_metadata or ()).get("authorization", "")
        if bearer_matches(self._token, str(given).encode("utf-8", "replace")):
            return continuation(details)
        return _REFUSE


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, export: _Export) -> None:
        self._export = export

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._export(Signal.TRACES, request, context)


class _LogsService(logs_service_pb2_grpc.LogsServiceServicer):
    def __init__(self, export: _Export) -> None:
        self._export = export

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._export(Signal.LOGS, request, context)


class GrpcListener:
    """The OTLP/gRPC server (gRPC runs it on its own threads)."""

    def __init__(self, address: Address, config: ReceiverConfig, intake: Intake, stopping: threading.Event) -> None:
        workers = config.max_concurrent_requests
        self._server = grpc.server(
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="evaltrace-collect-grpc"),
            options=[
                ("grpc.max_receive_message_length", config.max_body_bytes),
                ("grpc.so_reuseport", 0),  # a second receiver on the same port must fail, not share it
            ],
            # Calls beyond these wait in no unbounded queue: gRPC answers RESOURCE_EXHAUSTED.
            maximum_concurrent_rpcs=workers * 2,
            interceptors=[_TokenCheck(config.token)] if config.token is not None else [],
        )
        export = _Export(config, intake, stopping)
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceService(export), self._server)  # type: ignore[no-untyped-call]
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(_LogsService(export), self._server)  # type: ignore[no-untyped-call]
        port = self._server.add_insecure_port(str(address))
        self.address = Address(address.host, port)

    def start(self) -> None:
        """Accept calls."""
        self._server.start()

    def stop(self, grace: float) -> None:
        """Refuse new calls and wait up to `grace` seconds for the calls in progress."""
        self._server.stop(grace).wait()
