"""Agent runs nested 300 deep (130 KB of spans): every command answers, none ends in a RecursionError.

The run is recorded with the real OTel SDK and evaltrace's Parquet exporter: agent 0 asks a model,
which calls the tool `delegate`, whose span holds agent 1, and so on. Runs nested past
`MAX_NESTED_RUNS` are cut and the trace says so; `score`, `traces`, `show` and the reports run as
real subprocesses.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path

import pytest
from cli_process import evaltrace
from genai_spans import Recorder, agent_attrs, chat, messages, text, tool_attrs, tool_call

DEPTH = 300
MAX_NESTED_RUNS = 32
"""The converter's documented cap (`_assemble.MAX_NESTED_RUNS`, SECURITY.md)."""
SPEC = """\
cases:
  - id: deep
    input: go
    expect:
      tool_calls: [{name: delegate}]
"""


def _record(folder: Path, depth: int) -> Path:
    rec = Recorder(folder)
    with ExitStack() as stack:
        for level in range(depth):
            stack.enter_context(rec.span(f"invoke_agent a{level}", agent_attrs(f"a{level}")))
            asked = messages(("user", [text("go")]))
            chat(rec, "gpt-test", asked, messages(("assistant", [tool_call(f"c{level}", "delegate", {})])), (1, 1))
            stack.enter_context(rec.span("execute_tool delegate", tool_attrs("delegate", f"c{level}", {})))
        chat(rec, "gpt-test", messages(("user", [text("go")])), messages(("assistant", [text("done")])), (1, 1))
    rec.close()
    return folder


@pytest.fixture(scope="module")
def deep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _record(tmp_path_factory.mktemp("deep"), DEPTH)


def _warning() -> str:
    return f"{DEPTH - 1 - MAX_NESTED_RUNS} agent run(s) nested more than {MAX_NESTED_RUNS} deep were cut"


def _clean(done: object) -> None:
    stderr = getattr(done, "stderr", "")
    assert "Traceback" not in stderr and "RecursionError" not in stderr, stderr


def test_score_and_every_report_of_300_nested_runs(deep: Path, tmp_path: Path) -> None:
    assert sum(path.stat().st_size for path in deep.glob("*.parquet")) > 30_000
    spec = tmp_path / "evals.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    reports = {"--html": "r.html", "--markdown": "r.md", "--junit": "r.xml", "--json": "r.json"}
    options = [str(part) for option, name in reports.items() for part in (option, tmp_path / name)]
    cache = tmp_path / "cache"
    for attempt in ("cold", "warm"):  # the second reads the traces cache back
        done = evaltrace("score", deep, "--spec", spec, "--no-store", *options, env={"EVALTRACE_CACHE_DIR": str(cache)})
        _clean(done)
        assert done.returncode == 0, (attempt, done.stderr)
    assert _warning() in (tmp_path / "r.html").read_text(encoding="utf-8")
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["entries"][0]["status"] == "passed"


def test_traces_and_show_of_300_nested_runs(deep: Path) -> None:
    listed = evaltrace("traces", deep)
    _clean(listed)
    assert listed.returncode == 0 and "1 trace" in listed.stdout
    as_json = evaltrace("traces", deep, "--json")
    _clean(as_json)
    (line,) = as_json.stdout.splitlines()
    trace = json.loads(line)
    assert any(_warning() in warning for warning in trace["warnings"])
    levels, current = 0, trace
    while current["tool_calls"] and current["tool_calls"][0]["child"] is not None:
        current, levels = current["tool_calls"][0]["child"], levels + 1
    assert levels == MAX_NESTED_RUNS  # every run up to the cap is kept, nested as recorded
    assert len(line) < 200_000  # each nested run written once, not doubled per level
    shown = evaltrace("show", trace["trace_id"], deep)
    _clean(shown)
    assert shown.returncode == 0 and _warning() in shown.stdout


def test_a_3000_deep_chain_of_plain_spans_is_read(tmp_path: Path) -> None:
    """Span nesting without agents: walked with a stack, not a recursion."""
    rec = Recorder(tmp_path)
    with ExitStack() as stack:
        stack.enter_context(rec.span("invoke_agent a", agent_attrs("a")))
        for level in range(3000):
            stack.enter_context(rec.span(f"step {level}"))
        chat(rec, "gpt-test", messages(("user", [text("go")])), messages(("assistant", [text("done")])), (1, 1))
    rec.close()
    done = evaltrace("traces", tmp_path, "--json")
    _clean(done)
    assert done.returncode == 0
    assert json.loads(done.stdout)["output"] == "done"


def test_a_handoff_chain_of_300_agents(tmp_path: Path) -> None:
    """Each handoff's child is the rest of the chain: 300 handoffs nest 300 traces (and wrote 2^n of JSON)."""
    rec = Recorder(tmp_path)
    with rec.span("workflow"):
        for k in range(DEPTH):
            with rec.span(f"invoke_agent a{k}", agent_attrs(f"a{k}")):
                handed = messages(("assistant", [tool_call(f"h{k}", "transfer", {})]))
                chat(rec, "gpt-test", messages(("user", [text("go")])), handed, (1, 1))
                with rec.span("execute_tool transfer", tool_attrs("transfer", f"h{k}", {}, f"a{k + 1}")):
                    pass
    rec.close()
    done = evaltrace("traces", tmp_path, "--json", timeout=60)
    _clean(done)
    assert done.returncode == 0
    (trace,) = [json.loads(line) for line in done.stdout.splitlines()]
    split = DEPTH // (MAX_NESTED_RUNS + 1)
    assert f"{split} handoff(s) more than {MAX_NESTED_RUNS} deep were not followed" in trace["warnings"][0]
    assert len(done.stdout) < 2_000_000
    spec = tmp_path / "evals.yaml"
    spec.write_text(SPEC.replace("delegate", "a0"), encoding="utf-8")
    scored = evaltrace("score", tmp_path, "--spec", spec, "--no-store", "--html", tmp_path / "r.html", timeout=60)
    _clean(scored)
    assert scored.returncode in (0, 1)
