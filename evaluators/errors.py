"""Errors raised by the evaluators (re-exported from the collector so both share one base)."""

from evaltrace.collector.errors import EvaltraceError, InputError


class UnknownScorerError(InputError):
    """A scorer name that is not registered."""


class SpecError(InputError):
    """A malformed spec file; the message names the file, case and key."""


__all__ = ["EvaltraceError", "InputError", "SpecError", "UnknownScorerError"]
