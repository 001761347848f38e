"""One module per span convention, and the framework envelopes they share.

Each convention gives an `extract(span)` that reads what one span says into a `NormalizedSpan`,
or None when the span is not written in that convention. `CONVENTIONS` lists them in the order
they are tried (most specific first): OpenInference, OpenLLMetry, GenAI v1.37+, GenAI per-message
events, pydantic-ai's own attributes, Google ADK's vendor content attributes, then bare
`gen_ai.operation.name` structure. The first that returns a result wins. A new convention is one
module here and one row below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

from evaltrace.collector.registry import Registry

if TYPE_CHECKING:
    from evaltrace.collector.runfiles.spans import Span
    from evaltrace.collector.traces._normalized import NormalizedSpan

Extractor: TypeAlias = "Callable[[Span], NormalizedSpan | None]"

CONVENTIONS: Registry[Extractor] = Registry("span convention")
"""The extractors by convention name, in detection order (their modules imported on first use)."""

for _name, _ref in (
    ("openinference", "openinference:extract"),
    ("openllmetry", "openllmetry:extract"),
    ("genai", "genai:extract"),
    ("genai_events", "genai:extract_events"),
    ("pydantic_ai", "genai:extract_pydantic_ai"),
    ("adk", "adk:extract"),
    ("structure", "structure:extract"),
):
    CONVENTIONS.lazy(_name, f"{__name__}.{_ref}")
