"""Evaluation results as Phoenix span annotations and Langfuse scores, through each backend's REST API.

Neither backend takes OTLP log records (Phoenix answers 405; Langfuse ingests OTLP traces only),
so `score --send-results phoenix:URL` / `langfuse:URL` write what each one shows next to a trace:

- Phoenix: `POST /v1/span_annotations?sync=true` (batches of `PHOENIX_BATCH`), one annotation per
  (trace, scorer) on the root span, `annotator_kind` LLM for a judge's verdict else CODE, with the
  identifier `evaltrace`. `sync=true` makes Phoenix answer 404 for a span it does not hold instead
  of dropping the annotation later. `PHOENIX_API_KEY`, when set, is a bearer token.
- Langfuse: `POST /api/public/scores`, one score per (trace, scorer) with the OTel trace id as the
  Langfuse trace id: the value as NUMERIC, or the label as CATEGORICAL when there is no value. The
  score `id` is derived from trace and scorer. Basic auth from `LANGFUSE_PUBLIC_KEY` / `_SECRET_KEY`.

Both upsert on what identifies a result (Phoenix: name, span, identifier, so a person's annotation
of the same name is left alone; Langfuse: the score id), so scoring again, or a request retried
after a lost answer (`rest.RestClient`), adds nothing twice. Both are checked with a request that
needs the key before any scoring, so a wrong URL or key stops the command early.
"""

from __future__ import annotations

import base64
import hashlib
import os
from typing import Any

from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.send.exporters import shown_endpoint
from evaltrace.collector.otlp.send.rest import RestClient
from evaltrace.collector.otlp.send.results import EvaluationResult, ResultsSink
from evaltrace.collector.terminal import plural

PHOENIX_BATCH = 100
PHOENIX_IDENTIFIER = "evaltrace"
_LANGFUSE_OTEL_PATH = "/api/public/otel"


class _RestResults(ResultsSink):
    """A REST backend's results: one `RestClient`, and what a failed request leaves undelivered."""

    def __init__(self, client: RestClient) -> None:
        super().__init__(client, shown_endpoint(client.base))
        self._client = client

    def lost(self, count: int) -> str:
        """What a failed request leaves undelivered, for its error line."""
        before = f" ({self.sent} were delivered before)" if self.sent else ""
        return f"{plural(count, self.unit)} not delivered{before}"


class PhoenixAnnotations(_RestResults):
    """Results as annotations of the scored traces' root spans in Phoenix (see the module docstring)."""

    unit = "span annotation"
    batch_size = PHOENIX_BATCH
    skip_note = "their trace has no root span to annotate"

    def __init__(self, url: str, option: str, timeout: float) -> None:
        key = os.environ.get("PHOENIX_API_KEY", "").strip()
        auth = {"Authorization": f"Bearer {key}"} if key else None
        super().__init__(RestClient(url, option, timeout, auth))

    def check(self) -> None:
        """List one project: Phoenix answers, and takes the key when it asks for one."""
        self._client.request("GET", "/v1/projects", params={"limit": 1}, lost="nothing sent", hints=_PHOENIX_HINTS)

    def accepts(self, result: EvaluationResult) -> bool:
        """A result needs the root span it annotates."""
        return result.span_id is not None

    def send(self, batch: list[EvaluationResult]) -> None:
        """One request with the batch's annotations, inserted before Phoenix answers."""
        body = {"data": [phoenix_annotation(r) for r in batch]}
        self._client.request(
            "POST", "/v1/span_annotations", body, params={"sync": "true"}, lost=self.lost(len(batch)),
            hints=_PHOENIX_HINTS,
        )  # fmt: skip


_PHOENIX_HINTS = {
    401: "is PHOENIX_API_KEY set to a key of this Phoenix?",
    404: "Phoenix must hold the scored traces first: forward them or send them with evaltrace replay",
    405: "is this the URL Phoenix serves its UI and REST API at?",
}


def phoenix_annotation(result: EvaluationResult) -> dict[str, Any]:
    """One result as the span annotation Phoenix's REST API takes."""
    metadata = {k: v for k, v in result.extra.items() if v is not None}
    if result.error_type is not None:
        metadata["error.type"] = result.error_type
    return {
        "span_id": result.span_id,
        "name": result.name,
        "annotator_kind": "LLM" if result.judged else "CODE",
        "result": {"label": result.score_label, "score": result.score_value, "explanation": result.explanation},
        "metadata": metadata,
        "identifier": PHOENIX_IDENTIFIER,
    }


class LangfuseScores(_RestResults):
    """Results as Langfuse scores on the scored traces (see the module docstring)."""

    unit = "score"

    def __init__(self, url: str, option: str, timeout: float) -> None:
        public = os.environ.get("LANGFUSE_PUBLIC_KEY", "").strip()
        secret = os.environ.get("LANGFUSE_SECRET_KEY", "").strip()
        if not public or not secret:
            raise InputError(
                f"{option} {shown_endpoint(url)}: set LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY "
                "(the Langfuse project's API keys)"
            )
        token = base64.b64encode(f"{public}:{secret}".encode()).decode("ascii")
        base = url.rstrip("/").removesuffix(_LANGFUSE_OTEL_PATH)  # the OTLP endpoint given: its API is at that host
        super().__init__(RestClient(base, option, timeout, {"Authorization": f"Basic {token}"}))

    def check(self) -> None:
        """Read the project of the keys: Langfuse answers and takes them."""
        self._client.request("GET", "/api/public/projects", lost="nothing sent", hints=_LANGFUSE_HINTS)

    def send(self, batch: list[EvaluationResult]) -> None:
        """One request per score (the scores endpoint takes one; `batch_size` is 1)."""
        for result in batch:
            self._client.request(
                "POST", "/api/public/scores", langfuse_score(result), lost=self.lost(1), hints=_LANGFUSE_HINTS
            )


_LANGFUSE_HINTS = {
    401: "are LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY keys of this Langfuse project?",
    404: "is this the URL Langfuse serves its public API at (e.g. https://cloud.langfuse.com)?",
}


def langfuse_score(result: EvaluationResult) -> dict[str, Any]:
    """One result as the score Langfuse's public API takes."""
    key = hashlib.sha256(f"{result.trace_id}\0{result.name}".encode()).hexdigest()[:32]
    metadata = {"label": result.score_label, **result.extra}
    if result.error_type is not None:
        metadata["error.type"] = result.error_type
    score: dict[str, Any] = {"id": f"evaltrace-{key}", "traceId": result.trace_id, "name": result.name}
    if result.score_value is not None:
        score.update(value=result.score_value, dataType="NUMERIC")
    else:
        score.update(value=result.score_label or "not_applicable", dataType="CATEGORICAL")
    comment = result.explanation or result.error_type
    if comment:
        score["comment"] = comment
    score["metadata"] = {k: v for k, v in metadata.items() if v is not None}
    return score
