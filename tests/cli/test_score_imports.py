"""What `evaltrace score` imports before it scores: the modules of the scorers the spec names, no others.

Each check runs in a fresh interpreter (a subprocess), where nothing was imported before.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_TRAJECTORY_SPEC = """\
cases:
  - id: paris-weather
    input: What is the weather in Paris?
    expect:
      tool_calls: [{name: get_weather, arguments: {city: Paris}}]
      trajectory: {mode: in_order}
"""

_SCORE_THEN_LIST = """
import json, sys
from evaltrace.cli.main import main
code = main(sys.argv[1:])
print(json.dumps({"exit": code, "modules": sorted(sys.modules)}))
"""

_NOT_FOR_TRAJECTORIES = (
    "evaltrace.evaluators.scoring.scorers.judges",
    "evaltrace.evaluators.scoring.judge.session",
    "evaltrace.evaluators.scoring.scorers.output",
    "evaltrace.evaluators.scoring.scorers.tools",
    "evaltrace.evaluators.scoring.scorers.answer",
    "evaltrace.evaluators.scoring.scorers.limits",
    "evaltrace.evaluators.scoring.scorers.calls",
    "evaltrace.evaluators.scoring.scorers.reliability",
    "evaltrace.evaluators.scoring.scorers.steps",
    "jsonschema",
    "yaml",
    # Fixed costs of every score run, gone: the settings are plain pydantic models, and the baseline
    # comparison's modules load only with --baseline.
    "pydantic_settings",
    "evaltrace.evaluators.results.compare.comparison",
)


def _modules_after(*args: str | Path, cwd: Path) -> tuple[int, set[str], str]:
    done = subprocess.run(
        [sys.executable, "-c", _SCORE_THEN_LIST, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return found["exit"], set(found["modules"]), done.stderr


def test_a_trajectory_spec_imports_no_other_scorer_nor_the_judge_stack(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"cases": [{"id": "c", "input": "x", "expect": {"tool_calls": [{"name": "f"}]}}]}))
    report = tmp_path / "report.json"
    args = ("score", ROOT / "samples" / "runs", "--spec", spec, "--json", report, "--no-store")
    code, modules, stderr = _modules_after(*args, cwd=tmp_path)
    assert code in (0, 1), stderr
    assert json.loads(report.read_text())["entries"], "the spec's case was scored"
    assert "evaltrace.evaluators.scoring.scorers.trajectory" in modules
    assert "evaltrace.evaluators.scoring.columns" in modules
    assert sorted(modules & set(_NOT_FOR_TRAJECTORIES)) == []


def test_a_yaml_spec_still_loads_and_names_its_scorers_modules_only(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(_TRAJECTORY_SPEC + "      output: {contains: Paris}\n", encoding="utf-8")
    args = ("score", ROOT / "samples" / "runs", "--spec", spec, "--no-store")
    code, modules, stderr = _modules_after(*args, cwd=tmp_path)
    assert code in (0, 1), stderr
    assert {"yaml", "evaltrace.evaluators.scoring.scorers.output"} <= modules
    assert "evaltrace.evaluators.scoring.scorers.judges" not in modules


def test_score_help_imports_no_scorer_module() -> None:
    code, modules, _ = _modules_after("score", "--help", cwd=ROOT)
    assert code == 0
    assert not {
        m
        for m in modules
        if m.startswith(("evaltrace.evaluators.scoring.scorers.", "evaltrace.evaluators.scoring.judge"))
    } - {
        "evaltrace.evaluators.scoring.scorers.base",
        "evaltrace.evaluators.scoring.scorers.plugins",
        "evaltrace.evaluators.scoring.scorers.registry",
    }


_REGISTRY_CHECK = """
import json
from evaltrace.evaluators.errors import UnknownScorerError
from evaltrace.evaluators.scoring.scorers import registry
try:
    registry.scorer_class("trajectroy")
except UnknownScorerError as exc:
    message = str(exc)
loaded_after_error = sorted(registry.registered())
declared = {name: [ref.module.rsplit(".", 1)[1], ref.attr] for name, ref in registry.SCORERS._entries.items()}
import importlib
for module in {module for module, _ in declared.values()}:
    importlib.import_module("evaltrace.evaluators.scoring.scorers." + module)
table = {name: (cls.__module__.rsplit(".", 1)[1], cls.__qualname__) for name, cls in registry.registered().items()}
print(json.dumps({"message": message, "loaded": loaded_after_error, "table": table, "declared": declared}))
"""


def test_the_registry_lists_every_built_in_without_importing_them() -> None:
    done = subprocess.run([sys.executable, "-c", _REGISTRY_CHECK], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["loaded"] == []  # the error named every choice, yet imported none of them
    assert "(did you mean 'trajectory'?)" in found["message"]
    table = {name: list(where) for name, where in found["table"].items()}
    assert table == found["declared"]  # the lazy table is exactly what the modules register
    assert f"Valid choices: {', '.join(sorted(table))} (custom scorers" in found["message"]


_FORMS_CHECK = """
import json
from evaltrace.evaluators.scoring.columns import FORMS
from evaltrace.evaluators.scoring.scorers import registry
for name in registry.scorer_names():
    registry.scorer_class(name)
print(json.dumps({cls.name: [cls.__module__, form.__module__] for cls, form in FORMS.items()}))
"""

_RULES_WITH_FORMS = (
    *("trajectory", "tool_errors", "budget", "tool_efficiency", "usage", "latency", "cost", "output", "steps"),
    *("outcome", "groundedness", "correctness", "completeness", "answer_quality", "tool_call_validity"),
    *("tool_correctness", "tool_name_reliability", "tool_description_reliability"),
)


def test_every_rule_scorer_registers_its_columnar_form_beside_it() -> None:
    done = subprocess.run([sys.executable, "-c", _FORMS_CHECK], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert sorted(found) == sorted(_RULES_WITH_FORMS)
    assert all(scorer == form for scorer, form in found.values())  # each form is in its scorer's module


_COLLECTIONS_WHILE_IMPORTING = """
import gc, json, sys
from evaltrace.cli._scoring import score_options
from evaltrace.cli._scoring_options import JudgeArgs, SelectionArgs
counts: list[int] = []
gc.callbacks.append(lambda phase, info: counts.append(info["generation"]) if phase == "start" else None)
options = score_options(None, SelectionArgs(), None, 0, False, JudgeArgs())
imported = "numpy" in sys.modules and "pyarrow" in sys.modules
print(json.dumps({"during": counts, "enabled": gc.isenabled(), "imported": imported}))
"""


def test_the_scoring_machinery_is_imported_without_cyclic_collections() -> None:
    """Its ~120 collections found no garbage; the collector is back on after it."""
    done = subprocess.run(
        [sys.executable, "-c", _COLLECTIONS_WHILE_IMPORTING], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found == {"during": [], "enabled": True, "imported": True}
