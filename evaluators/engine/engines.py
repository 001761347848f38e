"""Scoring engines by name: where the traces of `evaltrace score --engine NAME` are scored.

`local` scores on this machine, in one process or forked shards (`scoring.score_files`);
`ray` scores shards as tasks on a Ray cluster (`ray_engine.py`). Both give the same report.
An engine's module is imported when the engine is first used; `scoring.score` picks it by name.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from evaltrace.collector.registry import Registry

if TYPE_CHECKING:
    from evaltrace.evaluators.engine.scoring import ScoredRun, ScoreOptions
    from evaltrace.evaluators.results.report.writer import EntrySink
    from evaltrace.evaluators.scoring.spec.loader import LoadedSpec

DEFAULT_ENGINE = "local"


Engine = Callable[
    ["Sequence[str | os.PathLike[str]]", "LoadedSpec | None", "ScoreOptions", "EntrySink | None"], "ScoredRun"
]
"""An engine: how it runs (processes or shards, the cluster) is `ScoreOptions.workers` and `ray_address`."""

ENGINES: Registry[Engine] = Registry("engine")
"""Every engine by the name `--engine NAME` gives it."""
ENGINES.lazy("local", "evaltrace.evaluators.engine.scoring:score_files")
ENGINES.lazy("ray", "evaltrace.evaluators.engine.ray_engine:score_paths_ray")

READS_URIS: frozenset[str] = frozenset({"ray"})
"""The engines whose nodes read URIs (`s3://...`): their PATHs are resolved with `uris=True`."""
