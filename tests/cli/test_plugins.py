"""Custom scorers from outside evaltrace: `--plugin` files and modules, and installed entry points.

Real subprocesses of the CLI on the shipped sample recording. The installed plugin is a real
distribution as pip lays it out (a `.dist-info` folder with `entry_points.txt`) on PYTHONPATH, so
`importlib.metadata` finds it the way it finds any installed package.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_process import evaltrace

from evaltrace.collector.traces.records import ToolCall, Trace

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_RUNS = ROOT / "samples" / "runs"
SAMPLE_SCORERS = ROOT / "samples" / "scorers.py"

SPEC = """\
confidence: 1.0
scorers: [{scorer}]
cases:
  - id: paris-weather
    input: "What's the weather in Paris?"
  - id: two-cities
    input: "What's the weather in Paris and Tokyo?"
"""

LONG_ANSWER = '''\
from typing import Any, ClassVar

from evaltrace.evaluators import Score, Scorer, register


@register
class LongAnswer(Scorer):
    """The answer has at most `max_words` words."""

    name: ClassVar[str] = "long_answer"
    max_words: int = 100
    """Most words allowed."""

    def score(self, trace: Any, case: Any = None) -> Score:
        words = len((trace.output or "").split())
        return self.result(words <= self.max_words, None, f"{words} words (max {self.max_words})")
'''


def write_spec(folder: Path, scorer: str) -> Path:
    spec = folder / "spec.yaml"
    spec.write_text(SPEC.format(scorer=scorer), encoding="utf-8")
    return spec


def scores(report: Path, scorer: str) -> dict[str, dict[str, Any]]:
    entries = json.loads(report.read_text(encoding="utf-8"))["entries"]
    return {e["case_id"]: s for e in entries for s in e["scores"] if s["scorer"] == scorer}


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


def install_fake_dist(site: Path, module_source: str, entry_point: str) -> None:
    """A distribution `demo-scorers` 0.1 laid out as pip installs it: module plus `.dist-info`."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "demo_scorers.py").write_text(module_source, encoding="utf-8")
    info = site / "demo_scorers-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-scorers\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[evaltrace.scorers]\n{entry_point}\n", encoding="utf-8")


def test_plugin_file_scorer_scores_the_sample_run(tmp_path: Path) -> None:
    # The README's command, with the JSON report added.
    spec = ROOT / "samples" / "evals-custom.yaml"
    report = tmp_path / "report.json"
    result = evaltrace(
        "score", "samples/runs", "--spec", spec, "--plugin", "samples/scorers.py", "--json", report, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    found = scores(report, "cities_named")
    assert {case: s["reason"] for case, s in found.items()} == {
        "paris-weather": "The answer names Paris.",
        "two-cities": "The answer names Paris, Tokyo.",
        "tokyo-time": "The answer names Tokyo.",
        "unknown-city": "The answer names Atlantis.",
    }
    assert all(s["passed"] is True and s["value"] == 1.0 for s in found.values())


def test_without_the_plugin_the_spec_names_an_unknown_scorer(tmp_path: Path) -> None:
    line = one_error_line(evaltrace("score", SAMPLE_RUNS, "--spec", write_spec(tmp_path, "cities_named"), cwd=tmp_path))
    assert "scorers[0]: Unknown scorer 'cities_named'" in line
    assert "--plugin" in line


def test_plugins_from_the_environment_and_in_forked_workers(tmp_path: Path) -> None:
    (tmp_path / "long.py").write_text(LONG_ANSWER, encoding="utf-8")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(scorer="{long_answer: {max_words: 5}}"), encoding="utf-8")
    report = tmp_path / "report.json"
    # Two forked workers: the scorer registered in the parent must be there in each of them.
    result = evaltrace(
        "score", SAMPLE_RUNS, "--spec", spec, "--workers", "2", "--json", report,
        cwd=tmp_path, env={"EVALTRACE_PLUGINS": "long.py"},
    )  # fmt: skip
    assert result.returncode == 1, result.stderr  # the sample's answers are longer than 5 words
    found = scores(report, "long_answer")
    assert {case: s["passed"] for case, s in found.items()} == {"paris-weather": False, "two-cities": False}
    assert found["paris-weather"]["reason"].endswith("words (max 5)")


def test_plugin_module_and_class_references(tmp_path: Path) -> None:
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "my_checks.py").write_text(LONG_ANSWER.replace("@register\n", ""), encoding="utf-8")
    env = {"PYTHONPATH": str(tmp_path / "site")}
    listed = evaltrace("scorers", "--json", "--plugin", "my_checks:LongAnswer", cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    by_name = {s["name"]: s for s in json.loads(listed.stdout)["scorers"]}
    assert by_name["long_answer"]["module"] == "my_checks"
    assert (by_name["long_answer"]["builtin"], by_name["trajectory"]["builtin"]) == (False, True)
    assert by_name["long_answer"]["options"][0]["name"] == "max_words"
    # Without the class named, a module whose class is not decorated registers nothing.
    line = one_error_line(evaltrace("scorers", "--plugin", "my_checks", cwd=tmp_path, env=env))
    assert line.startswith("Error: --plugin my_checks: the module registers no scorer")


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("missing.py", "--plugin missing.py: no such file 'missing.py'"),
        ("no_such_module", "--plugin no_such_module: no module named 'no_such_module'"),
        ("broken.py", "--plugin broken.py: import failed (ZeroDivisionError: division by zero)"),
        ("exits.py", "--plugin exits.py: import failed (SystemExit: 3)"),
        ("needs_numpyx", "--plugin needs_numpyx: import failed (ModuleNotFoundError: No module named 'numpyx')"),
        ("json:dumps", "--plugin json:dumps: names <function dumps"),
        ("json:nothing", "--plugin json:nothing: json has no attribute 'nothing'"),
        ("clash.py", "--plugin clash.py: import failed (ValueError: scorer name 'trajectory' is registered twice"),
    ],
)
def test_bad_plugins_exit_2_naming_them(tmp_path: Path, ref: str, message: str) -> None:
    (tmp_path / "broken.py").write_text("1 / 0\n", encoding="utf-8")
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(3)\n", encoding="utf-8")
    (tmp_path / "needs_numpyx.py").write_text("import numpyx\n", encoding="utf-8")
    (tmp_path / "clash.py").write_text(LONG_ANSWER.replace('"long_answer"', '"trajectory"'), encoding="utf-8")
    line = one_error_line(evaltrace("score", SAMPLE_RUNS, "--plugin", ref, cwd=tmp_path))
    assert message in line


def test_installed_entry_point_scorer_is_listed_and_scores(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install_fake_dist(site, LONG_ANSWER.replace("@register\n", ""), "long_answer = demo_scorers:LongAnswer")
    env = {"PYTHONPATH": str(site)}
    listed = evaltrace("scorers", cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "long_answer (rule, from demo_scorers): The answer has at most `max_words` words." in listed.stdout
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(scorer="{long_answer: {max_words: 500}}"), encoding="utf-8")
    report = tmp_path / "report.json"
    result = evaltrace("score", SAMPLE_RUNS, "--spec", spec, "--json", report, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert all(s["passed"] for s in scores(report, "long_answer").values())


def test_broken_entry_point_is_one_line_naming_the_distribution(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install_fake_dist(site, "raise ImportError('needs numpy')\n", "long_answer = demo_scorers:LongAnswer")
    line = one_error_line(evaltrace("scorers", cwd=tmp_path, env={"PYTHONPATH": str(site)}))
    assert line == (
        "Error: scorer plugin long_answer = demo_scorers:LongAnswer (from demo-scorers 0.1): "
        "could not be loaded (ImportError: needs numpy)"
    )


@pytest.mark.usefixtures("isolated_registry")
def test_sample_scorer_finds_places_missing_from_the_answer() -> None:
    sys.path.insert(0, str(ROOT))
    try:
        from samples.scorers import CitiesNamed
    finally:
        sys.path.remove(str(ROOT))
    calls = [
        ToolCall(name="get_weather", arguments={"city": "Paris"}),
        ToolCall(name="get_weather", arguments={"city": "New York"}),
        ToolCall(name="get_weather", arguments={"city": "Paris"}),
        ToolCall(name="get_local_time", arguments={"place": "Nice"}),
    ]
    both = Trace(trace_id="t1", output="PARIS: 18°C. New York: 24°C.", tool_calls=calls)
    one = Trace(trace_id="t2", output="Parisian weather is mild; in New York it is 24°C.", tool_calls=calls)
    scorer = CitiesNamed()
    assert scorer.score(both).passed is True
    verdict = scorer.score(one)  # "Parisian" is not "Paris": whole words only
    assert (verdict.passed, verdict.value, verdict.reason) == (False, 0.5, "The answer does not name Paris.")
    assert verdict.details == {"missing": ["Paris"]}
    by_place = CitiesNamed(argument="place")
    assert by_place.score(one).reason == "The answer does not name Nice."
    assert scorer.score(Trace(trace_id="t3", output="Hi!")).passed is None


def test_plugin_scorer_configured_per_case_and_checked_like_a_built_in(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        'cases:\n  - id: tokyo-time\n    input: "What time is it in Tokyo?"\n'
        "    expect:\n      cities_named: {argument: city}\n",
        encoding="utf-8",
    )
    report = tmp_path / "report.json"
    scored = evaltrace("score", SAMPLE_RUNS, "--spec", spec, "--plugin", SAMPLE_SCORERS, "--json", report, cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr
    assert scores(report, "cities_named")["tokyo-time"]["reason"] == "The answer names Tokyo."
    spec.write_text(spec.read_text(encoding="utf-8").replace("argument:", "argumnt:"), encoding="utf-8")
    line = one_error_line(evaltrace("score", SAMPLE_RUNS, "--spec", spec, "--plugin", SAMPLE_SCORERS, cwd=tmp_path))
    assert line.endswith(
        "case 'tokyo-time': expect.cities_named: scorer 'cities_named': argumnt: Extra inputs are not permitted"
    )


def test_async_plugin_scorer_runs_without_a_judge_session(tmp_path: Path) -> None:
    (tmp_path / "waits.py").write_text(
        "import asyncio\n"
        "from typing import ClassVar\n"
        "from evaltrace.evaluators import Scorer, register\n"
        "@register\n"
        "class Waits(Scorer):\n"
        '    """Waits on its own I/O."""\n'
        "    name: ClassVar[str] = 'waits'\n"
        "    def score(self, trace, case=None):\n"
        "        raise AssertionError('awaited, not called')\n"
        "    async def ascore(self, trace, case=None):\n"
        "        await asyncio.sleep(0.01)\n"
        "        return self.result(True, 1.0, 'waited')\n",
        encoding="utf-8",
    )
    listed = evaltrace("scorers", "--plugin", "waits.py", cwd=tmp_path)
    assert "waits (async, from " in listed.stdout, listed.stderr
    # A judge setting that would not parse does not matter: no judge session is opened for it.
    env = {"EVALTRACE_JUDGE_TIMEOUT": "not-a-number"}
    scored = evaltrace(
        "score", SAMPLE_RUNS, "--spec", write_spec(tmp_path, "waits"), "--plugin", "waits.py", cwd=tmp_path, env=env
    )
    assert scored.returncode == 0, scored.stderr
    assert "Judge:" not in scored.stdout


def test_the_evaltrace_script_finds_a_plugin_module_in_the_working_directory(tmp_path: Path) -> None:
    # `python -m` puts the working directory on sys.path, the console script does not: a user
    # typing `evaltrace ... --plugin my_checks` next to my_checks.py expects it found all the same.
    (tmp_path / "my_checks.py").write_text(LONG_ANSWER, encoding="utf-8")
    script = Path(sys.executable).with_name("evaltrace")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(script), "scorers", "--json", "--plugin", "my_checks"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "long_answer" in {s["name"] for s in json.loads(done.stdout)["scorers"]}


SHADOW = 'raise SystemExit("./httpx.py from the working directory was imported")\n'
# Where a fresh `import httpx` would load from, asked of sys.path itself (not of sys.modules).
WHERE_HTTPX = """
import importlib.machinery, os, sys

def where_httpx() -> str:
    spec = importlib.machinery.PathFinder.find_spec("httpx")
    shadowed = spec is not None and str(spec.origin).startswith(os.getcwd())
    return f"cwd-on-path={os.getcwd() in sys.path} httpx-shadowed={shadowed}"
"""
PROBE_SCORER = (
    WHERE_HTTPX
    + '''
from typing import Any, ClassVar
from evaltrace.evaluators import Score, Scorer, register

@register
class WherePath(Scorer):
    """Says what sys.path looks like while scoring."""

    name: ClassVar[str] = "where_path"

    def score(self, trace: Any, case: Any = None) -> Score:
        return self.result(True, None, where_httpx())
'''
)


def _script(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    # The console script, as users run it: unlike `python -m`, it does not put the working
    # directory on sys.path itself, so only plugin loading could have left it there.
    script = Path(sys.executable).with_name("evaltrace")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(script), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


def test_plugin_module_from_the_working_directory_leaves_sys_path_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "httpx.py").write_text(SHADOW, encoding="utf-8")
    (tmp_path / "where_checks.py").write_text(PROBE_SCORER, encoding="utf-8")
    report = tmp_path / "report.json"
    spec = write_spec(tmp_path, "where_path")
    done = _script("score", SAMPLE_RUNS, "--spec", spec, "--plugin", "where_checks", "--json", report, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    reasons = {s["reason"] for s in scores(report, "where_path").values()}
    assert reasons == {"cwd-on-path=False httpx-shadowed=False"}


def test_agent_module_from_the_working_directory_leaves_sys_path_as_it_was(tmp_path: Path) -> None:
    shutil.copy(ROOT / "tests" / "cli" / "run_agents.py", tmp_path / "run_agents.py")
    (tmp_path / "httpx.py").write_text(SHADOW, encoding="utf-8")
    # A sibling imported at module level is found: the directory is on sys.path during the import.
    agent = WHERE_HTTPX + "\nimport run_agents\n\ndef answer(question: str) -> str:\n"
    agent += "    return run_agents.answer(f'{question} {where_httpx()}')\n"
    (tmp_path / "where_agent.py").write_text(agent, encoding="utf-8")
    (tmp_path / "evals.yaml").write_text(
        'cases:\n  - id: c\n    input: "hi"\n'
        '    expect: {output: {contains: ["cwd-on-path=False httpx-shadowed=False"]}}\n',
        encoding="utf-8",
    )
    done = _script("run", "--agent", "where_agent:answer", "--spec", "evals.yaml", "--out", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Gate PASSED" in done.stdout
