"""Third-party extensions through entry points: one installed distribution adds a scorer and a report format.

The distribution is laid out as pip installs it (module + `.dist-info` with `entry_points.txt`) on
PYTHONPATH of a real `evaltrace` subprocess, so `importlib.metadata` finds it as any installed package.
"""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

from cli_process import evaltrace

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_RUNS = ROOT / "samples" / "runs"

EXTENSION = '''\
import csv
from typing import Any, ClassVar

from evaltrace.evaluators import Score, Scorer


class NamesParis(Scorer):
    """The answer names Paris."""

    name: ClassVar[str] = "names_paris"

    def score(self, trace: Any, case: Any = None) -> Score:
        named = "paris" in (trace.output or "").lower()
        return self.result(named, None, "Paris named" if named else "no Paris")


class CsvReport:
    """One row per entry (case, status, each scorer's verdict), then the gate."""

    def __init__(self, target: Any) -> None:
        self.path = target.destination
        self.rows: list[list[str]] = []

    def add(self, entry: Any) -> None:
        result = entry.result()
        verdicts = ";".join(f"{s.scorer}={s.passed}" for s in result.scores)
        self.rows.append([str(result.case_id), result.status, verdicts])

    def finish(self, report: Any) -> None:
        with open(self.path, "w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerows([["case_id", "status", "scores"], *self.rows, ["gate", str(report.passed), ""]])

    def abort(self) -> None:
        self.rows.clear()
'''

ENTRY_POINTS = """\
[evaltrace.scorers]
names_paris = demo_ext:NamesParis

[evaltrace.report_formats]
csv = demo_ext:CsvReport
"""

SPEC = """\
scorers: [names_paris]
cases:
  - id: paris-weather
    input: "What's the weather in Paris?"
  - id: two-cities
    input: "What's the weather in Paris and Tokyo?"
"""


def install(site: Path, module_source: str = EXTENSION, entry_points: str = ENTRY_POINTS) -> dict[str, str]:
    """The distribution `demo-ext` 0.1 as pip lays it out; the environment that finds it."""
    site.mkdir(parents=True)
    (site / "demo_ext.py").write_text(module_source, encoding="utf-8")
    info = site / "demo_ext-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-ext\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")
    return {"PYTHONPATH": str(site)}


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


def test_an_installed_scorer_and_report_format_score_the_sample_run(tmp_path: Path) -> None:
    env = install(tmp_path / "site")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    table, report = tmp_path / "scores.csv", tmp_path / "report.json"
    args = ("score", SAMPLE_RUNS, "--spec", spec, "--report", f"csv={table}", "--json", report, "--no-store")
    result = evaltrace(*args, cwd=tmp_path, env=env)
    assert result.returncode in (0, 1), result.stderr
    rows = list(csv.reader(table.read_text(encoding="utf-8").splitlines()))
    entries = json.loads(report.read_text(encoding="utf-8"))["entries"]
    # The plugin format wrote the entries the JSON report holds, with the plugin scorer's verdicts.
    expected = [
        [e["case_id"], e["status"], ";".join(f"names_paris={s['passed']}" for s in e["scores"])] for e in entries
    ]
    assert rows[0] == ["case_id", "status", "scores"]
    assert rows[1:-1] == expected
    assert {row[0] for row in rows[1:-1]} == {"paris-weather", "two-cities"}
    assert all("names_paris=" in row[2] for row in rows[1:-1])
    assert rows[-1] == ["gate", str(json.loads(report.read_text(encoding="utf-8"))["passed"]), ""]


def test_the_installed_scorer_is_listed_and_formats_are_named_in_errors(tmp_path: Path) -> None:
    env = install(tmp_path / "site")
    listed = evaltrace("scorers", cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "names_paris (rule, from demo_ext): The answer names Paris." in listed.stdout
    wrong = evaltrace("score", SAMPLE_RUNS, "--report", f"csvv={tmp_path / 'x.csv'}", cwd=tmp_path, env=env)
    assert one_error_line(wrong) == (
        "Error: Unknown report format 'csvv' (did you mean 'csv'?). Valid choices: csv, html, json, junit, markdown"
    )


def test_a_broken_report_format_plugin_is_one_line_naming_its_entry_point(tmp_path: Path) -> None:
    env = install(
        tmp_path / "site",
        "raise ImportError('needs xlsxwriter')\n",
        "[evaltrace.report_formats]\nxlsx = demo_ext:Xlsx\n",
    )
    line = one_error_line(
        evaltrace("score", SAMPLE_RUNS, "--report", f"json={tmp_path / 'r.json'}", cwd=tmp_path, env=env)
    )
    assert line == (
        "Error: report format plugin xlsx = demo_ext:Xlsx (from demo-ext 0.1): "
        "could not be loaded (ImportError: needs xlsxwriter)"
    )
