"""`evaltrace run`: real subprocesses, real agents, real Parquet files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_process import evaltrace

REPO = Path(__file__).resolve().parents[2]
SAMPLE_SPEC = REPO / "samples" / "evals.yaml"
AGENTS = Path(__file__).resolve().parent / "run_agents.py"

SPEC = """
confidence: 0.5
cases:
  - id: fine
    input: "hello"
    expect: {output: {contains: ["answer to hello"]}, tool_calls: [{name: lookup}]}
  - id: slow
    input: "be slow"
    expect: {output: {contains: ["answer"]}}
  - id: pause
    input: "pause a bit"
    expect: {output: {contains: ["answer"]}}
  - id: boom
    input: "go boom"
    expect: {output: {contains: ["answer"]}}
"""

CHAT_SPEC = """
cases:
  - id: chat
    turns:
      - input: "first"
        expect: {output: {contains: ["history 0; conversation True"]}}
      - input: "second"
        expect: {output: {contains: ["history 2; conversation True"]}}
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copy(AGENTS, tmp_path / "run_agents.py")
    (tmp_path / "evals.yaml").write_text(SPEC)
    (tmp_path / "chat.yaml").write_text(CHAT_SPEC)
    return tmp_path


def comparable(report_path: Path) -> dict[str, Any]:
    """The parts of a JSON report that must not depend on how the traces were recorded."""
    report = json.loads(report_path.read_text())
    entries = [
        (e["case_id"], e["passed"], sorted((s["scorer"], s["passed"]) for s in e["scores"])) for e in report["entries"]
    ]
    return {"passed": report["passed"], "pass_rate": report["pass_rate"], "entries": sorted(entries)}


def traces(folder: Path, cwd: Path) -> list[dict[str, Any]]:
    done = evaltrace("traces", str(folder), "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def test_run_gives_the_entries_of_record_then_score(tmp_path: Path) -> None:
    recorded = subprocess.run(
        [sys.executable, str(REPO / "samples" / "record_run.py"), str(tmp_path / "recorded")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert recorded.returncode == 0, recorded.stderr
    scored = evaltrace(
        "score", str(tmp_path / "recorded"), "--spec", str(SAMPLE_SPEC), "--json", str(tmp_path / "a.json"), cwd=REPO
    )
    assert scored.returncode == 0, scored.stderr
    ran = evaltrace(
        "run",
        "--agent",
        "samples.agent:run",
        "--spec",
        str(SAMPLE_SPEC),
        "--out",
        str(tmp_path / "ran"),
        "--json",
        str(tmp_path / "b.json"),
        cwd=REPO,
    )
    assert ran.returncode == 0, ran.stderr
    expected = comparable(tmp_path / "a.json")
    assert len(expected["entries"]) == 6
    assert comparable(tmp_path / "b.json") == expected

    # stdout is exactly `evaltrace score`'s summary; where the run went is on stderr.
    def timeless(text: str) -> list[str]:
        return [line for line in text.splitlines()[1:] if not line.startswith("Latency")]

    assert timeless(ran.stdout) == timeless(scored.stdout)
    assert f"into {tmp_path / 'ran'}" in ran.stderr
    assert f"evaltrace score {tmp_path / 'ran'}" in ran.stderr
    assert {t["case_id"] for t in traces(tmp_path / "ran", REPO)} == {e[0] for e in expected["entries"]}


def test_broken_agent_fails_the_gate(tmp_path: Path) -> None:
    ran = evaltrace(
        "run", "--agent", "samples.agent:run_broken", "--spec", str(SAMPLE_SPEC), "--out", str(tmp_path / "r"), cwd=REPO
    )
    assert ran.returncode == 1, ran.stderr
    assert "Gate FAILED" in ran.stdout


def test_run_scores_with_a_plugin_scorer(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    ran = evaltrace(
        "run", "--agent", "samples.agent:run", "--spec", "samples/evals-custom.yaml",
        "--plugin", "samples/scorers.py", "--out", str(tmp_path / "r"), "--json", str(report), cwd=REPO,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    entries = json.loads(report.read_text())["entries"]
    custom = {e["case_id"]: s["reason"] for e in entries for s in e["scores"] if s["scorer"] == "cities_named"}
    assert custom == {
        "paris-weather": "The answer names Paris.",
        "two-cities": "The answer names Paris, Tokyo.",
        "tokyo-time": "The answer names Tokyo.",
        "unknown-city": "The answer names Atlantis.",
    }


def test_timeouts_and_errors_are_failed_entries(workdir: Path) -> None:
    ran = evaltrace(
        "run", "--agent", "run_agents:answer", "--spec", "evals.yaml", "--timeout", "1", "--out", "out",
        "--json", "report.json", cwd=workdir,
    )  # fmt: skip
    # 2 of 4 entries pass (fine, pause) and the spec's confidence is 0.5: the gate passes, no crash.
    assert ran.returncode == 0, ran.stderr
    assert "Traceback" not in ran.stderr
    report = json.loads((workdir / "report.json").read_text())
    outcome = {e["case_id"]: e["passed"] for e in report["entries"]}
    assert outcome == {"fine": True, "slow": False, "pause": True, "boom": False}
    assert "slow (repeat 0): timeout: timed out after 1 s" in ran.stderr
    assert "boom (repeat 0): error: ValueError: boom" in ran.stderr
    by_case = {t["case_id"]: t for t in traces(workdir / "out", workdir)}
    assert len(by_case) == 4
    assert by_case["slow"]["status"] == "timeout"
    assert by_case["boom"]["status"] == "error"
    assert by_case["fine"]["status"] == "success"
    # The slow agent finished (and ended its spans) while `pause` was still recording: those late
    # spans were dropped, so the timed-out entry stays a timeout and no trace got its tool call.
    assert by_case["slow"]["tool_calls"] == []
    assert all(call["arguments"] != {"q": "be slow"} for t in by_case.values() for call in t["tool_calls"])


def test_timeout_with_concurrency_and_async_agent(workdir: Path) -> None:
    ran = evaltrace(
        "run", "--agent", "run_agents:answer_async", "--spec", "evals.yaml", "--timeout", "0.5",
        "--concurrency", "4", "--out", "out", "--confidence", "1", cwd=workdir,
    )  # fmt: skip
    assert ran.returncode == 1, ran.stderr  # the gate fails: slow timed out, boom raised
    statuses = {t["case_id"]: t["status"] for t in traces(workdir / "out", workdir)}
    assert statuses == {"fine": "success", "slow": "timeout", "pause": "success", "boom": "error"}


def test_repeat_gives_n_samples_per_case(workdir: Path) -> None:
    ran = evaltrace(
        "run", "--agent", "run_agents:answer", "--spec", "evals.yaml::fine", "--repeat", "3", "--concurrency", "2",
        "--out", "out", "--json", "report.json", cwd=workdir,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    report = json.loads((workdir / "report.json").read_text())
    assert [e["case_id"] for e in report["entries"]] == ["fine"]
    assert len(report["entries"][0]["samples"]) == 3
    repeats = sorted(t["attributes"]["evaltrace.repeat"] for t in traces(workdir / "out", workdir))
    assert repeats == [0, 1, 2]


def test_multi_turn_case_is_one_conversation_with_history(workdir: Path) -> None:
    ran = evaltrace(
        "run", "--agent", "run_agents:answer", "--spec", "chat.yaml", "--out", "out", "--json", "report.json",
        cwd=workdir,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    found = sorted(traces(workdir / "out", workdir), key=lambda t: t["attributes"]["evaltrace.turn"])
    assert [t["input"] for t in found] == ["first", "second"]
    assert found[0]["conversation_id"] is not None
    assert found[0]["conversation_id"] == found[1]["conversation_id"]
    assert json.loads((workdir / "report.json").read_text())["entries"][0]["passed"] is True


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        ("run_agents", "expected MODULE:FUNCTION"),
        ("run_agents:missing", "has no attribute 'missing'"),
        ("no_such_module_xyz:run", "cannot import 'no_such_module_xyz'"),
        ("run_agents:NOT_A_FUNCTION", "is a int, not a function"),
    ],
)
def test_bad_agent_reference_exits_2(workdir: Path, agent: str, message: str) -> None:
    ran = evaltrace("run", "--agent", agent, "--spec", "evals.yaml", "--out", "out", cwd=workdir)
    assert ran.returncode == 2
    lines = ran.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ")
    assert message in lines[0]
    assert not (workdir / "out").exists()


JUDGED_SPEC = """
cases:
  - id: fine
    input: "hello"
    expect: {semantic_output: {rubric: "Says hello back"}}
"""


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--judge-base-url", "ftp://judge.example/v1"], "judge base URL must start with http:// or https://"),
        (["--judge-base-url", "http://10.0.0.5/v1", "--judge-api-key", "sk-run-early"], "refusing to send the judge"),
    ],
)
def test_a_judge_that_cannot_be_asked_stops_the_run_before_the_agent(
    workdir: Path, options: list[str], message: str
) -> None:
    (workdir / "judged.yaml").write_text(JUDGED_SPEC)
    args = ["run", "--agent", "run_agents:answer", "--spec", "judged.yaml", "--out", "out", "--judge-model", "m"]
    ran = evaltrace(*args, *options, cwd=workdir)
    assert ran.returncode == 2, ran.stderr
    [line] = ran.stderr.splitlines()
    assert line.startswith("Error: judge setup: ") and message in line, line
    assert "sk-run-early" not in ran.stderr + ran.stdout
    assert not (workdir / "out").exists()  # the agent never ran: nothing was recorded


def test_out_folder_with_spans_is_refused(workdir: Path) -> None:
    first = evaltrace("run", "--agent", "run_agents:answer", "--spec", "evals.yaml::fine", "--out", "o", cwd=workdir)
    assert first.returncode == 0, first.stderr
    again = evaltrace("run", "--agent", "run_agents:answer", "--spec", "evals.yaml::fine", "--out", "o", cwd=workdir)
    assert again.returncode == 2
    assert again.stderr.startswith("Error: ") and "already holds recorded spans" in again.stderr


def test_default_folder_is_new_under_runs(workdir: Path) -> None:
    ran = evaltrace("run", "--agent", "run_agents:answer", "--spec", "evals.yaml::fine", cwd=workdir)
    assert ran.returncode == 0, ran.stderr
    (folder,) = (workdir / "runs").iterdir()
    assert list(folder.glob("*.parquet"))
    assert f"into {Path('runs') / folder.name}" in ran.stderr


def test_shipped_sample_run_passes_the_gate() -> None:
    scored = evaltrace("score", "samples/runs", "--spec", "samples/evals.yaml", cwd=REPO)
    assert scored.returncode == 0, scored.stdout + scored.stderr
    assert "6 entries, 6 passed" in scored.stdout
