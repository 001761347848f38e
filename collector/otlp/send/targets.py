"""Where `--send-results [KIND:]URL` sends scores: the kinds of results backend, by name.

- `otlp` (the default; `http://...` alone means `otlp:http://...`): `gen_ai.evaluation.result`
  events as OTLP log records (`results.ResultsSender`), for a Collector or any backend taking logs.
- `phoenix`: span annotations on the scored traces' root spans (`annotations.PhoenixAnnotations`).
- `langfuse`: scores on the scored traces (`annotations.LangfuseScores`).

Every kind's sink is a `results.ResultsSink`, so the scoring side neither knows nor asks which one
it writes to.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.send.exporters import DEFAULT_TIMEOUT, OtlpTarget
from evaltrace.collector.otlp.send.results import ResultsSink
from evaltrace.collector.terminal import printable

OPTION = "--send-results"


class ResultsTarget(BaseModel):
    """A results backend: its kind and URL (and, for `otlp`, how to send)."""

    model_config = ConfigDict(frozen=True)

    kind: str
    """One of `RESULT_KINDS`."""
    url: str
    otlp: OtlpTarget | None = None
    """The OTLP settings (`--protocol`, `--header`) of kind `otlp`."""
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0)
    """Seconds one request may take, retries included."""


def _otlp(target: ResultsTarget) -> ResultsSink:
    from evaltrace.collector.otlp.send.results import ResultsSender

    return ResultsSender(target.otlp or OtlpTarget(endpoint=target.url, option=OPTION, timeout=target.timeout))


def _phoenix(target: ResultsTarget) -> ResultsSink:
    from evaltrace.collector.otlp.send.annotations import PhoenixAnnotations

    return PhoenixAnnotations(target.url, OPTION, target.timeout)


def _langfuse(target: ResultsTarget) -> ResultsSink:
    from evaltrace.collector.otlp.send.annotations import LangfuseScores

    return LangfuseScores(target.url, OPTION, target.timeout)


_OPENERS: dict[str, Callable[[ResultsTarget], ResultsSink]] = {
    "otlp": _otlp,
    "phoenix": _phoenix,
    "langfuse": _langfuse,
}
RESULT_KINDS = tuple(_OPENERS)


def split_kind(value: str) -> tuple[str, str]:
    """`[KIND:]URL` as (kind, URL); a bare `http(s)://` URL is kind `otlp`.

    Raises:
        InputError: a prefix that is neither a kind nor a URL scheme (the kinds are listed).
    """
    name, sep, rest = value.partition(":")
    if sep and name.lower() in RESULT_KINDS:
        return name.lower(), rest
    if sep and name.lower() in ("http", "https"):
        return "otlp", value
    # Only the prefix is quoted back: the rest may hold user info.
    given = f"unknown kind {printable(name[:40])!r}" if sep else "no kind and no http(s):// scheme"
    raise InputError(
        f"{OPTION}: {given}: expected [KIND:]URL, KIND one of {', '.join(RESULT_KINDS)} "
        "(e.g. phoenix:http://127.0.0.1:6006; a bare http(s):// URL is otlp)"
    )


def open_results(target: ResultsTarget) -> ResultsSink:
    """The sink of `target`'s kind (nothing is sent yet; its URL and key are checked).

    Raises:
        InputError: the URL or the key's transport is refused, or a key the kind needs is missing.
    """
    return _OPENERS[target.kind](target)
