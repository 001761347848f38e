"""Errors raised by the evaluators (re-exported from the collector so both share one base)."""

import difflib
from collections.abc import Iterable

from evaltrace.collector.errors import EvaltraceError, InputError


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest choice to a mistyped name, or `""` when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


class UnknownScorerError(InputError):
    """A scorer name that is not registered."""


class SpecError(InputError):
    """A malformed spec file; the message names the file, case and key."""


__all__ = ["EvaltraceError", "InputError", "SpecError", "UnknownScorerError", "did_you_mean"]
