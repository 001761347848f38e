"""`evaltrace score` and `evaltrace schema` end to end: real OTel spans in real Parquet files, real subprocesses."""

from __future__ import annotations

import json
import socket
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_process import evaltrace
from jsonschema import Draft202012Validator
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from report_runs import record_run

from evaltrace.cli.main import main
from evaltrace.collector.recorder.exporter import ParquetSpanExporter
from evaltrace.evaluators.scoring.spec.model import spec_json_schema

ROOT = Path(__file__).resolve().parents[2]

SPEC = """\
confidence: 0.5
scorers: [tool_errors]
cases:
  - id: paris-weather
    input: "What's the weather in Paris?"
    tier: smoke
    expect:
      tool_calls:
        - {name: get_weather, arguments: {city: Paris}}
      trajectory: in_order
      output:
        contains: ["18"]
        not_contains: ["error"]
        regex: "\\\\d+"
  - id: rome
    input: "And in Rome?"
    tier: full
    tags: [weather]
    expect:
      output: {contains: ["21"]}
"""


def record(folder: Path, runs: list[dict[str, Any]]) -> Path:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ParquetSpanExporter(folder, run_id="cli-test")))
    tracer = provider.get_tracer("test-agent")
    for kwargs in runs:
        record_run(tracer, agent_name="weather", **kwargs)
    provider.force_flush()
    provider.shutdown()
    assert list(folder.glob("*.parquet"))
    return folder


GOOD = [
    {"user": "What's the weather in Paris?", "answer": "It is 18C and sunny in Paris.", "city": "Paris"},
    {"user": "whatever was typed", "answer": "Rome: 21C.", "case_id": "rome"},
]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "evals.yaml").write_text(SPEC, encoding="utf-8")
    return tmp_path


def test_score_passes_and_writes_the_contract_report(workdir: Path) -> None:
    record(workdir / "runs", GOOD)
    result = evaltrace("score", "runs", "--spec", "evals.yaml", "--json", "report.json", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("scores stored: ") and result.stderr.count("\n") == 1  # and nothing else
    assert result.stdout.splitlines()[-1] == "Gate PASSED: pass rate 100.0% (2/2) >= confidence 50.0%"
    report = json.loads((workdir / "report.json").read_text())
    assert {"schema_version", "passed", "pass_rate", "confidence", "entries"} <= set(report)
    assert (report["schema_version"], report["passed"], report["pass_rate"], report["confidence"]) == (
        1,
        True,
        1.0,
        0.5,
    )
    for item in report["entries"]:
        assert {"trace_id", "case_id", "passed", "scores"} <= set(item)
        for row in item["scores"]:
            assert {"scorer", "passed", "value", "reason"} <= set(row)
    paris = report["entries"][0]
    assert paris["case_id"] == "paris-weather" and len(paris["trace_id"]) == 32
    assert [s["scorer"] for s in paris["scores"]] == ["tool_errors", "trajectory", "output"]
    assert paris["samples"][0]["input"] == "What's the weather in Paris?"
    assert paris["samples"][0]["output"] == "It is 18C and sunny in Paris."
    assert report["usage"] == {"input_tokens": 500, "output_tokens": 50}
    assert report["cost"]["estimated_usd"] is not None and report["cost"]["estimated_usd"] > 0
    assert report["inputs"] == {
        "paths": ["runs"],
        "spec": "evals.yaml",
        "tiers": [],
        "tags": [],
        "cases": [],
        "dropped_spans": 0,
        "unwritten_spans": 0,
    }
    assert {s["name"] for s in report["scorers"]} == {"tool_errors", "trajectory", "output"}
    assert all(len(s["config_hash"]) == 12 for s in report["scorers"])
    assert report["latency"]["p50_seconds"] is not None and report["created_at"]


def test_score_fails_the_gate_with_exit_1_and_names_the_reasons(workdir: Path) -> None:
    broken = [
        {"user": "What's the weather in Paris?", "answer": "I cannot tell."},
        {"user": "something", "answer": "error", "case_id": "nowhere"},
    ]
    record(workdir / "runs", broken)
    result = evaltrace("score", "runs", "--spec", "evals.yaml", cwd=workdir)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    failed = next(i for i, line in enumerate(lines) if line.startswith("FAILED paris-weather [trace "))
    assert lines[failed + 1] == "  - trajectory: Failed (in_order, score 0.00): missing get_weather(city='Paris')."
    assert lines[failed + 2].startswith("  - output: missing '18'")
    assert "MISSING rome" in lines
    assert "Unmatched traces (not scored): 1" in lines
    assert lines[-1] == "Gate FAILED: pass rate 0.0% (0/2) < confidence 50.0%"


def test_confidence_option_overrides_the_spec(workdir: Path) -> None:
    record(workdir / "runs", GOOD[:1])  # rome is missing: 1 of 2
    assert evaltrace("score", "runs", "--spec", "evals.yaml", cwd=workdir).returncode == 0
    strict = evaltrace("score", "runs", "--spec", "evals.yaml", "--confidence", "0.9", cwd=workdir)
    assert strict.returncode == 1
    assert strict.stdout.splitlines()[-1] == "Gate FAILED: pass rate 50.0% (1/2) < confidence 90.0%"


def test_selection_by_tier_tag_case_and_file_case_id(workdir: Path) -> None:
    record(workdir / "runs", GOOD[:1])
    for args in (["--tier", "smoke"], ["--case", "paris-*"], []):
        spec = "evals.yaml::paris-weather" if not args else "evals.yaml"
        result = evaltrace("score", "runs", "--spec", spec, *args, "--json", "-", "--confidence", "1", cwd=workdir)
        assert result.returncode == 0, (args, result.stderr)
        report = json.loads(result.stdout)  # `--json -`: the report on stdout, the summary on stderr
        assert [e["case_id"] for e in report["entries"]] == ["paris-weather"]
        assert "Gate PASSED" in result.stderr
    tagged = evaltrace("score", "runs", "--spec", "evals.yaml", "--tag", "weather", cwd=workdir)
    assert tagged.returncode == 1 and "MISSING rome" in tagged.stdout


def test_a_json_report_on_stdout_by_report_moves_the_summary_to_stderr(workdir: Path) -> None:
    # `--report json=-` is `--json -` spelled as a report: stdout holds the JSON alone.
    record(workdir / "runs", GOOD[:1])
    result = evaltrace("score", "runs", "--spec", "evals.yaml::paris-weather", "--report", "json=-", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert [e["case_id"] for e in json.loads(result.stdout)["entries"]] == ["paris-weather"]
    assert "Gate PASSED" in result.stderr


def test_without_spec_scores_every_trace_with_the_defaults(workdir: Path) -> None:
    record(workdir / "runs", GOOD)
    result = evaltrace("score", str(workdir / "runs" / "*.parquet"), "--json", "r.json", cwd=workdir)
    assert result.returncode == 0, result.stderr
    report = json.loads((workdir / "r.json").read_text())
    assert len(report["entries"]) == 2 and report["confidence"] == 1.0
    assert {s["name"] for s in report["scorers"]} == {"tool_errors", "tool_call_validity", "tool_efficiency", "outcome"}
    assert sorted(e["case_id"] or "" for e in report["entries"]) == ["", "rome"]


@pytest.mark.parametrize(
    ("args", "spec_text", "expected"),
    [
        (
            ["--spec", "bad.yaml"],
            "cases: [{id: paris-weather, input: x, expect: {output: {regex: '('}}}]\n",
            "Error: bad.yaml: case 'paris-weather': expect.output.regex: invalid regular expression '(': "
            "missing ), unterminated subpattern",
        ),
        (
            ["--spec", "bad.yaml"],
            "cases:\n  - id: a\n    input: [oops\n",
            "Error: bad.yaml: line 4, column 1: invalid YAML: expected ',' or ']', but got '<stream end>'",
        ),
        (
            ["--spec", "bad.yaml"],
            "cases: [{id: a, input: x, expect: {nope: {}}}]\n",
            "Error: bad.yaml: case 'a': expect.nope: unknown key: not an expect key",
        ),
        (["--spec", "missing.yaml"], None, "Error: missing.yaml: spec file not found"),
        (
            ["--spec", "evals.yaml::nope"],
            None,
            "Error: evals.yaml: no case with id 'nope' (cases: paris-weather, rome)",
        ),
        (
            ["--spec", "evals.yaml", "--tier", "nightly"],
            None,
            "Error: evals.yaml: no case matches the selection (--tier nightly); check the case ids, tiers and tags",
        ),
        (["--tier", "smoke"], None, "Error: --tier, --tag and --case select spec cases: pass --spec FILE"),
        (
            ["--confidence", "1.5"],
            None,
            "Error: Invalid value for '--confidence': Input should be less than or equal to 1",
        ),
        (["--xml", "x.xml"], None, "Error: No such option: --xml"),
    ],
)
def test_bad_input_exits_2_with_one_error_line(
    workdir: Path, args: list[str], spec_text: str | None, expected: str
) -> None:
    record(workdir / "runs", GOOD[:1])
    if spec_text is not None:
        (workdir / "bad.yaml").write_text(spec_text, encoding="utf-8")
    result = evaltrace("score", "runs", *args, cwd=workdir)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(expected), result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_missing_or_corrupt_trace_files_exit_2(workdir: Path) -> None:
    nothing = evaltrace("score", "runs/*.parquet", cwd=workdir)
    assert nothing.returncode == 2 and nothing.stderr.startswith("Error: ") and nothing.stderr.count("\n") == 1
    (workdir / "junk.parquet").write_bytes(b"not parquet at all")
    corrupt = evaltrace("score", "junk.parquet", cwd=workdir)
    assert corrupt.returncode == 2 and corrupt.stderr.startswith("Error: junk.parquet")
    assert corrupt.stderr.count("\n") == 1


def test_schema_command_prints_the_spec_schema(workdir: Path) -> None:
    result = evaltrace("schema", cwd=workdir)
    assert result.returncode == 0, result.stderr
    schema = json.loads(result.stdout)
    assert schema == spec_json_schema()
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    for text in (SPEC, (ROOT / "samples" / "evals.yaml").read_text(encoding="utf-8")):
        assert list(validator.iter_errors(yaml.safe_load(text))) == []
    assert list(validator.iter_errors({"cases": [{"id": "a", "input": "x", "colour": "red"}]}))


def test_scoring_in_process_opens_no_socket(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    record(workdir / "runs", GOOD)
    attempts: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> None:
        attempts.append(address)
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.chdir(workdir)
    spec = textwrap.dedent(SPEC).replace("scorers: [tool_errors]", "scorers: [tool_errors, tool_call_validity]")
    (workdir / "evals.yaml").write_text(spec, encoding="utf-8")
    assert main(["score", "runs", "--spec", "evals.yaml", "--json", "r.json"]) == 0
    assert main(["score", "runs"]) == 0
    assert attempts == []
    assert json.loads((workdir / "r.json").read_text())["judge"] is None
    assert "Gate PASSED" in capsys.readouterr().out


def _judge_server_module() -> Any:
    # The scripted judge server lives with the evaluator tests; load it by path (tests are not a package).
    import importlib.util

    path = ROOT / "tests" / "evaluators" / "scoring" / "judge_server.py"
    spec = importlib.util.spec_from_file_location("_score_judge_server", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_judge_options_reach_the_judge_and_its_stats_reach_the_report(workdir: Path) -> None:
    server_module = _judge_server_module()
    record(workdir / "runs", GOOD[:1])
    spec = (
        'cases: [{id: paris, input: "What\'s the weather in Paris?", expect: {task_completion: {tasks: [weather]}}}]\n'
    )
    (workdir / "judged.yaml").write_text(spec, encoding="utf-8")
    with server_module.JudgeServer() as server:
        server.script(server_module.verdict(True, "reported the weather"), server_module.verdict(False, "no"))
        args = ["score", "runs", "--spec", "judged.yaml", "--json", "r.json", "--judge-model", "judge-m"]
        args += ["--judge-base-url", server.base_url, "--judge-api-key", "k", "--judge-cache-dir", "cache"]
        first = evaltrace(*args, cwd=workdir)
        assert first.returncode == 0, first.stderr
        assert len(server.requests) == 1 and server.requests[0].body["model"] == "judge-m"
        report = json.loads((workdir / "r.json").read_text())
        assert report["entries"][0]["scores"][0]["reason"] == "reported the weather"
        assert (report["judge"]["requests"], report["judge"]["cache_misses"]) == (1, 1)
        again = evaltrace(*args, cwd=workdir)  # the verdict is cached: no request
        assert again.returncode == 0 and len(server.requests) == 1
        assert json.loads((workdir / "r.json").read_text())["judge"]["cache_hits"] == 1
        uncached = evaltrace(*args, "--no-judge-cache", cwd=workdir)  # asks again, gets the second verdict
        assert uncached.returncode == 1 and len(server.requests) == 2
        assert "  - task_completion: no" in uncached.stdout.splitlines()
