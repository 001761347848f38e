"""The evaluators' own errors, both `InputError`s (exit 2 in the CLI).

`InputError` and `EvaltraceError` themselves are imported from `evaltrace.collector.errors`, their
one home.
"""

from evaltrace.collector.errors import InputError


class UnknownScorerError(InputError):
    """A scorer name that is not registered."""


class SpecError(InputError):
    """A malformed spec file; the message names the file, case and key."""


__all__ = ["SpecError", "UnknownScorerError"]
