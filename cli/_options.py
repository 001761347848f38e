"""Options and arguments shared by several commands, declared once so they stay in step.

The groups of options `evaltrace score` and `evaltrace run` share are `_scoring_options.py`'s; `PATHS_HELP`
and `folders` serve every command that reads or tidies span files.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from evaltrace.collector.errors import InputError

if TYPE_CHECKING:
    from evaltrace.evaluators.scoring.spec.loader import LoadedSpec

PATHS_HELP = (
    "Run files (*.parquet), OTLP files (JSON lines or protobuf, plain or gzip), folders (their *.parquet files) "
    "or globs such as 'runs/*.parquet'."
)


def option(metavar: str, help: str, *names: str, panel: str | None = None, **more: Any) -> Any:
    """A `typer.Option` taking `metavar` (named after its parameter unless `names` are given), shown in `panel`."""
    return typer.Option(*names, metavar=metavar, help=help, rich_help_panel=panel, **more)


Workers = Annotated[
    int | None,
    option(
        "N",
        "Processes that read and score in parallel (default: one per CPU for runs of 8 MB or more; runs with judge "
        "scorers use one).",
        min=1,
    ),
]
Engine = Annotated[
    str,
    option(
        "NAME",
        # Escaped: rich would read `[ray]` as markup and drop it from the help.
        "Where to score: local (this machine) or ray (a Ray cluster: pip install 'evaltrace\\[ray]'; --workers is "
        "then the number of shards, default two per cluster CPU).",
    ),
]
RayAddress = Annotated[
    str | None,
    option(
        "ADDR",
        "With --engine ray: the cluster to join, as HOST:PORT of its head (default: RAY_ADDRESS, else a Ray started "
        "on this machine for the run).",
    ),
]
Plugins = Annotated[
    list[str] | None,
    option(
        "REF",
        "Custom scorers to load: a file (my_scorers.py), a module, or MODULE:CLASS (repeatable; EVALTRACE_PLUGINS "
        "holds a space-separated list). Installed evaltrace.scorers plugins load by themselves.",
        "--plugin",
        envvar="EVALTRACE_PLUGINS",
    ),
]
ScorerTimeout = Annotated[
    float,
    option(
        "SECONDS",
        "Seconds one scorer may take on one entry; past it, its result is an error naming it and the run goes on "
        "(0: no limit; judge scorers are bounded by --judge-timeout).",
        min=0.0,
    ),
]
NoCache = Annotated[
    bool,
    option(
        "",
        "Rebuild the traces from the span files and compile the spec again, without reading or writing the cache "
        "(EVALTRACE_CACHE_DIR; default ~/.cache/evaltrace).",
        "--no-cache",
    ),
]
StoreOption = Annotated[str | None, option("DIR", "The score store (EVALTRACE_STORE; default .evaltrace/store).")]
"""`--store` of the commands that read or label a store (scoring's own is `GateArgs.store`)."""
MinJudgeKappa = Annotated[
    float | None,
    option(
        "K",
        "Refuse to gate (exit 2) when a judge's kappa against people's labels in the store (n >= 10) is below K "
        "(see evaltrace calibrate).",
    ),
]
DEFAULT_ALPHA = 0.05
Alpha = Annotated[
    float | None,
    option(
        "P",
        "Significance level of the regression tests against the baseline (compare's BASE, score's --baseline); the "
        f"CIs are 1 - P (default {DEFAULT_ALPHA}).",
    ),
]
Strict = Annotated[
    bool,
    option("", "Fail (exit 1) on any case that passed in the baseline and fails now, significant or not.", "--strict"),
]


def alpha_level(alpha: float | None) -> float:
    """The `--alpha` given, or the default; one outside (0, 0.5) is an input error."""
    if alpha is None:
        return DEFAULT_ALPHA
    if not 0.0 < alpha < 0.5:
        raise InputError(f"--alpha {alpha:g}: give a significance level between 0 and 0.5 (such as 0.05)")
    return alpha


def load_plugins(plugin: list[str] | None) -> None:
    """Register the scorers of the `--plugin` references, before any spec names them."""
    if plugin:
        from evaltrace.evaluators.scoring.scorers.registry import load_plugins as load

        load(plugin)


def report_destinations(
    json_path: str | None,
    junit_path: str | None,
    markdown_path: str | None,
    html_path: str | None = None,
    reports: Sequence[str] = (),
) -> list[tuple[str, str]]:
    """The reports asked for as `(format, FILE)`, each FILE checked before any work is done.

    Args:
        json_path: `--json FILE`.
        junit_path: `--junit FILE`.
        markdown_path: `--markdown FILE`.
        html_path: `--html FILE`.
        reports: `--report FORMAT=FILE` values (any registered format, plugins' included).

    Raises:
        InputError: an unknown format; a FILE names a folder, sits in a folder that does not exist
            (`--junit`, `--markdown`, `--html`), or is `-` for a format written to files only; the option is named.
    """
    from evaltrace.evaluators.results.report.formats import check_destination

    asked = (("json", json_path), ("junit", junit_path), ("markdown", markdown_path), ("html", html_path))
    chosen = [(name, path, f"--{name}") for name, path in asked if path is not None]
    for value in reports:
        name, equals, path = value.partition("=")
        if not (name and equals and path):
            raise InputError(f"--report {value}: give FORMAT=FILE (such as junit=report.xml)")
        chosen.append((name, path, "--report"))
    for name, path, option in chosen:
        check_destination(name, path, option)
    return [(name, path) for name, path, _ in chosen]


def store_choice(store: Path | None, no_store: bool) -> Path | None:
    """The score store a scoring goes to (`None` with `--no-store`), checked writable before any work.

    Raises:
        InputError: both options were given, or the store cannot be written (the path is named).
    """
    from evaltrace.evaluators.results.store.location import check_writable, store_folder

    if no_store and store is not None:
        raise InputError("--store and --no-store: give one or the other")
    if no_store:
        return None
    folder = store_folder(store)
    check_writable(folder)
    return folder


def load_spec_arg(spec: str, *, cache: bool = True) -> tuple[LoadedSpec, str | None]:
    """Load `FILE` or `FILE::CASE_ID`, through the cache with `cache`; a case id the file lacks is an input error."""
    from evaltrace.evaluators.scoring.spec.loader import load_spec, split_spec_arg

    file, case_id = split_spec_arg(spec)
    loaded = load_spec(file, cache=cache)
    if case_id is not None and case_id not in {c.id for c in loaded.cases}:
        known = ", ".join(c.id for c in loaded.cases)
        raise InputError(f"{file}: no case with id {case_id!r} (cases: {known})")
    return loaded, case_id


def case_globs(case: list[str] | None, case_id: str | None) -> tuple[str, ...]:
    """The `--case` globs plus the exact id from `FILE::CASE_ID`."""
    return tuple(case or ()) + ((_literal_glob(case_id),) if case_id else ())


def _literal_glob(text: str) -> str:
    # `file::case_id` names one case exactly, even when its id contains glob characters. Not
    # `glob.escape`: that escapes paths and leaves a Windows drive or UNC prefix as it is, so an
    # id such as `//host/share[1]` would stay a pattern there; a case id is not a path.
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def folders(paths: list[str]) -> list[Path]:
    """The runs folders named by `paths`, each once (a file stands for its folder)."""
    folders: dict[Path, None] = {}
    for arg in paths:
        path = Path(arg)
        if path.is_dir():
            folders[path] = None
        elif path.is_file():
            folders[path.parent] = None
        else:
            raise InputError(f"{arg}: no such folder")
    return list(folders)


def write_text_output(destination: str, text: str, option: str) -> None:
    """Write `text` to stdout (`-`) or to a file, under a temporary name renamed into place."""
    if destination == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    path = Path(destination)
    temp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, path)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise InputError(f"{option} {destination}: cannot write: {exc.strerror or exc}") from None
