"""Spec loading benchmark: `load_spec` on a seeded 10,000-case spec, YAML and JSON; time and peak memory.

Run: `.venv/bin/python benchmarks/bench_spec.py [--cases 10000] [--rounds 5] [--seed 7] [--shape rich|scoring]`
(`--profile yaml|json` prints a cProfile of one load instead; `--stages` adds the CPU time of
parsing, validating and compiling the scorers, timed once more in the same process).

The spec (written once per (cases, seed) under `benchmarks/out/`) extends the scoring
benchmark's cases (`_scoring_data.case_templates`: a trip from one city to another on a date)
to `--cases` cases, each as a user would write it: an id, the input, a tier and tags, expected
tool calls with arguments, the trajectory (a mode, or `{mode, threshold}`), output checks
(contains, not_contains, sometimes a regex), a token limit, and on some cases an answer's facts,
an outcome, a step budget, a repeat policy, or several turns. The spec's `scorers:` are the
scoring benchmark's. The YAML file is what `yaml.safe_dump` writes with flow style for the
innermost collections (as in `samples/evals.yaml`); the JSON file holds the same data.

Every round loads each file in a fresh subprocess (imports done before the clock starts, so
only `load_spec` is timed) and reports wall seconds, CPU seconds and the process's peak RSS;
the table gives the median and the range over the rounds. Each file is measured twice: compiled
(`load_spec(path, cache=False)`: parsed, validated, scorers built) and read back from the
compiled-spec cache (`evaluators/scoring/spec/cache.py`, in a temporary cache folder filled by one
load before the rounds). `--shape scoring` writes the scoring
benchmark's leaner case instead (`_scoring_data.write_spec`: two expected calls with one argument
each, a trajectory mode, output checks, a token limit).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
FORMATS = ("yaml", "json")


def spec_data(cases: int, seed: int, shape: str) -> dict[str, Any]:
    """The benchmark spec as parsed data: `cases` cases built on the scoring benchmark's templates."""
    sys.path.insert(0, str(HERE))
    scoring_data = importlib.import_module("_scoring_data")  # a sibling script, not a package
    templates = scoring_data.case_templates(seed)
    rng = random.Random(f"spec-{seed}")
    build = _case if shape == "rich" else _scoring_case
    out = [build(rng, templates[i % len(templates)], i) for i in range(cases)]
    return {
        "confidence": 0.8,
        "scorers": ["tool_errors", "tool_call_validity", "tool_efficiency", {"outcome": {"expected": "success"}}],
        "repeat": "mean",
        "cases": out,
    }


def _scoring_case(rng: random.Random, template: Any, index: int) -> dict[str, Any]:
    """A case exactly as `_scoring_data.write_spec` writes one, with its own id and input."""
    expect = {
        "tool_calls": [
            {"name": "get_weather", "arguments": {"city": template.city}},
            {"name": "search_flights", "arguments": {"destination": template.city}},
        ],
        "trajectory": "in_order",
        "output": {"contains": [template.city], "not_contains": ["I cannot"]},
        "usage": {"total": {"total_tokens": {"max": 400_000}}},
    }
    return {"id": f"trip-{index:05d}", "input": f"{template.input} (#{index})", "tier": "smoke", "expect": expect}


def _case(rng: random.Random, template: Any, index: int) -> dict[str, Any]:
    days = rng.randint(2, 9)
    text = f"{template.input} (traveller {index}, {days} days)"
    calls: list[dict[str, Any]] = [
        {"name": "get_weather", "arguments": {"city": template.city, "days": days}},
        {
            "name": "search_flights",
            "arguments": {"origin": template.origin, "destination": template.city, "date": template.date},
        },
    ]
    if rng.random() < 0.4:
        calls.append({"name": "find_hotels", "arguments": {"city": template.city, "nights": days, "max_price": 150}})
    expect: dict[str, Any] = {"tool_calls": calls}
    if rng.random() < 0.3:
        expect["trajectory"] = {"mode": "recall", "threshold": 0.8}
    else:
        expect["trajectory"] = rng.choice(["in_order", "any_order", "superset"])
    output: dict[str, Any] = {"contains": [template.city], "not_contains": ["I cannot", "error"]}
    if rng.random() < 0.3:
        output["regex"] = r"EUR \d+"
    expect["output"] = output
    expect["usage"] = {"total": {"total_tokens": {"max": rng.choice([20_000, 40_000, 80_000])}}}
    if rng.random() < 0.2:
        expect["answer"] = {"facts": [template.city, template.date]}
    if rng.random() < 0.2:
        expect["outcome"] = "success"
    if rng.random() < 0.1:
        expect["budget"] = {"max_tool_calls": 8, "max_model_calls": 10}
    case: dict[str, Any] = {
        "id": f"trip-{index:05d}",
        "tier": "smoke" if index % 10 == 0 else "full",
        "tags": ["travel", template.city.lower()],
    }
    if rng.random() < 0.05:  # a multi-turn case: the question, then a follow-up with the checks
        case["turns"] = [
            {"input": text},
            {"input": f"And a hotel in {template.city} for {days} nights?", "expect": expect},
        ]
    else:
        case["input"] = text
        case["expect"] = expect
    if rng.random() < 0.1:
        case["repeat"] = "pass@3"
    return case


def spec_files(cases: int, seed: int, shape: str) -> dict[str, Path]:
    """The YAML and JSON files of the benchmark spec, written (by a child process) if missing."""
    folder = OUT / _folder_name(cases, seed, shape)
    paths = {fmt: folder / f"spec.{fmt}" for fmt in FORMATS}
    if not all(path.exists() for path in paths.values()):
        # In a child: Linux carries a process's peak RSS over fork and exec, so a parent grown by
        # generating the data would inflate every measured peak.
        cmd = [sys.executable, str(Path(__file__).resolve()), "--_generate", str(cases), str(seed), shape]
        subprocess.run(cmd, check=True)
    return paths


def _folder_name(cases: int, seed: int, shape: str) -> str:
    return f"spec-{cases}-seed{seed}" + ("" if shape == "rich" else f"-{shape}")


def write_spec_files(cases: int, seed: int, shape: str) -> None:
    """Write the benchmark spec as YAML and JSON under `OUT`."""
    import yaml

    folder = OUT / _folder_name(cases, seed, shape)
    folder.mkdir(parents=True, exist_ok=True)
    data = spec_data(cases, seed, shape)
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120, allow_unicode=True)
    (folder / "spec.yaml").write_text(text, encoding="utf-8")
    (folder / "spec.json").write_text(json.dumps(data, indent=1), encoding="utf-8")


def measure(path: Path, stages: bool, cached: bool = False) -> dict[str, Any]:
    """Load `path` once in this process (through the cache with `cached`); seconds, peak RSS (MB), stage times."""
    import gc

    from evaltrace.evaluators.scoring.scorers.registry import scorer_names
    from evaltrace.evaluators.scoring.spec import loader

    # Importing the built-in scorers is start-up, paid once by any scoring run with or without a
    # spec: reported apart. Building their validators on first use stays inside the timed load.
    clock = time.perf_counter()
    scorer_names()
    registry_seconds = time.perf_counter() - clock
    gc.collect()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started, cpu_started = time.perf_counter(), time.process_time()
    loaded = loader.load_spec(path, cache=cached)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    result: dict[str, Any] = {
        "seconds": seconds,
        "cpu": cpu,
        "cases": len(loaded.spec.cases),
        "scorers": sum(len(turn) for turns in loaded.case_scorers.values() for turn in turns),
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_before_mb": rss_before,
        "registry_seconds": registry_seconds,
    }
    if stages:
        result["stages"] = _stages(path)
    return result


def _stages(path: Path) -> dict[str, float]:
    """CPU seconds of each stage of one more load, with the cyclic GC off as `load_spec` has it."""
    import gc

    from evaltrace.evaluators.scoring.spec import loader

    gc.disable()
    clock = time.process_time()
    text = path.read_text(encoding="utf-8")
    data = loader.parse_spec_text(text, str(path), json_syntax=path.suffix == ".json")
    parsed = time.process_time()
    spec = loader.validate_spec_data(data, str(path))
    validated = time.process_time()
    loader.compile_spec(spec, str(path))
    compiled = time.process_time()
    gc.enable()
    return {"parse": parsed - clock, "validate": validated - parsed, "compile": compiled - validated}


def _child(path: Path, stages: bool, cache: str | None = None) -> dict[str, Any]:
    """One load in a fresh process; through the cache folder `cache` when given."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_measure", str(path)]
    if stages:
        cmd.append("--stages")
    if cache is not None:
        cmd.append("--_cached")
    env = os.environ if cache is None else {**os.environ, "EVALTRACE_CACHE_DIR": cache}
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def profile(path: Path, top: int) -> None:
    """cProfile of one `load_spec`, sorted by cumulative and own time."""
    import cProfile
    import pstats

    from evaltrace.evaluators.scoring.spec import loader

    profiler = cProfile.Profile()
    profiler.enable()
    loader.load_spec(path)
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)


def main() -> None:
    """Parse the arguments and run the benchmark (or one measurement, in a child)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--shape",
        choices=("rich", "scoring"),
        default="rich",
        help="rich: the cases described above; scoring: bench_scoring.py's case (two calls, one argument each)",
    )
    parser.add_argument("--stages", action="store_true", help="also time parse / validate / compile")
    parser.add_argument("--profile", choices=FORMATS, help="print a cProfile of one load of that file")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--_measure", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--_generate", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--_cached", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._generate is not None:
        cases, seed, shape = args._generate
        write_spec_files(int(cases), int(seed), shape)
        return
    if args._measure is not None:
        print(json.dumps(measure(args._measure, args.stages, args._cached)))
        return
    paths = spec_files(args.cases, args.seed, args.shape)
    if args.profile:
        profile(paths[args.profile], args.top)
        return
    print(f"spec: {args.cases:,} {args.shape} cases, seed {args.seed}; {args.rounds} rounds, a fresh process per load")
    with tempfile.TemporaryDirectory(prefix="bench-spec-cache-") as cache:
        for fmt in FORMATS:
            _report(fmt, paths[fmt], [_child(paths[fmt], args.stages) for _ in range(args.rounds)], args.stages)
            _child(paths[fmt], False, cache)  # fills the cache
            _report(
                f"{fmt} (cached)", paths[fmt], [_child(paths[fmt], False, cache) for _ in range(args.rounds)], False
            )


def _report(label: str, path: Path, runs: list[dict[str, Any]], stages: bool) -> None:
    """One line of medians (and ranges) over `runs`, and the stages' when measured."""
    size = path.stat().st_size
    seconds = [r["seconds"] for r in runs]
    print(
        f"{label:<5} {size / 1e6:5.2f} MB  load {statistics.median(seconds):6.3f} s median "
        f"({min(seconds):.3f}-{max(seconds):.3f})  cpu {statistics.median(r['cpu'] for r in runs):6.3f} s  "
        f"peak RSS {statistics.median(r['peak_mb'] for r in runs):6.1f} MB "
        f"(before the load {statistics.median(r['rss_before_mb'] for r in runs):.1f})  "
        f"{runs[0]['cases']:,} cases, {runs[0]['scorers']:,} scorers "
        f"(importing the scorers first: {statistics.median(r['registry_seconds'] for r in runs):.3f} s)",
        flush=True,
    )
    if stages:
        for stage in ("parse", "validate", "compile"):
            values = [r["stages"][stage] for r in runs]
            print(f"      {stage:<9} {statistics.median(values):6.3f} s CPU median", flush=True)


if __name__ == "__main__":
    main()
