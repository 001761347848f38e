"""The history's logic on real scorings written into a real store: counts, change marks, selection, errors.

The runs are recorded with the real OTel SDK and exporter (`report_runs.py`) and scored by the
engine into the score store, as `evaltrace score` does; expected figures come from each scoring's
report.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from report_runs import PLUGIN, SPEC, record_runs, write_spec

from evaltrace.collector.errors import InputError
from evaltrace.evaluators.engine import scoring
from evaltrace.evaluators.engine.scoring import ScoreOptions
from evaltrace.evaluators.results.compare.history import HistoryOptions, load_history
from evaltrace.evaluators.results.compare.history_html import render_html
from evaltrace.evaluators.results.compare.history_render import level, render_text, sparkline
from evaltrace.evaluators.results.report.model import Report
from evaltrace.evaluators.results.store.writer import open_store
from evaltrace.evaluators.scoring.scorers.registry import load_plugins
from evaltrace.evaluators.scoring.spec.loader import load_spec


@pytest.fixture
def plugin_scorers(isolated_registry: None) -> Iterator[None]:
    load_plugins([str(PLUGIN)])
    yield


def score_into(store: Path, runs: Path, spec_file: Path | None) -> Report:
    """Score `runs` into `store` as `evaltrace score` does; the report (with its scorer counts)."""
    spec = load_spec(spec_file) if spec_file is not None else None
    writer = open_store(store, spec)
    try:
        run = scoring.score([runs], spec, ScoreOptions(paths=(str(runs),), workers=1), writer)
        writer.finish(run.report)
    finally:
        writer.abort()
    return run.report


def test_counts_errors_and_not_applied_match_the_reports(tmp_path: Path, plugin_scorers: None) -> None:
    runs, store = record_runs(tmp_path / "runs"), tmp_path / "store"
    reports = [score_into(store, runs, write_spec(tmp_path)), score_into(store, runs, None)]
    history = load_history(store, HistoryOptions())
    assert [run.gate_pass_rate for run in history.runs] == [report.pass_rate for report in reports]
    series = {s.scorer: s.points for s in history.scorers}
    for n, report in enumerate(reports):
        for count in report.scorer_counts:
            point = series[count.scorer][n]
            counted = (point.passed, point.failed, point.errors, point.not_applied)
            assert counted == (count.passed, count.failed, count.errors, count.not_applied)
            applied = count.passed + count.failed
            assert point.pass_rate == (count.passed / applied if applied else None)
    assert series["t_report_boom"][0].errors == 1 and series["t_report_boom"][0].pass_rate == 0.0
    assert sum(point[1].not_applied for point in series.values()) > 0  # the defaults do not apply to some traces
    assert series["t_report_boom"][1].configs == [] and series["t_report_boom"][1].pass_rate is None


def test_a_changed_configuration_is_marked_against_the_last_run_the_scorer_ran_in(
    tmp_path: Path, plugin_scorers: None
) -> None:
    runs, store = record_runs(tmp_path / "runs"), tmp_path / "store"
    spec = write_spec(tmp_path)
    score_into(store, runs, spec)
    score_into(store, runs, spec)  # the same spec: nothing changed
    score_into(store, runs, None)  # the defaults: the spec's scorers do not run
    spec.write_text(SPEC.replace('contains: ["21"]', 'contains: ["Rome"]'), encoding="utf-8")
    score_into(store, runs, spec)  # output's configuration changed for the rome case
    history = load_history(store, HistoryOptions())
    series = {s.scorer: s.points for s in history.scorers}
    assert [p.changed for p in series["output"]] == [False, False, False, True]
    assert [p.configs == [] for p in series["output"]] == [False, False, True, False]
    assert [p.pass_rate for p in series["output"]][2] is None
    assert [p.changed for p in series["t_report_echo"]] == [False] * 4  # back as it was before the gap
    assert [r.spec_changed for r in history.runs] == [False, False, True, True]
    assert sparkline([p.pass_rate for p in series["t_report_echo"]], [False] * 4) == "▁▁·▁"

    window = load_history(store, HistoryOptions(last=1, scorers=["output"]))
    assert [s.scorer for s in window.scorers] == ["output"] and len(window.runs) == 1
    assert window.scorers[0].points[0].changed and window.runs[0].spec_changed  # against the run before the window

    by_path = load_history(store, HistoryOptions(spec=str(spec)))  # edited since: its runs by the path recorded
    assert [r.run_id for r in by_path.runs] == [history.runs[n].run_id for n in (0, 1, 3)]
    assert by_path.runs_in_store == 4


def test_only_scorers_that_ran_in_the_window_are_shown(tmp_path: Path, plugin_scorers: None) -> None:
    runs, store = record_runs(tmp_path / "runs"), tmp_path / "store"
    score_into(store, runs, write_spec(tmp_path))
    defaults = score_into(store, runs, None)
    history = load_history(store, HistoryOptions(last=1))
    assert [s.scorer for s in history.scorers] == [c.scorer for c in defaults.scorer_counts]
    with_old = load_history(store, HistoryOptions(last=1, scorers=["t_report_echo"]))  # asked for: shown, no rate
    assert [p.pass_rate for p in with_old.scorers[0].points] == [None]
    assert "·" in render_text(with_old) and "did not run" in render_text(with_old)


def test_levels_are_even_over_0_to_100_percent() -> None:
    assert [level(n / 7) for n in range(8)] == list("▁▂▃▄▅▆▇█")
    assert (level(0.0), level(0.0714), level(0.0715), level(1.0)) == ("▁", "▁", "▂", "█")
    assert sparkline([1.0, None, 0.5, 0.0], [False, False, True, False]) == "█·|▅▁"


def test_html_cuts_the_line_at_a_change(tmp_path: Path, plugin_scorers: None) -> None:
    runs, store = record_runs(tmp_path / "runs"), tmp_path / "store"
    spec = write_spec(tmp_path)
    for text in (SPEC, SPEC, SPEC.replace('contains: ["21"]', 'contains: ["Rome"]')):
        spec.write_text(text, encoding="utf-8")
        score_into(store, runs, spec)
    page = render_html(load_history(store, HistoryOptions(scorers=["output"])))
    gate, output = page.split("<svg")[1:3]
    assert output.count("<polyline") == 2 and output.count('class="change"') == 1  # runs 1-2, then run 3
    assert gate.count("<polyline") == 2 and output.count("<circle") == 3


def test_bad_stores_and_selections_are_input_errors(tmp_path: Path, plugin_scorers: None) -> None:
    with pytest.raises(InputError, match="no score store here: the folder does not exist"):
        load_history(tmp_path / "nowhere", HistoryOptions())
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="holds no scoring run yet"):
        load_history(tmp_path / "empty", HistoryOptions())
    store = tmp_path / "store"
    score_into(store, record_runs(tmp_path / "runs"), write_spec(tmp_path))
    with pytest.raises(InputError, match=r"--scorer nope: no such scorer in the stored runs \(scorers: output, t_rep"):
        load_history(store, HistoryOptions(scorers=["nope"]))
    with pytest.raises(InputError, match=r"--spec x.yaml: no stored scoring run used this spec \(specs in the store: "):
        load_history(store, HistoryOptions(spec="x.yaml"))
    (store / "scores" / next((store / "scores").iterdir()).name).unlink()  # a listed run's scores file is gone
    with pytest.raises(InputError, match="cannot read the score store file"):
        load_history(store, HistoryOptions())
