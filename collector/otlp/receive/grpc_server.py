"""OTLP/gRPC: the trace and logs services' `Export`.

Without the configured bearer token a call is answered UNAUTHENTICATED by an interceptor, from its
metadata, before its message is received or parsed: the refusal is a streaming handler that never
reads its requests. gRPC itself decompresses (gzip) and enforces the size limit on the
decompressed message (RESOURCE_EXHAUSTED, answered by gRPC's core: the call never reaches this
module, so it is not counted among the refusals). The handlers take the message as bytes and parse
it here, so a message that is not an export request is INVALID_ARGUMENT with the decoder's reason
(a deserializer registered with gRPC would make it INTERNAL, a server fault the client may retry).
Here too: UNAVAILABLE (retryable for OTLP clients) when the queue is full or the receiver is
stopping, and otherwise the export response, with a partial success when items were rejected.
Each refusal is noted in the intake's `RefusalLog`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import NoReturn

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from pydantic import SecretStr

from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.receive.config import Address, ReceiverConfig, bearer_matches
from evaltrace.collector.otlp.receive.handling import Intake, Refused, Response, parse_body
from evaltrace.collector.otlp.receive.refusals import RefusalLog
from evaltrace.collector.otlp.receive.workqueue import Signal

SERVICES = {
    Signal.TRACES: trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name,
    Signal.LOGS: logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"].full_name,
}
"""The OTLP service of each signal; each has one method, `Export`."""


class _Export:
    """What both services do with a request's bytes."""

    def __init__(self, signal: Signal, intake: Intake, stopping: threading.Event) -> None:
        self.signal, self.intake, self.stopping = signal, intake, stopping

    def __call__(self, message: bytes, context: grpc.ServicerContext) -> Response:
        if self.stopping.is_set():
            self.intake.count(refused_requests=1)
            _abort(self.intake.refusals, context, grpc.StatusCode.UNAVAILABLE, "the receiver is shutting down")
        try:
            request = parse_body(self.signal, message, is_json=False)
        except InputError as exc:
            self.intake.count(bad_requests=1)
            _abort(self.intake.refusals, context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        try:
            return self.intake.accept(self.signal, request)
        except Refused as exc:
            _abort(self.intake.refusals, context, grpc.StatusCode.UNAVAILABLE, str(exc))
        raise AssertionError("not reached: abort raises")


def _abort(refusals: RefusalLog, context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    refusals.note(f"gRPC {code.name}", message)
    context.abort(code, message)
    raise AssertionError("not reached: abort raises")


def _serialize(response: Response) -> bytes:
    data: bytes = response.SerializeToString()
    return data


def _services(intake: Intake, stopping: threading.Event) -> list[grpc.GenericRpcHandler]:
    """The two services, their `Export` taking the message unparsed (`request_deserializer=None`)."""
    return [
        grpc.method_handlers_generic_handler(
            service,
            {"Export": grpc.unary_unary_rpc_method_handler(_Export(signal, intake, stopping), None, _serialize)},
        )
        for signal, service in SERVICES.items()
    ]


class _TokenCheck(grpc.ServerInterceptor):  # type: ignore[misc]
    """Lets a call through only with `authorization: Bearer <token>` in its metadata."""

    def __init__(self, token: SecretStr, refusals: RefusalLog) -> None:
        self._token = token

        def refuse(requests: Iterator[bytes], context: grpc.ServicerContext) -> None:
            # A stream-request handler: gRPC hands it an iterator that reads the message only if asked.
            _abort(refusals, context, grpc.StatusCode.UNAUTHENTICATED, "a valid bearer token is required")

        self._refuse = grpc.stream_unary_rpc_method_handler(refuse)

    def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler], details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        given = dict(details.invocation_metadata or ()).get("authorization", "")
        if bearer_matches(self._token, str(given).encode("utf-8", "replace")):
            return continuation(details)
        return self._refuse


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
            interceptors=[_TokenCheck(config.token, intake.refusals)] if config.token is not None else [],
            handlers=_services(intake, stopping),
        )
        port = self._server.add_insecure_port(str(address))
        self.address = Address(address.host, port)

    def start(self) -> None:
        """Accept calls."""
        self._server.start()

    def stop(self, grace: float) -> None:
        """Refuse new calls and wait up to `grace` seconds for the calls in progress."""
        self._server.stop(grace).wait()
