"""Record a real framework's run of each scenario and hold the rebuilt trace against the truth.

Each framework test gives an app (in `apps/`, run as `opentelemetry-instrument python APP
SCENARIO` in the framework's own venv, see `tests/_venvs.py`) and the venv's interpreter. The app
answers the scenario's prompt with its framework's agent, whose model is `FakeLLM` reached over
OpenAI's API (or Anthropic's Messages API), and prints the answer as its last stdout line. The recording goes through
evaltrace's exporter, picked by `OTEL_TRACES_EXPORTER=evaltrace` alone. The facts checked:
input, ordered tool names, arguments, results, error flags, answer, usage and iterations.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fake_llm import FakeLLM, Turn, call, text_turn, tool_turn
from flat_agreement import flat_agrees

from evaltrace.collector import resolve_paths
from evaltrace.collector.runfiles.reader import iter_traces
from evaltrace.collector.traces.rebuild import read_traces
from evaltrace.collector.traces.records import Trace

APPS = Path(__file__).resolve().with_name("apps")
REPO = Path(__file__).resolve().parents[2]
VENVS = REPO / ".framework-venvs"
"""Where each framework's venv is built (`VENVS / name`)."""

ANSWERS = {
    "sequential": "Paris: 18C and sunny; Lyon: 18C and sunny.",
    "parallel": "Paris and Rome: both 18C and sunny.",
    "failing_tool": "The lookup failed.",
    "no_tool": "Hello there!",
}
SCENARIOS = tuple(ANSWERS)


def _app_prompts() -> dict[str, str]:
    # The apps' own module (`apps/_tools.py`, not importable from here as a package) holds the prompts.
    spec = importlib.util.spec_from_file_location("_framework_app_tools", APPS / "_tools.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.PROMPTS)


PROMPTS = _app_prompts()
"""The user's message of each scenario, as the apps send it."""


def turns(scenario: str) -> list[Turn]:
    """The scripted model's replies for `scenario`."""
    answer = text_turn(ANSWERS[scenario])
    return {
        "sequential": [
            tool_turn(call("get_weather", {"city": "Paris"})),
            tool_turn(call("get_weather", {"city": "Lyon"})),
            answer,
        ],
        "parallel": [tool_turn(call("get_weather", {"city": "Paris"}), call("get_weather", {"city": "Rome"})), answer],
        "failing_tool": [tool_turn(call("lookup", {"code": "X1"})), answer],
        "no_tool": [answer],
    }[scenario]


@dataclass
class Recorded:
    """One recorded scenario: the rebuilt traces and the truth to hold them against."""

    scenario: str
    traces: list[Trace]
    tools: list[dict[str, Any]]
    """What the tools really did, in the order they ran."""
    answer: str
    usage: tuple[int, int]
    model_calls: int
    stderr: str


def record(
    python: Path, app: str, scenario: str, folder: Path, *, script: list[Turn] | None = None, **env_extra: str
) -> Recorded:
    """Run `apps/APP SCENARIO` under opentelemetry-instrument with `python`'s venv; read back what it recorded.

    `script` replaces the scenario's scripted turns, for a framework that must end its run another way
    (smolagents ends with its `final_answer` tool, not a text reply).
    """
    folder.mkdir(parents=True, exist_ok=True)
    tool_log = folder / "tools.jsonl"
    tool_log.touch()
    bin_dir = python.parent
    with FakeLLM(turns(scenario) if script is None else script) as llm:
        prefixes = ("OTEL_", "EVALTRACE_", "OPENAI_", "ANTHROPIC_", "VIRTUAL")
        env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
        closed = "http://127.0.0.1:9"  # nothing listens: a request meant for another host fails here
        env.update(
            PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
            OTEL_TRACES_EXPORTER="evaltrace",
            EVALTRACE_DIR=str(folder / "runs"),
            OPENAI_BASE_URL=llm.base_url,
            OPENAI_API_BASE=llm.base_url,
            OPENAI_API_KEY="sk-framework-test",
            ANTHROPIC_BASE_URL=llm.base_url.removesuffix("/v1"),  # the SDK adds `/v1/messages` itself
            ANTHROPIC_API_KEY="sk-ant-framework-test",
            TOOL_LOG=str(tool_log),
            HTTP_PROXY=closed,
            HTTPS_PROXY=closed,
            NO_PROXY="127.0.0.1,localhost",
        )
        env.update(env_extra)
        cmd = [str(bin_dir / "opentelemetry-instrument"), str(python), str(APPS / app), scenario]
        done = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{app} {scenario} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        assert not llm.errors, llm.errors
        usage, model_calls = llm.total_usage(), llm.consumed
    lines = done.stdout.strip().splitlines()
    tools = [json.loads(line) for line in tool_log.read_text().splitlines()]
    files = resolve_paths([folder / "runs"])
    traces = list(read_traces(files))
    for spans in iter_traces(files):  # where the flat GenAI row builder makes a row, it is the converter's
        flat_agrees(spans)
    return Recorded(scenario, traces, tools, lines[-1] if lines else "", usage, model_calls, done.stderr)


def assert_facts(recorded: Recorded, prompt: str) -> None:
    """The one rebuilt trace holds every fact of the run: the checks of the frameworks issue."""
    assert recorded.answer == ANSWERS[recorded.scenario], "the app did not print the scripted answer"
    assert len(recorded.traces) == 1, [(t.name, t.input, t.output) for t in recorded.traces]
    (trace,) = recorded.traces
    label = recorded.scenario
    assert trace.input == prompt, label
    assert trace.output == ANSWERS[recorded.scenario], label
    # A failed call's result is whatever the framework told the model, so only its error flag is compared.
    got = [(c.name, c.arguments, None if c.error else c.result, c.error is not None) for c in trace.tool_calls]
    want = [(t["name"], t["arguments"], t["result"], t["error"] is not None) for t in recorded.tools]
    if recorded.scenario == "parallel":  # tools run concurrently: the order they ran in is not the model's
        got, want = sorted(got, key=repr), sorted(want, key=repr)
    assert got == want, label
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == recorded.usage, label
    assert len(trace.iterations) == recorded.model_calls, label


RECIPE_QUESTION = "What's the weather in Paris?"
RECIPE_ANSWER = "It is 18C and sunny in Paris."


def check_readme_recipe(name: str, python: Path, folder: Path, requirements: tuple[str, ...], **env: str) -> None:
    """Run the README's recipe `name` as written in the framework's venv and check the rebuilt trace.

    The recipe's `pip install` line is checked instead of run: it must name exactly the pins the
    venv was built with (plus evaltrace), so what the README tells a user to install is what was
    tested. The app answers the weather question with one tool call; its last command's output and
    `evaltrace traces runs --json` must hold the input, the call with its arguments and result, the
    answer, the usage the model served and one iteration per model call.
    """
    from readme_blocks import recipes, run_lines, user_env

    recipe = recipes()[name]
    installs = [shlex.split(line)[2:] for line in recipe.commands if line.startswith("pip install ")]
    assert installs == [["evaltrace", *requirements]], f"README recipe {name} must install {requirements}"
    (folder / "app.py").write_text(recipe.app, encoding="utf-8")
    turns = [tool_turn(call("get_weather", {"city": "Paris"})), text_turn(RECIPE_ANSWER)]
    if name == "smolagents":  # a ToolCallingAgent ends its run only through its final_answer tool
        turns[-1] = tool_turn(call("final_answer", {"answer": RECIPE_ANSWER}))
    with FakeLLM(turns) as llm:
        path = f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"
        anthropic = {"ANTHROPIC_BASE_URL": llm.base_url.removesuffix("/v1"), "ANTHROPIC_API_KEY": "sk-ant-recipe-test"}
        shell = user_env(llm, PATH=path, **{**anthropic, **env})
        outputs = run_lines([*recipe.run_lines(), "evaltrace traces runs --json"], folder, shell)
        usage, model_calls = llm.total_usage(), llm.consumed
        assert model_calls == 2 and not llm.errors
    assert outputs[0].stdout.strip().splitlines()[-1] == RECIPE_ANSWER
    assert outputs[-2].stdout.rstrip().endswith("1 trace")  # the recipe's own `evaltrace traces runs`
    (trace,) = [json.loads(line) for line in outputs[-1].stdout.splitlines()]
    assert (trace["input"], trace["output"]) == (RECIPE_QUESTION, RECIPE_ANSWER)
    assert [(c["name"], c["arguments"], c["result"], c["error"]) for c in trace["tool_calls"]] == [
        ("get_weather", {"city": "Paris"}, "18C and sunny in Paris", None)
    ]
    assert (trace["usage"]["input_tokens"], trace["usage"]["output_tokens"]) == usage
    assert len(trace["iterations"]) == model_calls
