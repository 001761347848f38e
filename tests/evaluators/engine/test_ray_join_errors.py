"""A failed join of a Ray cluster is one error line that keeps the reason Ray gave.

Ray Client's server answers a failed join with a header line and its own traceback; the line that
says why is the traceback's last. (The cluster tests in tests/evaluators/engine/ray join real nodes.)
"""

from __future__ import annotations

from evaltrace.evaluators.engine.ray_engine import _reason

RAY_CLIENT_FAILURE = (
    "Initialization failure from server:\n"
    "Traceback (most recent call last):\n"
    '  File "proxier.py", line 765, in Datapath\n'
    "    raise RuntimeError(\n"
    "RuntimeError: Starting Ray client server failed. See ray_client_server_23001.err for detailed logs.\n"
)


def test_the_server_s_reason_is_kept_on_the_one_line() -> None:
    reason = _reason(ConnectionAbortedError(RAY_CLIENT_FAILURE))
    assert reason == (
        "Initialization failure from server: RuntimeError: Starting Ray client server failed."
        " See ray_client_server_23001.err for detailed logs."
    )
    assert "\n" not in reason


def test_a_one_line_or_empty_message_is_kept_or_named() -> None:
    assert _reason(ConnectionError("Could not find any running Ray instance.")) == (
        "Could not find any running Ray instance."
    )
    assert _reason(RuntimeError("")) == "RuntimeError"
