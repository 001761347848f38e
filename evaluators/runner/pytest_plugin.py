"""evaltrace's pytest plugin (entry point `pytest11`, name `evaltrace`); docs/pytest.md is the user's view.

`evaltrace_recorder` records the spans a `with` block ends inside a root span (`evaltrace.test`),
so the agent's spans on the global tracer provider form one trace (spans on threads that do not
carry the OTel context are not seen), and rebuilds its `Trace` in memory. With no tracer provider
set, the plugin sets an SDK `TracerProvider`.

`@pytest.mark.evaltrace(confidence, repeat)` makes a test's parameter sets the cases of one
evaluation. Each case item passes, its outcome in `user_properties` (`evaltrace_pass_rate`) and a
report section; an extra item `<test>[evaltrace]` passes or fails with the group's verdict. A
case's pass rate is passed runs / `repeat` (listed as passed when every run passed), the group's
the mean of its cases' (the spec's `repeat: mean`); skipped cases do not count. The group is the
cases run in this session; groups split across processes (pytest-xdist) or reordered after
collection are reported as such.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from evaltrace.evaluators.runner.pytest_eval import EvalGroup, GateItem, MarkerConfig, group_key, render_summary

if TYPE_CHECKING:
    from evaltrace.evaluators.runner.pytest_trace import TraceRecorder

_GROUPS = pytest.StashKey[dict[str, EvalGroup]]()
_ITEM_GROUP = pytest.StashKey[EvalGroup]()
_REENTRANT = pytest.StashKey[bool]()
_MAX_FAILURE_CHARS = 300

MARKER_HELP = (
    "evaltrace(confidence=1.0, repeat=1): evaluation test; its parametrized cases pass as a group when "
    "their pass rate reaches confidence (each case run repeat times)"
)


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker and the per-session group table."""
    config.addinivalue_line("markers", MARKER_HELP)
    config.stash[_GROUPS] = {}


@pytest.fixture
def evaltrace_recorder() -> TraceRecorder:
    """Record the spans of a block and rebuild its trace.

    Use it as `with evaltrace_recorder() as run:` around the agent call, then read `run.trace`.
    """
    from evaltrace.evaluators.runner.pytest_trace import TraceRecorder

    return TraceRecorder()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group the marked items by test function and add each group's gate item after its last case."""
    groups = config.stash[_GROUPS]
    for item in items:
        marker = item.get_closest_marker("evaltrace")
        if marker is None or isinstance(item, GateItem):
            continue
        key = group_key(item)
        if key not in groups:
            groups[key] = EvalGroup(key=key, config=MarkerConfig.from_marker(item.nodeid, marker.args, marker.kwargs))
        groups[key].case_ids.append(item.nodeid)
        item.stash[_ITEM_GROUP] = groups[key]
    for group in groups.values():
        last = max(i for i, item in enumerate(items) if item.nodeid in group.case_ids)
        gate = GateItem.for_group(items[last], group)
        items.insert(last + 1, gate)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run an evaluation case `repeat` times, recording failures instead of raising them."""
    group = pyfuncitem.stash.get(_ITEM_GROUP, None)
    if group is None or pyfuncitem.stash.get(_REENTRANT, False):
        return None
    runs = _Runs()
    for _ in range(group.config.repeat):
        pyfuncitem.stash[_REENTRANT] = True
        try:
            # The other implementations (pytest's own, pytest-asyncio's...) run the body once.
            pyfuncitem.ihook.pytest_pyfunc_call(pyfuncitem=pyfuncitem)
        except (Exception, pytest.fail.Exception) as exc:
            runs.failures.append(_describe(exc))
        else:
            runs.passed += 1
        finally:
            pyfuncitem.stash[_REENTRANT] = False
    result = group.record(pyfuncitem.nodeid, _case_label(pyfuncitem), runs.passed, group.config.repeat, runs.failures)
    pyfuncitem.user_properties.append(("evaltrace_pass_rate", result.pass_rate))
    if runs.failures:
        pyfuncitem.add_report_section("call", "evaltrace", result.describe())
    return True


@dataclass
class _Runs:
    passed: int = 0
    failures: list[str] = field(default_factory=list)


def _describe(exc: BaseException) -> str:
    # The first line only: pytest's assertion rewriting appends multi-line explanations.
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else "(no message)"
    return f"{type(exc).__name__}: {text[:_MAX_FAILURE_CHARS]}"


def _case_label(item: pytest.Function) -> str:
    callspec = getattr(item, "callspec", None)
    return str(callspec.id) if callspec is not None else item.name


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Show each evaluation group's cases and pass rate."""
    groups = [g for g in config.stash.get(_GROUPS, {}).values() if g.results]
    if not groups:
        return
    terminalreporter.section("evaltrace")
    for line in render_summary(groups):
        terminalreporter.write_line(line)


def evaltrace_groups(config: pytest.Config) -> Iterator[EvalGroup]:
    """The evaluation groups of this session (for other plugins and reports)."""
    yield from config.stash.get(_GROUPS, {}).values()
