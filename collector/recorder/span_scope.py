"""`SpanScope`: the context-manager plumbing `agent_run` and `tool_call` share.

Each is a callable-looking class whose instance opens one span per `with` (sync or async) and
hands out a handle. Only the span differs, so each subclass gives `_open()`, a context manager
that makes the span (`started_span`) and yields the handle; this class stacks the open ones so
one instance can be entered again (nested or from a decorator) without its scopes mixing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from types import TracebackType
from typing import Any, Generic, TypeVar

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

_H = TypeVar("_H")


def as_text(value: Any) -> str:
    """A recorded value as text: text as is, anything else as JSON (else `str`)."""
    if isinstance(value, str):
        return value
    try:  # structured output (a dict, a pydantic model dumped by the caller): kept as JSON text
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)


def record_error(span: Span, exc: BaseException) -> str:
    """Mark `span` failed by `exc`: an `exception` event, `error.type` and status ERROR; the status text."""
    message = f"{type(exc).__name__}: {exc}"
    span.record_exception(exc)
    span.set_attribute("error.type", type(exc).__qualname__)
    span.set_status(Status(StatusCode.ERROR, message))
    return message


@contextmanager
def started_span(
    tracer_name: str, provider: trace.TracerProvider | None, name: str, attributes: dict[str, str]
) -> Iterator[Span]:
    """An INTERNAL span, current while inside; an exception raised inside is its error and propagates."""
    tracer = trace.get_tracer(tracer_name, tracer_provider=provider)
    with tracer.start_as_current_span(
        name, kind=SpanKind.INTERNAL, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield span
        except BaseException as exc:
            record_error(span, exc)
            raise


class SpanScope(Generic[_H]):
    """A reusable `with` / `async with` scope over the context managers `_open()` returns."""

    def __init__(self) -> None:
        self._active: list[AbstractContextManager[_H]] = []

    def _open(self) -> AbstractContextManager[_H]:
        raise NotImplementedError

    def __enter__(self) -> _H:
        context = self._open()
        handle = context.__enter__()
        self._active.append(context)
        return handle

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return self._active.pop().__exit__(exc_type, exc, tb)

    async def __aenter__(self) -> _H:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return self.__exit__(exc_type, exc, tb)
