"""`SpanScope`: the context-manager plumbing `agent_run` and `tool_call` share.

Each is a callable-looking class whose instance opens one span per `with` (sync or async) and
hands out a handle. Only the span differs, so each subclass gives `_open()`, a context manager
that makes the span and yields the handle; this class stacks the open ones so one instance can
be entered again (nested or from a decorator) without its scopes mixing.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from types import TracebackType
from typing import Generic, TypeVar

_H = TypeVar("_H")


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
