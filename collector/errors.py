"""Errors the library raises for users' mistakes.

The CLI turns every `EvaltraceError` into one `Error: ...` line and exit code 2; anything else
is a bug and keeps its traceback. Messages name the file, case or field and say what to try.
"""


class EvaltraceError(Exception):
    """Base of every error evaltrace reports to the user without a traceback."""


class InputError(EvaltraceError):
    """Bad input: a missing or unreadable file, a wrong schema, a malformed spec or option."""
