"""The options `evaltrace score` and `evaltrace run` share, declared once as groups of fields.

A command names a group as one keyword-only parameter (`gate: GateArgs`); `option_groups` shows typer the group's
fields as the command's own options, in the group's place (so each `--help` keeps its order), and
hands the command the group built from them.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import SecretStr

from evaltrace.cli import _options as opt

JUDGE = "Judge"
SELECT = "Selection"


def option_groups(command: Callable[..., None]) -> Callable[..., None]:
    """`command` with each parameter typed by a group dataclass shown to typer as that group's fields."""
    signature = inspect.signature(command, eval_str=True)
    groups: dict[str, Any] = {
        n: p.annotation for n, p in signature.parameters.items() if dataclasses.is_dataclass(p.annotation)
    }
    parameters: list[inspect.Parameter] = []
    for name, parameter in signature.parameters.items():
        group = groups.get(name)
        if group is None:
            parameters.append(parameter)
            continue
        hints = typing.get_type_hints(group, include_extras=True)
        fields = dataclasses.fields(group)
        parameters += [parameter.replace(name=f.name, default=f.default, annotation=hints[f.name]) for f in fields]

    @functools.wraps(command)
    def grouped(**given: Any) -> None:
        for name, group in groups.items():
            given[name] = group(**{f.name: given.pop(f.name) for f in dataclasses.fields(group)})
        command(**given)

    grouped.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    grouped.__annotations__ = {p.name: p.annotation for p in parameters}  # typer reads both
    return grouped


@dataclass(frozen=True)
class GateArgs:
    """The gate, the JSON report, the score store and the baseline the scoring is held against."""

    confidence: Annotated[
        float | None, opt.option("RATE", "Minimum pass rate for the gate (overrides the spec's).", min=0.0, max=1.0)
    ] = None
    json_path: Annotated[
        str | None, opt.option("FILE", "Write the JSON report to FILE ('-' for stdout).", "--json")
    ] = None
    store: Annotated[
        Path | None,
        opt.option(
            "DIR", "The score store this scoring is added to (default: $EVALTRACE_STORE, else .evaltrace/store)."
        ),
    ] = None
    no_store: Annotated[bool, opt.option("", "Do not add this scoring to the score store.", "--no-store")] = False
    baseline: Annotated[
        str | None,
        opt.option(
            "REF",
            "Compare with REF, a JSON report or a scoring-run id in the store (see evaltrace compare): also fail "
            "(exit 1) on a significant regression (--alpha), or with --strict on any case that regressed.",
        ),
    ] = None
    alpha: opt.Alpha = None
    strict: opt.Strict = False


@dataclass(frozen=True)
class ReportArgs:
    """The reports written besides `--json`."""

    junit_path: Annotated[
        str | None, opt.option("FILE", "Write a JUnit XML report to FILE (one test suite per tier).", "--junit")
    ] = None
    markdown_path: Annotated[
        str | None,
        opt.option(
            "FILE",
            "Write a Markdown summary to FILE; also appended to $GITHUB_STEP_SUMMARY when that is set.",
            "--markdown",
        ),
    ] = None
    html_path: Annotated[
        str | None,
        opt.option(
            "FILE",
            "Write a self-contained HTML report to FILE: summary, charts, filters, entries' scores and trace trees.",
            "--html",
        ),
    ] = None
    report: Annotated[
        list[str] | None,
        opt.option(
            "FORMAT=FILE",
            "Write a report in FORMAT (json, junit, markdown, html, or an installed evaltrace.report_formats plugin) "
            "to FILE (repeatable).",
        ),
    ] = None

    def destinations(self, json_path: str | None) -> list[tuple[str, str]]:
        """These reports and `--json`'s as `(format, FILE)`, each FILE checked (`opt.report_destinations`)."""
        paths = (json_path, self.junit_path, self.markdown_path, self.html_path)
        return opt.report_destinations(*paths, self.report or ())


@dataclass(frozen=True)
class SelectionArgs:
    """Which of the spec's cases are scored (or run)."""

    tier: Annotated[list[str] | None, opt.option("TIER", "Only cases of this tier (repeatable).", panel=SELECT)] = None
    tag: Annotated[list[str] | None, opt.option("TAG", "Only cases with this tag (repeatable).", panel=SELECT)] = None
    case: Annotated[
        list[str] | None, opt.option("GLOB", "Only cases whose id matches (glob; repeatable).", panel=SELECT)
    ] = None


@dataclass(frozen=True)
class JudgeArgs:
    """The `--judge-*` options: `JudgeSettings` fields (`judge_` dropped) that override the environment's."""

    judge_model: Annotated[str | None, opt.option("MODEL", "Judge model name.", panel=JUDGE)] = None
    judge_base_url: Annotated[
        str | None, opt.option("URL", "OpenAI-compatible base URL of the judge.", panel=JUDGE)
    ] = None
    judge_api_key: Annotated[
        str | None,
        opt.option(
            "KEY",
            "Judge API key. Prefer EVALTRACE_JUDGE_API_KEY: a command line is visible to other users (ps).",
            panel=JUDGE,
        ),
    ] = None
    judge_timeout: Annotated[
        float | None, opt.option("SECONDS", "Total seconds one judge request may take.", panel=JUDGE, min=0.0)
    ] = None
    judge_concurrency: Annotated[
        int | None, opt.option("N", "Judge requests in flight at once.", panel=JUDGE, min=1)
    ] = None
    judge_max_requests: Annotated[
        int | None, opt.option("N", "Budget of judge requests for the run.", panel=JUDGE, min=0)
    ] = None
    judge_cache_dir: Annotated[
        Path | None,
        opt.option(
            "DIR",
            "Cache root for the judge verdicts, kept in its judge/ (EVALTRACE_JUDGE_CACHE_DIR; default: evaltrace's "
            "cache root). Its verdicts are trusted: keep it outside the repository.",
            panel=JUDGE,
        ),
    ] = None
    no_judge_cache: Annotated[
        bool, opt.option("", "Neither read nor write the verdict cache.", "--no-judge-cache", panel=JUDGE)
    ] = False
    judge_allow_insecure: Annotated[
        bool,
        opt.option(
            "",
            "Send the judge API key over plain http:// to a host outside loopback (EVALTRACE_JUDGE_ALLOW_INSECURE).",
            "--judge-allow-insecure",
            panel=JUDGE,
        ),
    ] = False

    def overrides(self) -> dict[str, Any]:
        """The options given (a flag left off is not given); the environment, then the default, fills the rest."""
        given = {name.removeprefix("judge_"): v for name, v in vars(self).items() if v is not None and v is not False}
        if given.pop("no_judge_cache", False):
            given["cache"] = False
        if "api_key" in given:
            given["api_key"] = SecretStr(given["api_key"])  # never in a repr of the options
        return given
