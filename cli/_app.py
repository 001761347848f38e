"""The Typer app every command is registered on, and what evaltrace changes in Typer's commands.

Kept apart from `main.py` (which registers the commands and holds the error boundary) so a
command module never needs `main`, and `main` imports the commands with no cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption
from typer.models import CommandFunctionType

if TYPE_CHECKING:
    # Typer 0.29 ships its own copy of click: its commands take this context type.
    from typer._click.core import Context


class OutputClosed(Exception):
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
            raise OutputClosed from None


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
