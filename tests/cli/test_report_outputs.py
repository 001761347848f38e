"""`--junit` and `--markdown` on `evaltrace score` and `evaltrace run`: real recorded runs, real subprocesses."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from cli_process import evaltrace
from report_runs import PLUGIN, record_runs, write_spec

SCHEMA = xmlschema.XMLSchema(str(Path(__file__).resolve().parents[1] / "evaluators" / "results" / "junit-10.xsd"))
AGENTS = Path(__file__).resolve().parent / "run_agents.py"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    record_runs(tmp_path / "runs")
    write_spec(tmp_path)
    return tmp_path


def test_score_writes_json_junit_and_markdown_in_one_pass(workdir: Path) -> None:
    step = workdir / "step_summary.md"
    step.write_text("# Build\n\nearlier step output\n", encoding="utf-8")
    result = evaltrace(
        "score", "runs", "--spec", "evals.yaml", "--plugin", PLUGIN,
        "--json", "report.json", "--junit", "junit.xml", "--markdown", "summary.md",
        cwd=workdir, env={"GITHUB_STEP_SUMMARY": str(step)},
    )  # fmt: skip
    assert result.returncode == 1, result.stderr  # the run's gate fails: the reports are written all the same
    assert "Error" not in result.stderr and "Traceback" not in result.stderr
    report = json.loads((workdir / "report.json").read_text())

    SCHEMA.validate(str(workdir / "junit.xml"))
    root = ET.parse(workdir / "junit.xml").getroot()
    names = [case.attrib["name"] for case in root.iter("testcase")]
    assert sorted(names) == sorted(e["case_id"] for e in report["entries"])
    assert (root.attrib["tests"], root.attrib["failures"], root.attrib["errors"]) == ("6", "4", "1")

    summary = (workdir / "summary.md").read_text(encoding="utf-8")
    assert summary.startswith("## evaltrace: ❌ gate failed\n")
    assert f"**Gate FAILED**: {report['gate_reason']}".replace("<", "&lt;") in summary.splitlines()
    # Appended to the step summary after what earlier steps wrote, which is kept.
    assert step.read_text(encoding="utf-8") == "# Build\n\nearlier step output\n" + summary

    lines = result.stdout.splitlines()
    assert "scorer         passed  failed  did not apply  errors" in lines
    assert "t_report_boom       0       0              0       1" in lines
    worst = lines.index("Worst entries (lowest pass rate first):")
    listed = [line.split()[1] for line in lines[worst + 1 :] if line.startswith(("FAILED ", "MISSING "))]
    # rome passed 2 of 3 samples (rate 2/3): every other problem entry passed nothing and comes first.
    assert listed == ["hostile", "broken-scorer", "nothing-applies", "never-recorded", "rome"]
    assert not [p.name for p in workdir.iterdir() if p.name.endswith(".tmp")]  # no temporary file left


def test_without_a_spec_junit_has_one_suite_of_traces(workdir: Path) -> None:
    result = evaltrace("score", "runs", "--junit", "junit.xml", "--markdown", "summary.md", cwd=workdir)
    assert result.returncode == 0, result.stderr
    SCHEMA.validate(str(workdir / "junit.xml"))
    suites = ET.parse(workdir / "junit.xml").getroot().findall("testsuite")
    assert [(s.attrib["name"], s.attrib["tests"]) for s in suites] == [("evaltrace", "7")]
    assert all(len(case.attrib["name"]) == 32 for case in suites[0].iter("testcase"))  # named by trace id
    assert (workdir / "summary.md").read_text(encoding="utf-8").startswith("## evaltrace: ✅ gate passed\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--junit", "missing/junit.xml"], "Error: --junit missing/junit.xml: the folder missing does not exist"),
        (["--markdown", "missing/s.md"], "Error: --markdown missing/s.md: the folder missing does not exist"),
        (["--junit", "runs"], "Error: --junit runs: names a folder; give a file name"),
        (["--markdown", "out/"], "Error: --markdown out/: names a folder; give a file name"),
        (["--json", "runs"], "Error: --json runs: names a folder; give a file name"),
        (["--junit", "-"], "Error: --junit -: the junit report is written to a file only ('-' is for --json)"),
    ],
)
def test_bad_report_paths_are_refused_before_scoring(workdir: Path, args: list[str], message: str) -> None:
    # The PATH names nothing: a report path checked first is reported instead of the missing runs.
    result = evaltrace("score", "no-such-runs", "--spec", "evals.yaml", "--json", "report.json", *args, cwd=workdir)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [message]
    assert not (workdir / "report.json").exists()


def test_run_writes_junit_and_markdown(tmp_path: Path) -> None:
    shutil.copy(AGENTS, tmp_path / "run_agents.py")
    (tmp_path / "evals.yaml").write_text(
        'cases:\n  - id: fine\n    input: "hello"\n    tier: smoke\n'
        '    expect: {output: {contains: ["answer to hello"]}, tool_calls: [{name: lookup}]}\n'
    )
    ran = evaltrace(
        "run", "--agent", "run_agents:answer", "--spec", "evals.yaml", "--out", "o",
        "--junit", "junit.xml", "--markdown", "summary.md", cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    SCHEMA.validate(str(tmp_path / "junit.xml"))
    (suite,) = ET.parse(tmp_path / "junit.xml").getroot().findall("testsuite")
    assert (suite.attrib["name"], suite.attrib["tests"], suite.attrib["failures"]) == ("evals.smoke", "1", "0")
    assert "**Gate PASSED**" in (tmp_path / "summary.md").read_text(encoding="utf-8")


def test_run_refuses_a_bad_report_path_before_running_the_agent(tmp_path: Path) -> None:
    shutil.copy(AGENTS, tmp_path / "run_agents.py")
    (tmp_path / "evals.yaml").write_text(
        'cases:\n  - id: fine\n    input: "hello"\n    expect: {output: {contains: [x]}}\n'
    )
    ran = evaltrace(
        "run", "--agent", "run_agents:answer", "--spec", "evals.yaml", "--out", "o", "--junit", "nope/j.xml",
        cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 2
    assert ran.stderr.splitlines() == ["Error: --junit nope/j.xml: the folder nope does not exist"]
    assert not (tmp_path / "o").exists()  # the agent never ran
