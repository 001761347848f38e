"""Sharded scoring: several worker processes give the report one process gives, from real files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from _engine_scorers import KillsWorker, PromptsSeen, Sleeps  # noqa: F401 - registers the test scorers
from genai_spans import Recorder, agent_turn

from evaltrace.collector import resolve_paths
from evaltrace.collector.errors import InputError
from evaltrace.collector.runfiles.reader import Shard, iter_traces
from evaltrace.collector.traces.rebuild import read_traces
from evaltrace.evaluators.engine import scoring
from evaltrace.evaluators.engine.scoring import ScoreOptions
from evaltrace.evaluators.engine.shards import WorkerError, available_cpus, plan_workers, quota_cpus
from evaltrace.evaluators.results.report.json_writer import ReportWriter
from evaltrace.evaluators.results.report.model import load_report
from evaltrace.evaluators.scoring.spec.loader import load_spec

SPEC = """\
confidence: 0.4
scorers: [tool_errors, tool_efficiency]
cases:
  - id: weather
    input: Weather in Paris?
    repeat: mean
    expect:
      tool_calls: [{name: get_weather, arguments: {city: Paris}}]
      output: {contains: ["18C"]}
  - id: never-seen
    input: Nobody asks this
  - id: chat
    turns:
      - {input: Hi there, expect: {output: {contains: [hello]}}}
      - {input: "And Paris?", expect: {output: {contains: ["18C"]}}}
"""


def record_run(directory: Path) -> None:
    """40 weather repeats (a quarter wrong), 3 conversations, 5 unmatched traces, over two files."""
    rec = Recorder(directory)
    for index in range(40):
        right = index % 4 != 0
        agent_turn(rec, "Weather in Paris?", "It is 18C." if right else "No idea.", city="Paris" if right else "Rome")
        if index == 20:
            rec.provider.force_flush()  # a second file
    for index in range(3):
        # The turns of one conversation get consecutive trace ids: they land in different shards.
        agent_turn(rec, "Hi there", "hello!", conversation=f"conv-{index}")
        agent_turn(rec, "And Paris?", "18C" if index else "cold", city="Paris", conversation=f"conv-{index}")
    for index in range(5):
        agent_turn(rec, f"Unrelated question {index}", "sure")
    rec.close()


def record_spec_run(root: Path) -> tuple[Path, Path]:
    """The recorded run's folder and the spec file that scores it, written under `root`."""
    record_run(root / "runs")
    spec = root / "spec.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    return root / "runs", spec


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return record_spec_run(tmp_path_factory.mktemp("sharded"))


def _score(runs: Path, spec: Path | None, workers: int, out: Path) -> dict[str, Any]:
    loaded = load_spec(spec) if spec is not None else None
    with ReportWriter(str(out)) as writer:
        run = scoring.score([runs], loaded, ScoreOptions(paths=(str(runs),), workers=workers), writer)
        writer.finish(run.report)
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return report


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    # Only the timestamp differs by design, and the unmatched traces' order (shard by shard).
    # Sums (cost, mean score values) are exact, so the order samples arrive in does not show.
    kept = {k: v for k, v in report.items() if k not in {"created_at", "unmatched"}}
    kept["unmatched"] = sorted(u["trace_id"] for u in report["unmatched"])
    return kept


def test_shards_split_the_traces_without_loss_or_overlap(run_dir: tuple[Path, Path]) -> None:
    runs, _ = run_dir
    every = sorted(group[0].trace_id for group in iter_traces(resolve_paths([runs])))
    for count in (2, 3):
        parts = [
            sorted(group[0].trace_id for group in iter_traces(resolve_paths([runs]), Shard(i, count)))
            for i in range(count)
        ]
        assert all(parts), "each shard gets traces"
        assert sorted(tid for part in parts for tid in part) == every
    assert len(every) == 51


@pytest.mark.parametrize("workers", [2, 3])
def test_sharded_report_equals_the_single_process_report(
    run_dir: tuple[Path, Path], tmp_path: Path, workers: int
) -> None:
    runs, spec = run_dir
    single = _score(runs, spec, 1, tmp_path / "one.json")
    sharded = _score(runs, spec, workers, tmp_path / "many.json")
    assert _comparable(sharded) == _comparable(single)
    entries = {entry["case_id"]: entry for entry in single["entries"]}
    # The scenario is what the test means: repeats, a missing case, conversations across shards.
    assert len(entries["weather"]["samples"]) == 40
    assert entries["weather"]["pass_rate"] == pytest.approx(0.75)
    assert entries["never-seen"]["status"] == "missing"
    assert len(entries["chat"]["samples"]) == 3
    assert [len(sample["trace_ids"]) for sample in entries["chat"]["samples"]] == [2, 2, 2]
    assert [sample["passed"] for sample in entries["chat"]["samples"]] == [False, True, True]
    assert len(single["unmatched"]) == 5
    assert single["counts"]["traces"] == 51
    assert single["latency"]["traces"] == 46


def test_sharded_scoring_without_a_spec(run_dir: tuple[Path, Path], tmp_path: Path) -> None:
    runs, _ = run_dir
    single = _score(runs, None, 1, tmp_path / "one.json")
    sharded = _score(runs, None, 2, tmp_path / "two.json")
    assert _comparable(sharded) == _comparable(single)
    assert single["counts"]["entries"] == 51


@pytest.mark.parametrize("workers", [1, 2])
def test_prompts_are_read_only_when_a_scorer_reads_them(
    run_dir: tuple[Path, Path], tmp_path: Path, workers: int
) -> None:
    runs, _ = run_dir
    verdicts = {}
    for scorers in (["t_engine_prompts_unread"], ["t_engine_prompts_unread", "t_engine_prompts_seen"]):
        spec = tmp_path / "prompts.yaml"
        spec.write_text(f"scorers: {scorers}\ncases:\n  - id: w\n    input: Weather in Paris?\n")
        report = _score(runs, spec, workers, tmp_path / "report.json")
        (entry,) = report["entries"]
        verdicts[len(scorers)] = {s["scorer"]: s["passed"] for s in entry["samples"][0]["scores"]}
    assert verdicts == {
        1: {"t_engine_prompts_unread": False},
        2: {"t_engine_prompts_unread": True, "t_engine_prompts_seen": True},
    }


def test_a_bad_file_fails_the_sharded_run_with_its_name(run_dir: tuple[Path, Path], tmp_path: Path) -> None:
    runs, spec = run_dir
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for path in runs.glob("*.parquet"):
        (mixed / path.name).write_bytes(path.read_bytes())
    bad = mixed / "zz-broken.parquet"
    bad.write_bytes(next(runs.glob("*.parquet")).read_bytes()[:300])
    with pytest.raises(InputError, match="zz-broken.parquet"):
        _score(mixed, spec, 2, tmp_path / "report.json")


def test_a_killed_worker_fails_the_run_instead_of_hanging(run_dir: tuple[Path, Path], tmp_path: Path) -> None:
    runs, _ = run_dir
    spec = tmp_path / "kill.yaml"
    spec.write_text("cases:\n  - id: w\n    input: Weather in Paris?\n    expect: {t_engine_kill: {text: No idea}}\n")
    with pytest.raises(WorkerError, match=r"scoring worker \d of 2 ended early \(exit code -9\)"):
        _score(runs, spec, 2, tmp_path / "report.json")


def test_ctrl_c_stops_the_workers_too(run_dir: tuple[Path, Path], tmp_path: Path) -> None:
    runs, _ = run_dir
    spec = tmp_path / "slow.yaml"
    started = tmp_path / "started"
    started.mkdir()
    sleep = json.dumps({"seconds": 5, "started": str(started)})
    spec.write_text(f"cases:\n  - id: w\n    input: Weather in Paris?\n    expect: {{t_engine_sleep: {sleep}}}\n")
    # The CLI in a session of its own (a process group, as a terminal has), with the test scorers.
    driver = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import _engine_scorers; "
        "from evaltrace.cli.main import main; sys.exit(main(sys.argv[1:]))"
    )
    command = [sys.executable, "-c", driver, "score", str(runs), "--spec", str(spec), "--workers", "2"]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, start_new_session=True)
    # Both workers in the scorer (40 weather traces over 2 shards): each has set its Ctrl-C handling.
    # Waiting a fixed time instead sent SIGINT before the CLI was even running when under load.
    deadline = time.monotonic() + 300  # a guard against a hang, not a measure
    while len(list(started.iterdir())) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate(timeout=30)[1]
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "Error: interrupted"
    with pytest.raises(ProcessLookupError):  # no worker is left behind in the group
        os.killpg(proc.pid, 0)


def test_cli_workers_option(run_dir: tuple[Path, Path], tmp_path: Path) -> None:
    runs, spec = run_dir
    out = tmp_path / "report.json"
    command = [sys.executable, "-m", "evaltrace.cli", "score", str(runs), "--spec", str(spec), "--workers", "2"]
    done = subprocess.run([*command, "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert load_report(out).counts.traces == 51
    zero = subprocess.run([*command[:-1], "0"], capture_output=True, text=True, timeout=60)
    assert zero.returncode == 2
    assert "--workers" in zero.stderr


def test_plan_workers(run_dir: tuple[Path, Path], tmp_path: Path) -> None:
    from evaltrace.evaluators.engine.scoring import new_run

    runs, spec = run_dir
    files = sorted(runs.glob("*.parquet"))
    router, _ = new_run(load_spec(spec), ScoreOptions())
    assert plan_workers(1, files, router) == 1
    assert plan_workers(3, files, router) == 3
    assert plan_workers(None, files, router) == 1, "a small run stays in one process"
    big = tmp_path / "big.parquet"
    with big.open("wb") as handle:
        handle.truncate(16 * 1024 * 1024)
    assert plan_workers(None, [big], router) == min(available_cpus(), 8)
    judged = tmp_path / "judged.yaml"
    judged.write_text(
        textwrap.dedent("""\
            cases:
              - id: a
                input: q
                expect: {semantic_output: {rubric: "is it good"}}
            """),
        encoding="utf-8",
    )
    judge_router, _ = new_run(load_spec(judged), ScoreOptions())
    assert plan_workers(4, files, judge_router) == 1, "judges share one session"


def test_more_workers_than_cpus_are_kept_with_a_warning(
    run_dir: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    from evaltrace.evaluators.engine.scoring import new_run

    runs, spec = run_dir
    router, _ = new_run(load_spec(spec), ScoreOptions())
    files = sorted(runs.glob("*.parquet"))
    many = available_cpus() + 1
    with caplog.at_level("WARNING", logger="evaltrace.evaluators.engine.shards"):
        assert plan_workers(available_cpus(), files, router) == available_cpus()
        assert not caplog.records, "as many workers as CPUs is fine"
        assert plan_workers(many, files, router) == many
    assert [r.getMessage() for r in caplog.records] == [
        f"--workers {many}: only {many - 1} CPUs are available here; more workers than CPUs add memory, not speed"
    ]


@pytest.mark.parametrize(
    ("quota", "period", "cpus"),
    [
        ("max", "100000", None),
        ("-1", "100000", None),
        ("200000", "100000", 2),
        ("150000", "100000", 2),
        ("50000", "100000", 1),
        ("0", "100000", None),
        ("junk", "100000", None),
    ],
)
def test_container_cpu_quota(quota: str, period: str, cpus: int | None) -> None:
    assert quota_cpus(quota, period) == cpus


def test_read_traces_of_a_shard_are_rebuilt_whole(run_dir: tuple[Path, Path]) -> None:
    runs, _ = run_dir
    whole = {t.trace_id: t for t in read_traces(resolve_paths([runs]))}
    for trace in read_traces(resolve_paths([runs]), Shard(1, 2)):
        assert trace == whole[trace.trace_id]


CTRL_C_AT_FORK = """\
import os, signal
from evaltrace.evaluators.engine.shards import receive, start_process, stop_processes

def answer(sender):
    sender.send(("done", os.getpid()))

# A Ctrl-C in the instant after the fork, before the child could ignore it.
os.register_at_fork(after_in_child=lambda: os.kill(os.getpid(), signal.SIGINT))
receivers, processes = {}, []
try:
    start_process(answer, (), "child", receivers, processes)
    (ready,) = receivers
    print(receive(ready, 0, processes)[0], flush=True)
finally:
    stop_processes(receivers, processes)
"""


def test_a_ctrl_c_at_the_fork_is_ignored_by_the_child() -> None:
    # In a process of its own: a fork hook cannot be removed. Before the fix the child's Python handler
    # took it: KeyboardInterrupt in the child (here inside the hook, reported on stderr; a moment later,
    # in the child's start-up, a traceback and exit code 1 before the worker could ignore Ctrl-C).
    done = subprocess.run([sys.executable, "-c", CTRL_C_AT_FORK], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, "done\n", "")
