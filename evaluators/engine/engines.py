"""Scoring engines by name: where the traces of `evaltrace score --engine NAME` are scored.

`local` scores on this machine, in one process or forked shards (`scoring.score_paths_to`);
`ray` scores shards as tasks on a Ray cluster (`ray_engine.py`). Both give the same report.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evaltrace.collector.errors import InputError

if TYPE_CHECKING:
    from evaltrace.evaluators.engine.scoring import ScoredRun, ScoreOptions
    from evaltrace.evaluators.results.report.writer import EntrySink
    from evaltrace.evaluators.scoring.spec.loader import LoadedSpec

DEFAULT_ENGINE = "local"


@dataclass(frozen=True)
class EngineSettings:
    """How the chosen engine runs: processes or shards, and the cluster for `ray`."""

    workers: int | None = None
    """`local`: processes (`None`: one per CPU for large runs); `ray`: shards (`None`: two per cluster CPU)."""
    ray_address: str | None = None
    """`ray`: the cluster's address (`None`: `RAY_ADDRESS`, else a Ray started for the run)."""


Engine = Callable[
    ["Sequence[str | os.PathLike[str]]", "LoadedSpec | None", "ScoreOptions", "EntrySink | None", EngineSettings],
    "ScoredRun",
]


def _local(
    paths: Sequence[str | os.PathLike[str]],
    spec: LoadedSpec | None,
    options: ScoreOptions,
    sink: EntrySink | None,
    settings: EngineSettings,
) -> ScoredRun:
    from evaltrace.evaluators.engine.scoring import score_paths_to

    if settings.ray_address is not None:
        raise InputError("--ray-address is for --engine ray")
    return score_paths_to(paths, spec, options, sink, workers=settings.workers)


def _ray(
    paths: Sequence[str | os.PathLike[str]],
    spec: LoadedSpec | None,
    options: ScoreOptions,
    sink: EntrySink | None,
    settings: EngineSettings,
) -> ScoredRun:
    from evaltrace.evaluators.engine.ray_engine import score_paths_ray

    return score_paths_ray(paths, spec, options, sink, address=settings.ray_address, shards=settings.workers)


ENGINES: dict[str, Engine] = {"local": _local, "ray": _ray}


def engine_named(name: str) -> Engine:
    """The engine called `name`.

    Raises:
        InputError: no engine has that name (the message lists the valid ones).
    """
    try:
        return ENGINES[name]
    except KeyError:
        raise InputError(f"unknown engine {name!r}: choose one of {', '.join(ENGINES)}") from None


def score_paths_with(
    engine: str,
    paths: Sequence[str | os.PathLike[str]],
    spec: LoadedSpec | None,
    options: ScoreOptions,
    sink: EntrySink | None = None,
    settings: EngineSettings | None = None,
) -> ScoredRun:
    """Score span files on the engine called `engine`; see `scoring.score_paths_to` for the rest.

    Raises:
        InputError: an unknown engine, and whatever that engine raises for bad input.
    """
    return engine_named(engine)(paths, spec, options, sink, settings or EngineSettings())
