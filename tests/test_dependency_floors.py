"""The OpenTelemetry floors in pyproject.toml are releases the tests run evaltrace on (issue 28, item 12).

A floor below what is tested lets pip install releases evaltrace was never run with: with 1.38
evaltrace did not import, and 1.39's OTLP/HTTP exporter followed redirects with the headers and
the body. The suite itself runs newer releases; frameworks pin older ones (Google ADK 2.13 allows
OTel 1.39 to 1.44), so the floor is as low as such a framework needs and is run here: a cached venv
holds exactly the floor releases plus evaltrace (editable), and its `evaltrace` imports, scores the
samples as the suite's does, and follows no redirect when sending. Each floor must be met by the
suite's release and name the release the floor venv runs (same minor), so moving a floor means
running evaltrace on the new one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from _venvs import cached_venv
from packaging.requirements import Requirement
from packaging.version import Version

from tests.collector.otlp._send_fixtures import OtlpReceiver, evaltrace, record_run, running_receiver

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = REPO / "pyproject.toml"
SAMPLE_RUNS = REPO / "samples" / "runs"
FLOORED = ("opentelemetry-sdk", "opentelemetry-exporter-otlp", "opentelemetry-instrumentation")
PINNED_WITH = {"opentelemetry-api": "opentelemetry-sdk"}
"""Released in step with a floored package (the SDK pins its API release): pinned to that floor."""
SECRET = "x-api-key=very-secret-value"


def _floors() -> dict[str, Version]:
    dependencies = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["dependencies"]
    floors = {}
    for line in dependencies:
        requirement = Requirement(line)
        for specifier in requirement.specifier:
            if specifier.operator == ">=":
                floors[requirement.name] = Version(specifier.version)
    return floors


def _floor_pins() -> list[str]:
    floors = _floors()
    pins = {package: floors[package] for package in FLOORED}
    pins |= {package: floors[source] for package, source in PINNED_WITH.items()}
    return [f"{package}=={release}" for package, release in sorted(pins.items())]


@pytest.fixture(scope="module")
def floor_python() -> Path:
    """The interpreter of a cached venv with exactly the floor releases and evaltrace (editable)."""
    return cached_venv(REPO / ".framework-venvs" / "otel_floor", _floor_pins(), with_evaltrace=True)


@pytest.fixture(scope="module")
def floor_releases(floor_python: Path) -> dict[str, Version]:
    """What the floor venv has installed of the floored packages."""
    names = [*FLOORED, *PINNED_WITH]
    code = f"import json, importlib.metadata as m; print(json.dumps({{n: m.version(n) for n in {names!r}}}))"
    done = subprocess.run([floor_python, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return {name: Version(release) for name, release in json.loads(done.stdout).items()}


@pytest.mark.parametrize("package", FLOORED)
def test_the_suite_runs_a_release_at_or_above_the_floor(package: str) -> None:
    floor = _floors()[package]
    installed = Version(version(package))
    assert installed >= floor, f"{package} {installed} is below its floor {floor}"


@pytest.mark.parametrize("package", [*FLOORED, *PINNED_WITH])
def test_the_floor_is_the_release_the_floor_venv_runs(package: str, floor_releases: dict[str, Version]) -> None:
    floor = _floors()[PINNED_WITH.get(package, package)]
    installed = floor_releases[package]
    assert installed >= floor and installed.release[:2] == floor.release[:2], (
        f"{package}: the floor venv runs {installed}, the floor is {floor}"
    )


def test_evaltrace_imports_and_answers_on_the_floor(floor_python: Path) -> None:
    done = evaltrace("--help", python=floor_python)
    assert done.returncode == 0, done.stderr
    assert "score" in done.stdout and "replay" in done.stdout


def _score(python: Path | str, folder: Path) -> dict[str, Any]:
    report = folder / "report.json"
    done = evaltrace("score", SAMPLE_RUNS, "--json", report, "--no-store", python=python)
    assert done.returncode == 1, done.stderr  # the samples fail their gate on purpose (5 of 6 pass)
    assert "Traceback" not in done.stderr, done.stderr
    full = json.loads(report.read_text(encoding="utf-8"))
    return {key: full[key] for key in ("inputs", "passed", "pass_rate", "counts", "scorer_counts", "usage")}


def test_score_on_the_floor_matches_the_suites(floor_python: Path, tmp_path: Path) -> None:
    (tmp_path / "floor").mkdir()
    (tmp_path / "suite").mkdir()
    on_floor = _score(floor_python, tmp_path / "floor")
    assert on_floor["passed"] is False and on_floor["pass_rate"] == pytest.approx(5 / 6)
    assert on_floor == _score(sys.executable, tmp_path / "suite")


def _redirected(python: Path, *args: str | Path) -> tuple[int, str, OtlpReceiver]:
    """Run a command on the floor sending to a backend that answers 307 to a second receiver."""
    elsewhere = OtlpReceiver()
    with running_receiver(elsewhere):
        redirecting = OtlpReceiver(redirect_to=elsewhere.endpoint)
        with running_receiver(redirecting):
            command = (redirecting.endpoint if a == "ENDPOINT" else a for a in args)
            done = evaltrace(*command, python=python)
            where = redirecting.endpoint
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stderr.replace(where, "ENDPOINT"), elsewhere


def test_send_results_follows_no_redirect_on_the_floor(floor_python: Path, tmp_path: Path) -> None:
    code, stderr, elsewhere = _redirected(
        floor_python, "score", SAMPLE_RUNS, "--json", tmp_path / "report.json", "--no-store",
        "--send-results", "ENDPOINT", "--header", SECRET,
    )  # fmt: skip
    assert elsewhere.requests == []  # neither the header nor a record reached the host redirected to
    assert code == 2, stderr
    assert "results sent" not in stderr and "very-secret-value" not in stderr
    assert "Error: --send-results ENDPOINT/v1/logs: the backend answered HTTP 307" in stderr, stderr


def test_replay_follows_no_redirect_on_the_floor(floor_python: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    record_run(runs)
    code, stderr, elsewhere = _redirected(floor_python, "replay", runs, "--endpoint", "ENDPOINT", "--header", SECRET)
    assert elsewhere.requests == []
    assert code == 2, stderr
    assert stderr.splitlines() == [
        "Error: --endpoint ENDPOINT/v1/logs: the backend answered HTTP 307 Temporary Redirect (a redirect is not "
        "followed: give the endpoint it points to); nothing sent"
    ]
