"""Every recipe of docs/frameworks.md ("Frameworks and recipes") works exactly as written.

Each recipe's app is saved as app.py in a fresh folder and its shell lines run in bash, as a user
would run them, against `FakeLLM` standing in for OpenAI (reached through `OPENAI_BASE_URL`, which
the openai client reads). Its `pip install` line is checked instead of run: the extra it names
must exist, and the suite's environment holds every package it requires. The recorded run is
then read back with `evaltrace traces --json` and compared with what the scripted model and the
tool did. HTTP(S) proxies point at a closed local port, so a request meant for any other host
fails instead of leaving the machine.
"""

from __future__ import annotations

import json
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLM, call, text_turn, tool_turn
from packaging.requirements import Requirement
from readme_blocks import BIN, Recipe, extra_requirements, recipes, run_lines, user_env

QUESTION = "What's the weather in Paris?"
ANSWER = "It is 18C and sunny in Paris."
MAIN_VENV = ("langgraph", "openai", "openai-agents", "pydantic-ai")
"""Recipes whose extras the suite's environment installs; they run here."""
FRAMEWORK_VENVS = (
    "agent-framework",
    "anthropic",
    "crewai",
    "google-adk",
    "langgraph-openllmetry",
    "llamaindex",
    "smolagents",
    "strands",
)
"""Recipes run in their framework's own venv by tests/frameworks/test_*.py (harness.check_readme_recipe)."""
RECIPES = {name: recipe for name, recipe in recipes().items() if name in MAIN_VENV}


def test_every_readme_recipe_is_run_by_a_test() -> None:
    assert sorted(recipes()) == sorted(MAIN_VENV + FRAMEWORK_VENVS)


def rebuilt(folder: Path) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [str(BIN / "evaltrace"), "traces", "runs", "--json"], cwd=folder, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def assert_installed(recipe: Recipe) -> None:
    assert recipe.extras(), f"recipe {recipe.name} names no evaltrace extra to install"
    for extra in recipe.extras():
        needed = extra_requirements(extra)
        assert needed, f"evaltrace has no extra {extra!r}"
        for text in needed:
            req = Requirement(text)
            try:
                have = version(req.name)
            except PackageNotFoundError:
                pytest.fail(f"extra {extra!r} needs {text}, which the suite's environment lacks")
            assert req.specifier.contains(have, prereleases=True), f"{req.name} {have} does not satisfy {text}"


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_recipe_records_the_whole_run(name: str, tmp_path: Path) -> None:
    recipe = RECIPES[name]
    assert_installed(recipe)
    (tmp_path / "app.py").write_text(recipe.app, encoding="utf-8")
    with FakeLLM([tool_turn(call("get_weather", {"city": "Paris"})), text_turn(ANSWER)]) as llm:
        outputs = run_lines(recipe.run_lines(), tmp_path, user_env(llm))
        usage = llm.total_usage()
        assert len(llm.requests) == 2 and not llm.errors
        assert QUESTION in json.dumps(llm.requests[0])  # the model was asked the question (`run.input`)
    assert outputs[0].stdout.strip() == ANSWER  # the app ran the agent to its answer
    assert "is not a valid option" not in outputs[0].stderr  # no setting evaltrace made was refused
    (trace,) = rebuilt(tmp_path)
    assert trace["input"] == QUESTION
    assert trace["output"] == ANSWER
    assert [(c["name"], c["arguments"], c["result"], c["error"]) for c in trace["tool_calls"]] == [
        ("get_weather", {"city": "Paris"}, "18C and sunny in Paris", None)
    ]
    assert (trace["usage"]["input_tokens"], trace["usage"]["output_tokens"]) == usage
    assert len(trace["iterations"]) == 2
    listing = outputs[-1].stdout  # `evaltrace traces runs`: the table a user reads
    assert trace["trace_id"][:8] in listing and QUESTION in listing and listing.rstrip().endswith("1 trace")


def test_the_run_files_queries_read_a_recording(tmp_path: Path) -> None:
    # docs/runs.md's DuckDB queries, as written (relative paths read from the recording's folder):
    # usage per model over the openai recipe's span files, and log records an app emitted through
    # the OTel logs API (the openai extra's openai-v2 puts content on its spans, not in log records).
    import duckdb
    from readme_blocks import sql_block

    recipe = RECIPES["openai"]
    (tmp_path / "app.py").write_text(recipe.app, encoding="utf-8")
    (tmp_path / "events.py").write_text(EVENTS_APP, encoding="utf-8")
    with FakeLLM([tool_turn(call("get_weather", {"city": "Paris"})), text_turn(ANSWER)]) as llm:
        run_lines([*recipe.run_lines()[:1], "python events.py"], tmp_path, user_env(llm))
        input_tokens = llm.total_usage()[0]
    queries = [q for q in sql_block("gen_ai_request_model").split(";") if q.strip()]
    connection = duckdb.connect()
    connection.execute(f"SET file_search_path = '{tmp_path}'")
    assert connection.sql(queries[0]).fetchall() == [("gpt-4o-mini", input_tokens)]
    assert connection.sql(queries[1]).fetchall() == [("gen_ai.user.message", 2)]


EVENTS_APP = """
from opentelemetry._logs import LogRecord, get_logger

from evaltrace.collector import record

record()
for text in ("hi", "bye"):
    get_logger("app").emit(LogRecord(event_name="gen_ai.user.message", body={"content": text}))
"""
