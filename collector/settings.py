"""Settings read from `EVALTRACE_*` variables and given options, in one place.

A settings model lists its variables as its fields' aliases (`validation_alias=env("NAME", ...)`,
first set one wins); keyword arguments by field name (the CLI's options, a library caller's
arguments) win over the environment, which wins over the defaults. A blank variable counts as
unset, as a shell's `VAR=` means. A bad value is one `InputError` naming the variable or the
option that gave it (exit 2 in the CLI), never a traceback.

Not read here, on purpose: the recorder's variables (`collector/recorder/exporter.py`,
`redact.py`, `_genai_env.py`), read in the application's process, where a bad value is logged
and skipped because recording must never crash the application; and the `OTEL_*` variables the
OTel SDK reads itself.

A settings model is a plain frozen pydantic model: its few scalar fields need no more than picking
each field's first set variable and validating the values as pydantic does any input
(pydantic-settings, which did that before, was a tenth of a warm `evaltrace score`'s imports).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo

from evaltrace.collector.errors import InputError


def env(field: str, *variables: str) -> AliasChoices:
    """The alias of a field given as `field=` (an option) or by the first set of `variables`."""
    return AliasChoices(field, *variables)


class EnvSettings(BaseModel):
    """A settings model read from the environment; `from_env` is the one way to build one from it.

    Built any other way (`model_validate(fields)` of settings handed over, as to Ray's judge actors)
    a model is what it is given: no key comes from the receiving process's environment.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, validate_default=True)

    label: ClassVar[str] = "setting"
    """What an error message calls one of these (`judge setting EVALTRACE_JUDGE_TIMEOUT: ...`)."""
    options: ClassVar[dict[str, str]] = {}
    """The command-line option of a field, named by messages about a value given as an option."""
    hints: ClassVar[dict[str, str]] = {}
    """What to give instead, for a field whose bad variable is quoted (`NAME='x': hint`) in its message."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **given: Any) -> Self:
        """Settings from `given` (by field name; `None` means not given), then `environ`, then the defaults.

        Raises:
            InputError: a value is malformed; the message names its variable or option.
            TypeError: a keyword is not a field (a programming error).
        """
        unknown = sorted(set(given) - set(cls.model_fields))
        if unknown:
            raise TypeError(f"unknown {cls.label} {unknown[0]!r}; valid: {', '.join(sorted(cls.model_fields))}")
        chosen = {name: value for name, value in given.items() if value is not None}
        variables = os.environ if environ is None else environ
        try:
            return cls.model_validate({**cls.environment_values(variables), **chosen})
        except ValidationError as exc:
            raise cls._input_error(exc, chosen, variables) from None

    @classmethod
    def environment_values(cls, environ: Mapping[str, str] | None) -> dict[str, Any]:
        """The fields `environ` (`os.environ` when `None`) sets, by field name, as read (not validated).

        Each field's first variable set (names matched exactly) wins; a blank one counts as unset.
        """
        variables = os.environ if environ is None else environ
        found: dict[str, Any] = {}
        for name, info in cls.model_fields.items():
            value = next((text for var in _variables(info) if (text := variables.get(var, "").strip())), None)
            if value is not None:
                found[name] = value
        return found

    @classmethod
    def _input_error(cls, exc: ValidationError, given: Mapping[str, Any], environ: Mapping[str, str]) -> InputError:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        info = cls.model_fields.get(field)
        if field in given or info is None:
            return InputError(f"{cls.label} {cls.options.get(field, f'{field}=')}: {first['msg']}")
        variable = next((name for name in _variables(info) if environ.get(name, "").strip()), field)
        if field in cls.hints:
            return InputError(f"{variable}={environ.get(variable, '').strip()!r}: {cls.hints[field]}")
        return InputError(f"{cls.label} {variable}: {first['msg']}")


def _variables(info: FieldInfo) -> list[str]:
    alias = info.validation_alias
    choices = alias.choices if isinstance(alias, AliasChoices) else []
    return [choice for choice in choices[1:] if isinstance(choice, str)]


class Environment(EnvSettings):
    """The `EVALTRACE_*` variables shared by the cache, the score store and the engines."""

    cache_dir: Path | None = Field(default=None, validation_alias=env("cache_dir", "EVALTRACE_CACHE_DIR"))
    """The cache folder (`cachedir.cache_root` applies the default)."""
    store: Path | None = Field(default=None, validation_alias=env("store", "EVALTRACE_STORE"))
    """The score store when `--store` is not given."""


class RaySettings(EnvSettings):
    """The `EVALTRACE_RAY_*` variables of `--engine ray`: a model of their own, read only by a Ray run.

    Apart from `Environment` so that a bad Ray variable stops Ray runs only, not the cache or the store.
    """

    judge_actors: int | None = Field(
        default=None, ge=1, validation_alias=env("judge_actors", "EVALTRACE_RAY_JUDGE_ACTORS")
    )
    """Judge actors (`None`: one per few cluster CPUs)."""
    max_restarts: int = Field(default=3, ge=0, validation_alias=env("max_restarts", "EVALTRACE_RAY_MAX_RESTARTS"))
    """Times Ray re-runs a scoring task whose worker or node died, and restarts a judge actor whose process died."""

    label: ClassVar[str] = "Ray setting"
    hints: ClassVar[dict[str, str]] = {
        "judge_actors": "give the number of judge actors, at least 1",
        "max_restarts": "give how many times a task or judge actor may be restarted, 0 or more",
    }
