"""A scored, judged run in a real score store, for the review and calibration tests.

`judged_store(tmp)` records `CASES` agent runs with the real OTel SDK and evaltrace's exporter,
then runs the real `evaltrace score` with a spec whose every case has a `task_completion` judge
(and an `output` rule), the judge being the scripted server of tests/evaluators/scoring/judge_server.py:
it passes a trace exactly when its answer is in `JUDGE_PASSES`. What the judge said is thus known
per case, so a test can label against it and know the confusion matrix it should get.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from cli_process import evaltrace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from report_runs import HOSTILE, record_run

from evaltrace.collector import ParquetSpanExporter

ROOT = Path(__file__).resolve().parents[4]
CASES = 14
JUDGE_PASSES = frozenset(range(0, 14, 2)) | {1}
"""The cases (by number) whose answer the scripted judge passes."""
STORED = re.compile(r"scores stored: ([0-9A-Z]{26}) in ")


def case_id(n: int) -> str:
    return f"case-{n:02d}"


def answer(n: int) -> str:
    # Case 3's answer is hostile text: the page must show it inert. Case 6's misses the `output`
    # rule's "18C" (the judge passes it): an entry failed by a rule alone.
    if n == 3:
        return HOSTILE
    return f"Answer number {n:02d}: " + ("it is warm." if n == 6 else "it is 18C.")


def _judge_server() -> ModuleType:
    path = ROOT / "tests" / "evaluators" / "scoring" / "judge_server.py"
    spec = importlib.util.spec_from_file_location("_review_judge_server", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class JudgedStore:
    store: Path
    runs: Path
    run_id: str
    trace_ids: dict[str, str]
    """Case id -> its trace id."""


def record_traces(folder: Path, count: int = CASES) -> Path:
    """`count` agent runs (case ids `case-00`, ...) as span files in `folder`, real SDK and exporter."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ParquetSpanExporter(folder, run_id="review-test")))
    tracer = provider.get_tracer("review-test-agent")
    for n in range(count):
        record_run(tracer, f"Question {n:02d}?", answer(n), city="Paris" if n % 3 == 0 else None, case_id=case_id(n))
    provider.force_flush()
    provider.shutdown()
    return folder


def _spec() -> str:
    lines = ["confidence: 0.5", "cases:"]
    for n in range(CASES):
        tier = "smoke" if n < 7 else "full"
        lines.append(
            f"  - {{id: {case_id(n)}, input: 'Question {n:02d}?', tier: {tier}, "
            "expect: {task_completion: {tasks: [answer]}, output: {contains: ['18C']}}}"
        )
    return "\n".join(lines) + "\n"


def judged_store(tmp: Path) -> JudgedStore:
    """Record, score with the scripted judge into `tmp/store`, and say which trace each case has."""
    import pyarrow.parquet as pq

    server_module = _judge_server()
    runs, store = tmp / "runs", tmp / "store"
    record_traces(runs)
    (tmp / "judged.yaml").write_text(_spec(), encoding="utf-8")

    def respond(body: dict[str, Any]) -> Any:
        user = str(body["messages"][1]["content"])
        passed = any(f"Answer number {n:02d}" in user for n in JUDGE_PASSES) or (3 in JUDGE_PASSES and "Sunny" in user)
        return server_module.verdict(passed, "judged " + ("yes" if passed else "no"))

    with server_module.JudgeServer(respond) as server:
        args = ["score", runs, "--spec", tmp / "judged.yaml", "--store", store, "--judge-model", "judge-m"]
        args += ["--judge-base-url", server.base_url, "--judge-api-key", "k", "--judge-cache-dir", tmp / "cache"]
        result = evaltrace(*args, cwd=tmp)
    assert result.returncode in (0, 1), result.stderr
    match = STORED.search(result.stderr)
    assert match is not None, result.stderr
    table = pq.read_table(store / "scores" / f"{match[1]}.parquet", columns=["case_id", "trace_id"]).to_pylist()
    traces = {row["case_id"]: row["trace_id"] for row in table if row["trace_id"]}
    assert len(traces) == CASES
    return JudgedStore(store=store, runs=runs, run_id=match[1], trace_ids=traces)
