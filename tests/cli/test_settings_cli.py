"""`score` and `run` settings end to end (real subprocesses): one spec load per command, and a bad
variable is one `Error:` line naming it (exit 2), an option beating its variable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from cli_process import evaltrace

REPO = Path(__file__).resolve().parents[2]
AGENTS = Path(__file__).resolve().parent / "run_agents.py"
SAMPLE_RUNS = REPO / "samples" / "runs"

SPEC = """
cases:
  - id: fine
    input: "hello"
    expect: {output: {contains: ["answer to hello"]}}
"""
JUDGED_SPEC = """
cases:
  - id: judged
    input: "What is the weather in Paris?"
    expect:
      semantic_output: {rubric: "Gives the weather"}
"""

_COUNTING_SPEC_LOADS = """
import json, sys
from evaltrace.evaluators.scoring.spec import loader
real, loads = loader.load_spec, []
def counting(*args, **kwargs):
    loads.append(str(args[0]))
    return real(*args, **kwargs)
loader.load_spec = counting
from evaltrace.cli.main import main
code = main(sys.argv[1:])
print(json.dumps({"exit": code, "loads": loads}))
"""


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("EVALTRACE_JUDGE_", "OPENAI_"))}


def test_run_loads_its_spec_once(tmp_path: Path) -> None:
    shutil.copy(AGENTS, tmp_path / "run_agents.py")
    (tmp_path / "evals.yaml").write_text(SPEC)
    args = ["run", "--agent", "run_agents:answer", "--spec", "evals.yaml", "--no-store", "--out", "runs"]
    done = subprocess.run(
        [sys.executable, "-c", _COUNTING_SPEC_LOADS, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["exit"] == 0, done.stderr
    assert found["loads"] == ["evals.yaml"], "the spec is loaded once, before the agent runs"


def test_a_bad_judge_variable_is_one_error_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / "judged.yaml").write_text(JUDGED_SPEC)
    env = {**_clean_env(), "EVALTRACE_JUDGE_CONCURRENCY": "0"}
    done = evaltrace("score", SAMPLE_RUNS, "--spec", "judged.yaml", "--no-store", cwd=tmp_path, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "Error: judge setting EVALTRACE_JUDGE_CONCURRENCY: Input should be greater than or equal to 1"
    )


def test_an_option_beats_its_variable(tmp_path: Path) -> None:
    # --judge-timeout is given: the variable's bad value is not used, so the run goes on to the judge's
    # setup, which then stops it for the model nobody set.
    (tmp_path / "judged.yaml").write_text(JUDGED_SPEC)
    env = {**_clean_env(), "EVALTRACE_JUDGE_TIMEOUT": "soon", "EVALTRACE_JUDGE_API_KEY": "sk-cli-settings"}
    args = ("score", SAMPLE_RUNS, "--spec", "judged.yaml", "--no-store", "--judge-timeout", "5")
    done = evaltrace(*args, cwd=tmp_path, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == "Error: judge setup: EVALTRACE_JUDGE_MODEL is not set (or pass --judge-model)"
    assert "sk-cli-settings" not in done.stdout + done.stderr


def test_the_options_carried_to_the_engine_show_no_key() -> None:
    from evaltrace.cli._scoring import score_options
    from evaltrace.cli._scoring_options import JudgeArgs, SelectionArgs
    from evaltrace.evaluators.scoring.judge.settings import JudgeSettings

    judge = JudgeArgs("m", "http://127.0.0.1:9/v1", "sk-carried-key\n", no_judge_cache=True)
    options = score_options(None, SelectionArgs(), None, 0, False, judge)
    assert "sk-carried-key" not in repr(options)
    settings = JudgeSettings.from_env({}, **options.judge_overrides)
    assert settings.api_key is not None and settings.api_key.get_secret_value() == "sk-carried-key"
    assert (settings.model, settings.cache) == ("m", False)
