"""The `evaltrace` command: every command registered on one Typer app, behind one error boundary.

Exit codes (docs/scoring.md, "Exit codes"): 0 the gate passed (or the command succeeded), 1 the gate failed,
2 bad input or usage, as one `Error: ...` line on stderr with no traceback. Anything else that
escapes is a bug and keeps its traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

from evaltrace.collector.errors import EvaltraceError
from evaltrace.collector.terminal import inline

if TYPE_CHECKING:
    import typer

# The CLI's pyarrow buffers come from the C library's malloc rather than the wheels' default
# mimalloc: reading span files was 15% faster and peaked 80 MB lower (benchmarks/RESULTS.md).
# Set before pyarrow is first imported (commands import it lazily); a user's choice wins.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")


@cache
def _app() -> typer.Typer:
    """The app with every command registered, in the order `evaltrace --help` lists them.

    The commands (Typer, pydantic, pyarrow: a few hundred ms) are imported here, inside `main`'s error
    boundary rather than when this module is, so a Ctrl-C while they load is an interruption, not a traceback.
    """
    from evaltrace.cli import calibrate as calibrate_command
    from evaltrace.cli import clean, compact, compare, doctor, history, runs, schema, score, scorers, traces, version
    from evaltrace.cli import collect as collect_command
    from evaltrace.cli import import_ as import_command
    from evaltrace.cli import labels as labels_command
    from evaltrace.cli import replay as replay_command
    from evaltrace.cli import review as review_command
    from evaltrace.cli import run as run_command
    from evaltrace.cli._app import app
    from evaltrace.cli._scoring import EXIT_CODES_HELP

    app.callback()(version.root)
    app.command()(version.version)
    app.command()(doctor.doctor)
    app.command(epilog=EXIT_CODES_HELP)(score.score)
    app.command()(schema.schema)
    app.command(epilog=EXIT_CODES_HELP)(run_command.run)
    app.command(epilog=compare.COMPARE_EXIT_CODES)(compare.compare)
    app.command(epilog=history.HISTORY_EXIT_CODES)(history.history)
    app.command()(runs.runs)
    app.command()(clean.clean)
    app.command()(compact.compact)
    app.command("scorers")(scorers.scorers)
    app.command("traces")(traces.traces_command)
    app.command("show")(traces.show_command)
    app.command("replay")(replay_command.replay)
    app.command("import")(import_command.import_command)
    app.command("collect")(collect_command.collect)
    app.command("review")(review_command.review)
    app.add_typer(labels_command.labels_app)
    app.command("calibrate", epilog=calibrate_command.CALIBRATE_EXIT_CODES)(calibrate_command.calibrate)
    return app


_INTERRUPTED = 130
"""The exit code after Ctrl-C (128 + SIGINT), as shells report it."""
_OUTPUT_CLOSED = 141
"""The exit code when stdout's reader went away (128 + SIGPIPE), as shells report `cat` or `grep`
killed by it: neither a failed gate (1) nor bad input (2)."""


# Options whose value may be left out, and what they then mean: `history --json` prints the JSON
# (CONTRACT: `evaltrace history [--json]`) while `--json FILE` still writes a file, as everywhere
# else. Typer's parser has no optional values, so the missing one is filled in before parsing.
_OPTIONAL_VALUES = {("history", "--json"): "-"}


def _fill_optional_values(args: list[str]) -> list[str]:
    command = next((a for a in args if not a.startswith("-")), None)
    filled: list[str] = []
    for i, arg in enumerate(args):
        filled.append(arg)
        default = _OPTIONAL_VALUES.get((command or "", arg))
        following = args[i + 1] if i + 1 < len(args) else None
        if default is not None and (following is None or (following.startswith("-") and following != "-")):
            filled.append(default)
    return filled


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    args = _fill_optional_values(list(argv) if argv is not None else sys.argv[1:])
    try:
        import typer

        from evaltrace.cli._app import OutputClosed

        result = _app()(args=args, prog_name="evaltrace", standalone_mode=False)
    except EvaltraceError as exc:
        _error(str(exc))
        return 2
    except KeyboardInterrupt:  # also while the commands are still being imported
        result = _INTERRUPTED
    except typer.Abort:
        result = _INTERRUPTED
    except typer.TyperException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            print(exc.format_message(), file=sys.stderr)  # the help text itself
        else:
            _error(exc.format_message())
        return 2
    except OutputClosed:
        _discard_stdout()
        return _OUTPUT_CLOSED
    if result == _INTERRUPTED:
        # Typer turns Ctrl-C inside a command into a silent 130; no command returns 130 itself.
        _error("interrupted")
    return result if isinstance(result, int) else 0


def _error(message: str) -> None:
    # One line: a multi-line message is folded so scripts can rely on `Error:` being the line.
    # Messages quote file content (ids, keys, values): control characters in them are shown, not run.
    print("Error: " + inline(" ".join(message.split())), file=sys.stderr)


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
