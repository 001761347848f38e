"""Calling the agent function once, sync or async, with a time limit, without ever raising.

Sync agents run on a daemon thread of their own per call, not on a pool: a call that times out
cannot be stopped, and a pool worker stuck in it would hold a concurrency slot and keep the
process from exiting. Async agents run as tasks on the runner's event loop and are cancelled
when they time out. Either way the call runs inside `ctx` (a copy of the context with the
runner's root span current), so nothing it sets leaks into the runner or into another call.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

CallOutcome = Literal["ok", "error", "timeout"]


@dataclass(frozen=True)
class CallResult:
    """What one call of the agent gave."""

    outcome: CallOutcome
    value: Any = None
    """The agent's return value (`ok` only)."""
    error: BaseException | None = None
    """The exception it raised (`error` only)."""


def is_async_agent(fn: Callable[..., Any]) -> bool:
    """Whether calling `fn` gives a coroutine to await (an `async def`, or an object with one as `__call__`)."""
    if inspect.iscoroutinefunction(fn):
        return True
    # A callable object whose `__call__` is an `async def` (looked up on the class, as calls do).
    return any(inspect.iscoroutinefunction(vars(klass).get("__call__")) for klass in type(fn).__mro__)


async def call_agent(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    ctx: contextvars.Context,
    timeout: float | None,
    on_timeout: Callable[[], None],
) -> CallResult:
    """Call `fn(*args, **kwargs)` inside `ctx`, giving up after `timeout` seconds.

    `on_timeout` runs the moment the limit is reached, before an async call is cancelled, so
    the caller can seal the call's trace before cancellation ends any of its spans.
    """
    waiter = _start_async(fn, args, kwargs, ctx) if is_async_agent(fn) else _start_thread(fn, args, kwargs, ctx)
    done, _ = await asyncio.wait({waiter}, timeout=timeout)
    if not done:
        on_timeout()
        if isinstance(waiter, asyncio.Task):
            waiter.cancel()
            waiter.add_done_callback(_consume)
        else:
            waiter.cancel()  # the thread's late result is then discarded
        return CallResult("timeout")
    if isinstance(waiter, asyncio.Task):
        if waiter.cancelled():  # the agent cancelled itself
            return CallResult("error", error=asyncio.CancelledError("the agent's task was cancelled"))
        exc = waiter.exception()
        return CallResult("error", error=exc) if exc is not None else CallResult("ok", value=waiter.result())
    value, exc = waiter.result()
    return CallResult("error", error=exc) if exc is not None else CallResult("ok", value=value)


def _consume(task: asyncio.Future[Any]) -> None:
    # Retrieve the outcome of a cancelled call so asyncio does not log "exception never retrieved".
    if not task.cancelled():
        task.exception()


def _start_async(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], ctx: contextvars.Context
) -> asyncio.Task[Any]:
    async def call() -> Any:
        return await fn(*args, **kwargs)

    return asyncio.get_running_loop().create_task(call(), context=ctx)


def _start_thread(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], ctx: contextvars.Context
) -> asyncio.Future[tuple[Any, BaseException | None]]:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[tuple[Any, BaseException | None]] = loop.create_future()

    def work() -> None:
        try:
            value = ctx.run(fn, *args, **kwargs)
        except BaseException as exc:  # every failure of the agent is an `error` entry, whatever it raised
            _deliver(loop, future, None, exc)
        else:
            _deliver(loop, future, value, None)

    threading.Thread(target=work, name="evaltrace-agent-call", daemon=True).start()
    return future


def _deliver(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[tuple[Any, BaseException | None]],
    value: Any,
    exc: BaseException | None,
) -> None:
    def settle() -> None:
        # A pair, not set_exception: futures refuse some exceptions (StopIteration, SystemExit...).
        if not future.done():  # else it timed out (was cancelled) meanwhile
            future.set_result((value, exc))

    with contextlib.suppress(RuntimeError):  # the loop is closed: the run finished while this call was still going
        loop.call_soon_threadsafe(settle)
