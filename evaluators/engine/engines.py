"""Scoring engines by name: where the traces of `evaltrace score --engine NAME` are scored.

`local` scores on this machine, in one process or forked shards (`scoring.score_paths_to`);
`ray` scores shards as tasks on a Ray cluster (`ray_engine.py`). Both give the same report.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from evaltrace.collector.errors import InputError

if TYPE_CHECKING:
    from evaltrace.evaluators.engine.scoring import ScoredRun, ScoreOptions
    from evaltrace.evaluators.results.report.writer import EntrySink
    from evaltrace.evaluators.scoring.spec.loader import LoadedSpec

DEFAULT_ENGINE = "local"


Engine = Callable[
    ["Sequence[str | os.PathLike[str]]", "LoadedSpec | None", "ScoreOptions", "EntrySink | None"], "ScoredRun"
]
"""An engine: how it runs (processes or shards, the cluster) is `ScoreOptions.workers` and `ray_address`."""


def _local(
    paths: Sequence[str | os.PathLike[str]],
    spec: LoadedSpec | None,
    options: ScoreOptions,
    sink: EntrySink | None,
) -> ScoredRun:
    from evaltrace.evaluators.engine.scoring import score_paths_to

    if options.ray_address is not None:
        raise InputError("--ray-address is for --engine ray")
    return score_paths_to(paths, spec, options, sink)


def _ray(
    paths: Sequence[str | os.PathLike[str]],
    spec: LoadedSpec | None,
    options: ScoreOptions,
    sink: EntrySink | None,
) -> ScoredRun:
    from evaltrace.evaluators.engine.ray_engine import score_paths_ray

    return score_paths_ray(paths, spec, options, sink, address=options.ray_address, shards=options.workers)


ENGINES: dict[str, Engine] = {"local": _local, "ray": _ray}
READS_URIS: frozenset[str] = frozenset({"ray"})
"""The engines whose nodes read URIs (`s3://...`): their PATHs are resolved with `uris=True`."""


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
) -> ScoredRun:
    """Score span files on the engine called `engine`; see `scoring.score_paths_to` for the rest.

    Raises:
        InputError: an unknown engine, and whatever that engine raises for bad input.
    """
    return engine_named(engine)(paths, spec, options, sink)
