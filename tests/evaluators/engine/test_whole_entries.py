"""A warm scoring's cases of one passing sample are decided whole (`SpecRouter._keep_whole`): the same bytes.

Such a case's entry JSON is made when its sample is kept (`passing_entry_json`, not `decide_case_json`
at the end) and its score-store rows per batch (`rows.entry_rows`), sorted in among the others' by the
store's writer. Scored in this process: per trace (the reference) and warm (the table read back), into
a JSON report and a score store each, compared byte for byte and row for row. The edge cases: untrusted
input text, a tier and tags, an output that is null, each repeat rule a lone sample decides, a case
that needs two samples (never whole), and cases that get a second sample, passing or failing (decided
from a tally again, their whole record unfolded).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from genai_spans import Recorder, agent_attrs, chat, messages, text, tool_attrs, tool_call

from evaltrace.evaluators.engine import _routers, scoring
from evaltrace.evaluators.engine.scoring import ScoreOptions
from evaltrace.evaluators.results.report.formats import FanOut
from evaltrace.evaluators.results.report.json_writer import ReportWriter
from evaltrace.evaluators.results.store.writer import open_store
from evaltrace.evaluators.scoring.spec.loader import load_spec

HOSTILE = 'Q "quoted" \\ back\u2028sep \u202erlo\u202c </b> \x07'
WEATHER = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}
CASES: list[dict[str, Any]] = [
    {
        "id": "escaped",
        "input": HOSTILE,
        "tier": "smoke",
        "tags": ["t1", 'q"uote'],
        "expect": {"output": {"contains": ["ok"]}},
    },
    {"id": "no-output", "input": "weather only", "expect": WEATHER},
    {
        "id": "pass-at-2",
        "input": "p2",
        "repeat": {"rule": "pass@k", "k": 2},
        "expect": {"output": {"contains": ["ok"]}},
    },
    {"id": "all", "input": "all", "repeat": "all", "expect": {"output": {"contains": ["ok"]}}},
    {"id": "majority", "input": "maj", "repeat": {"rule": "majority"}, "expect": {"output": {"contains": ["ok"]}}},
    {"id": "needs-two", "input": "n2", "repeat": {"min_samples": 2}, "expect": {"output": {"contains": ["ok"]}}},
    {"id": "twice", "input": "twice", "expect": {"output": {"contains": ["ok"]}}},
    {"id": "then-fails", "input": "then fails", "expect": {"output": {"contains": ["ok"]}}},
    {"id": "by-input", "input": "matched   by input", "expect": {"output": {"contains": ["ok"]}}},
    {"id": "missing", "input": "nobody asked"},
]
WHOLE = {"escaped", "no-output", "pass-at-2", "all", "majority", "by-input"}
"""The cases decided whole: one passing sample each (`needs-two` needs two; `twice`, `then-fails` get two)."""


def _trace(rec: Recorder, case_id: str | None, question: str, answer: str | None) -> None:
    """One agent run; `answer` `None`: a get_weather call and no answer (the output is null)."""
    attrs = {"evaltrace.case_id": case_id} if case_id is not None else {}
    with rec.span("run", attrs), rec.span("invoke_agent a", agent_attrs("a")):
        prompt = messages(("user", [text(question)]))
        if answer is None:
            call = messages(("assistant", [tool_call("c1", "get_weather", {"city": "Oslo"})]))
            chat(rec, "gpt-x", prompt, call, (7, 3), "tool_call")
            with rec.span("execute_tool get_weather", tool_attrs("get_weather", "c1", '{"city": "Oslo"}', "9C")):
                rec.tick(2)
        else:
            chat(rec, "gpt-x", prompt, messages(("assistant", [text(answer)])), (11, 2))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("whole")
    rec = Recorder(root / "runs")
    for case in CASES[:-1]:
        answer = None if case["id"] == "no-output" else f"ok {case['input']}"
        by_input = case["id"] == "by-input"
        _trace(rec, None if by_input else case["id"], "matched by input" if by_input else case["input"], answer)
    _trace(rec, "twice", "twice", "ok again")
    _trace(rec, "then-fails", "then fails", "no good")
    rec.close()
    spec = root / "spec.json"
    spec.write_text(json.dumps({"confidence": 0.5, "cases": CASES}), encoding="utf-8")
    return root / "runs", spec


def _run(runs: Path, spec: Path, out: Path, options: ScoreOptions) -> tuple[bytes, list[dict[str, Any]]]:
    """The report's bytes (but its time) and the store's score rows (but the run's id and time)."""
    loaded = load_spec(spec)
    sink = FanOut([ReportWriter(str(out / "report.json")), open_store(out / "store", loaded)])
    sink.finish(scoring.score([runs], loaded, options, sink).report)
    report = re.sub(rb'"created_at":"[^"]*",', b"", (out / "report.json").read_bytes())
    (scores,) = (out / "store" / "scores").glob("*")
    return report, pq.read_table(scores).drop_columns(["run_id", "run_started_at"]).to_pylist()


def test_cases_decided_whole_are_written_as_the_per_trace_path_writes_them(
    recorded: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs, spec = recorded
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    per_trace = _run(runs, spec, tmp_path / "per-trace", ScoreOptions(workers=1, cache=False, columnar=False))
    whole: list[str] = []
    passing = _routers.passing_entry_json
    monkeypatch.setattr(_routers, "passing_entry_json", lambda case, *a: whole.append(case.id) or passing(case, *a))
    first = _run(runs, spec, tmp_path / "first", ScoreOptions(workers=1))
    assert set(whole) == WHOLE | {"twice", "then-fails"}  # parked whole, the last two unfolded at the end
    whole.clear()
    warm = _run(runs, spec, tmp_path / "warm", ScoreOptions(workers=1))
    assert set(whole) == WHOLE | {"twice", "then-fails"}
    assert warm == first == per_trace
    entries = {entry["case_id"]: entry for entry in json.loads(per_trace[0])["entries"]}
    assert entries["escaped"]["input"] == HOSTILE and entries["escaped"]["tags"] == ["t1", 'q"uote']
    assert entries["no-output"]["output"] is None and entries["no-output"]["status"] == "passed"
    assert entries["needs-two"]["status"] == "failed" and entries["then-fails"]["status"] == "failed"
    assert len(entries["twice"]["samples"]) == 2 and entries["missing"]["status"] == "missing"
    assert [row["entry_index"] for row in per_trace[1]] == sorted(row["entry_index"] for row in per_trace[1])
