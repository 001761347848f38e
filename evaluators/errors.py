"""The evaluators' own errors, both `InputError`s (exit 2 in the CLI).

`InputError` and `EvaltraceError` themselves are imported from `evaltrace.collector.errors`, their
one home.
"""

import difflib
from collections.abc import Iterable

from evaltrace.collector.errors import InputError


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest choice to a mistyped name, or `""` when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


class UnknownScorerError(InputError):
    """A scorer name that is not registered."""


class SpecError(InputError):
    """A malformed spec file; the message names the file, case and key."""


__all__ = ["SpecError", "UnknownScorerError", "did_you_mean"]
