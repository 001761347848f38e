"""The `evaltrace` command: a Typer app with one error boundary.

Exit codes (README.md, "Score"): 0 the gate passed (or the command succeeded), 1 the gate failed,
2 bad input or usage, as one `Error: ...` line on stderr with no traceback. Anything else that
escapes is a bug and keeps its traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption
from typer.models import CommandFunctionType

if TYPE_CHECKING:
    # Typer 0.29 ships its own copy of click: its commands take this context type.
    from typer._click.core import Context

from evaltrace.collector._terminal import printable
from evaltrace.collector.errors import EvaltraceError

# The CLI's pyarrow buffers come from the C library's malloc rather than the wheels' default
# mimalloc: reading span files was 15% faster and peaked 80 MB lower (benchmarks/RESULTS.md).
# Set before pyarrow is first imported (commands import it lazily); a user's choice wins.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")


class _OutputClosed(Exception):
    """Whatever read stdout went away (`evaltrace traces runs | head`)."""


class _Argument(TyperArgument):
    """A positional argument shown by its metavar alone, as Unix usage lines name them."""

    def display_type_rich(self, ctx: Context) -> str | None:
        # Typer 0.29 prints the Python annotation (`PATH <list[str]>`): the metavar says it.
        return None

    def get_usage_pieces(self, ctx: Context) -> list[str]:
        # `PATH...` and `[PATH]...` as in POSIX usage, not Typer 0.29's `{PATH}...`.
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return [name + ("..." if self.nargs != 1 else "")]


class _CommandBehaviour:
    """What every evaltrace command (and the group) changes in Typer's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Typer builds its own argument objects with no way to pass a class; `_Argument` adds no
        # state, only display, so each one is given that class in place.
        for param in self.params:  # type: ignore[attr-defined]
            if type(param) is TyperArgument:
                param.__class__ = _Argument

    def get_help_option(self, ctx: Context) -> TyperOption | None:
        # Typer 0.29 prints a flag's Python type beside it (`--help <bool>`); a flag takes no
        # value, so its metavar is empty, as on every flag evaltrace declares.
        option: TyperOption | None = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.metavar = ""
        return option

    def invoke(self, ctx: Context) -> Any:
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except BrokenPipeError:
            # Typer answers a closed stdout with exit 1, which means "the gate failed" here.
            raise _OutputClosed from None


class _Command(_CommandBehaviour, TyperCommand):
    pass


class _Group(_CommandBehaviour, TyperGroup):
    pass


class _App(typer.Typer):
    """`typer.Typer` whose commands (and itself) behave as `_CommandBehaviour` says."""

    def command(self, name: str | None = None, **kwargs: Any) -> Callable[[CommandFunctionType], CommandFunctionType]:
        kwargs.setdefault("cls", _Command)
        return super().command(name, **kwargs)


# Locals are hidden in tracebacks: trace contents can be sensitive.
app = _App(
    name="evaltrace",
    cls=_Group,
    help="Record agent spans to Parquet and score them offline.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)


def _version_line() -> str:
    from importlib.metadata import version as dist_version

    return f"evaltrace {dist_version('evaltrace')}"


def _print_version(wanted: bool) -> None:
    if wanted:
        typer.echo(_version_line())
        raise typer.Exit()


@app.callback()
def _root(
    _version: Annotated[
        bool,
        typer.Option(
            "--version",
            metavar="",
            is_eager=True,
            callback=_print_version,
            help="Print the evaltrace version and exit.",
        ),
    ] = False,
) -> None:
    """Record agent spans to Parquet and score them offline."""


@app.command()
def version() -> None:
    """Print the evaltrace version."""
    typer.echo(_version_line())


# Command modules register themselves on `app` when imported.
from evaltrace.cli import _collect, _run, _runs, _score, _scorers_cmd, _traces  # noqa: E402, F401

_INTERRUPTED = 130
"""The exit code after Ctrl-C (128 + SIGINT), as shells report it."""
_OUTPUT_CLOSED = 141
"""The exit code when stdout's reader went away (128 + SIGPIPE), as shells report `cat` or `grep`
killed by it: neither a failed gate (1) nor bad input (2)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    try:
        result = app(args=list(argv) if argv is not None else None, prog_name="evaltrace", standalone_mode=False)
    except EvaltraceError as exc:
        _error(str(exc))
        return 2
    except typer.TyperException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            print(exc.format_message(), file=sys.stderr)  # the help text itself
        else:
            _error(exc.format_message())
        return 2
    except (typer.Abort, KeyboardInterrupt):
        result = _INTERRUPTED
    except _OutputClosed:
        _discard_stdout()
        return _OUTPUT_CLOSED
    if result == _INTERRUPTED:
        # Typer turns Ctrl-C inside a command into a silent 130; no command returns 130 itself.
        _error("interrupted")
    return result if isinstance(result, int) else 0


def _error(message: str) -> None:
    # One line: a multi-line message is folded so scripts can rely on `Error:` being the line.
    # Messages quote file content (ids, keys, values): control characters in them are shown, not run.
    print("Error: " + printable(" ".join(message.split())), file=sys.stderr)


def _discard_stdout() -> None:
    # What is still buffered for the closed pipe would fail again when Python flushes it at exit.
    try:
        target = sys.stdout.fileno()
    except (OSError, ValueError):  # not a real file (an in-process caller's capture): nothing to do
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, target)
    os.close(devnull)


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
