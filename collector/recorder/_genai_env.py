"""Environment defaults evaltrace sets for recording: GenAI content capture on, logs recorded.

Evaluation needs what the agent was asked, what its tools received and returned, and what it
answered; GenAI instrumentations leave message content out unless
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` says otherwise. So when evaltrace records and
the user set nothing, it sets that variable (the files stay local):

- on the latest GenAI conventions (`opentelemetry-util-genai`: with `OTEL_SEMCONV_STABILITY_OPT_IN`
  naming `gen_ai_latest_experimental`, and always from util-genai 1.1, whose
  `is_experimental_mode()` is always true) to `SPAN_ONLY` (`true` is rejected there): JSON messages
  on the model spans, which rebuild completely without a second copy in log records;
- otherwise (v1.30 conventions) to `true`: content comes as log records (GenAI events), which the
  logs exporter records beside the spans (util-genai warns once that `true` is not one of its modes).

Frameworks with a content switch of their own get it turned on the same way
(`FRAMEWORK_CONTENT_SWITCHES`), unless the user set it or set the GenAI variable to no content.
`EVALTRACE_CAPTURE_CONTENT=0` leaves the variables alone. Instrumentations read them when they
instrument, so they are set first (the distro runs before any instrumentor; `record()` before the
application instruments its clients).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

CAPTURE_CONTENT_VAR = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_OPT_IN_VAR = "OTEL_SEMCONV_STABILITY_OPT_IN"
_LATEST = "gen_ai_latest_experimental"
_OFF = {"0", "false", "no", "off"}
# The GenAI variable's values that ask for no content (util-genai's mode `NO_CONTENT` too).
_CAPTURE_OFF = _OFF | {"no_content"}

FRAMEWORK_CONTENT_SWITCHES: dict[str, str] = {
    # Microsoft Agent Framework (`agent_framework.observability`) puts messages, tool arguments and
    # tool results on its spans only with this; it reads the variable when `agent_framework` is imported.
    "ENABLE_SENSITIVE_DATA": "true",
    # The `anthropic` SDK's own spans hold messages, tool calls and results only in content mode; each
    # client reads the variable when it is made (`anthropic._tracing.env_open_telemetry`).
    "ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE": "content",
}
"""Framework-specific content switches (off by default) and the value that turns each on."""


def latest_genai_conventions(environ: MutableMapping[str, str] | None = None) -> bool:
    """Whether `OTEL_SEMCONV_STABILITY_OPT_IN` opts into the latest experimental GenAI conventions."""
    env = os.environ if environ is None else environ
    return _LATEST in {part.strip() for part in env.get(_OPT_IN_VAR, "").split(",")}


def util_genai_latest() -> bool:
    """Whether the installed `opentelemetry-util-genai` puts instrumentations on the latest conventions.

    Asks util-genai itself (`is_experimental_mode`), which is what openai-v2 asks; False when it
    is not installed or its answer cannot be had.
    """
    try:
        from opentelemetry.util.genai.utils import is_experimental_mode
    except Exception:  # not installed, or an incompatible version: the env var decides
        return False
    try:
        return bool(is_experimental_mode())
    except Exception:
        return False


def capture_content_value(environ: MutableMapping[str, str] | None = None) -> str:
    """The content-capture value that makes the instrumentations in use record content evaltrace rebuilds."""
    return "SPAN_ONLY" if latest_genai_conventions(environ) or util_genai_latest() else "true"


def apply_capture_default(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Turn GenAI content capture on unless the user chose (or `EVALTRACE_CAPTURE_CONTENT=0`); return what was set.

    The GenAI variable and each framework switch are set only where unset. A GenAI variable the
    user set to a no-content value keeps the framework switches off too: it states the user's choice.
    """
    env = os.environ if environ is None else environ
    if env.get("EVALTRACE_CAPTURE_CONTENT", "").strip().lower() in _OFF:
        return {}
    applied: dict[str, str] = {}
    chosen = env.get(CAPTURE_CONTENT_VAR, "").strip()
    if not chosen:
        applied[CAPTURE_CONTENT_VAR] = env[CAPTURE_CONTENT_VAR] = capture_content_value(env)
    elif chosen.lower() in _CAPTURE_OFF:
        return applied
    for name, value in FRAMEWORK_CONTENT_SWITCHES.items():
        if not env.get(name, "").strip():
            applied[name] = env[name] = value
    return applied
