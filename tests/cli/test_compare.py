"""`evaltrace compare` and `score --baseline` on real recorded runs (OTel SDK spans, the Parquet exporter)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from _chromium import chromium_executable, headless_page
from cli_process import evaltrace
from report_runs import record_runs

CITIES = {
    "Paris": 18, "Tokyo": 24, "Rome": 21, "Oslo": 7, "Lima": 19, "Cairo": 31,
    "Quito": 14, "Hanoi": 29, "Dakar": 27, "Perth": 22,
}  # fmt: skip
HOSTILE = "\x1b[31mred\x1b[0m <b>x</b> | `tick` \u202eevil"


def _spec(threshold_city: str | None = None) -> str:
    lines = ["confidence: 0.5", "cases:"]
    for city, degrees in CITIES.items():
        # A changed scorer configuration: one case's output check asks for something else.
        shown = f"{degrees}C" if city == threshold_city else str(degrees)
        wanted = f'contains: ["{shown}"]'
        if city == "Quito":  # its reason quotes the answer (the planted hostile text in a regression)
            wanted = f'equals: "{degrees}C in {city}."'
        lines += [
            f"  - id: weather-{city.lower()}",
            f'    input: "What\'s the weather in {city}?"',
            "    expect:",
            f"      tool_calls: [{{name: get_weather, arguments: {{city: {city}}}}}]",
            f"      output: {{{wanted}}}",
        ]
    return "\n".join(lines) + "\n"


def _runs(wrong: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One run per city; the cities in `wrong` answer with that text (their output check fails)."""
    wrong = wrong or {}
    return [
        {"user": f"What's the weather in {city}?", "city": city, "answer": wrong.get(city, f"{degrees}C in {city}.")}
        for city, degrees in CITIES.items()
    ]


def _score(work: Path, name: str, runs: list[dict[str, Any]], spec: str = "evals.yaml") -> Path:
    record_runs(work / f"runs-{name}", runs)
    report = work / f"{name}.json"
    result = evaltrace("score", f"runs-{name}", "--spec", spec, "--json", report, "--store", "store", cwd=work)
    assert result.returncode in (0, 1), result.stderr
    stored = re.fullmatch(r"scores stored: (\w+) in store", result.stderr.strip())
    assert stored is not None, result.stderr
    (work / f"{name}.id").write_text(stored.group(1), encoding="utf-8")
    return report


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("compare")
    (folder / "evals.yaml").write_text(_spec(), encoding="utf-8")
    (folder / "evals-changed.yaml").write_text(_spec(threshold_city="Oslo"), encoding="utf-8")
    _score(folder, "base", _runs())
    _score(folder, "same", _runs())  # a second recording of the same behaviour: new trace ids
    # Seven cases regress: the exact McNemar p is 2 / 2^7 = 0.016, significant at 0.05.
    bad = dict.fromkeys(["Paris", "Tokyo", "Rome", "Oslo", "Lima", "Cairo"], "I could not find the weather.")
    _score(folder, "bad", _runs({**bad, "Quito": HOSTILE}))
    _score(folder, "one", _runs({"Perth": "Sunny, I think."}))
    _score(folder, "changed", _runs(), spec="evals-changed.yaml")
    extra = _spec() + '  - id: weather-bern\n    input: "Bern?"\n    expect: {output: {contains: ["9"]}}\n'
    (folder / "evals-extra.yaml").write_text(extra, encoding="utf-8")
    _score(folder, "extra", _runs(), spec="evals-extra.yaml")
    return folder


def test_planted_regressions_exit_1_and_are_named_with_the_new_reasons(work: Path) -> None:
    result = evaltrace("compare", "base.json", "bad.json", "--json", "cmp.json", "--markdown", "cmp.md", cwd=work)
    assert result.returncode == 1, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == "Comparing base.json (base) with bad.json (new), matched by case_id: paired"
    entries = next(line for line in lines if line.startswith("(entries)"))
    assert entries.split()[:4] == ["(entries)", "100.0%", "30.0%", "-70.0%"]
    assert "McNemar, 10 pairs" in entries and " 0.0156 " in entries
    regressed = [line.split()[0] for line in lines if line.startswith("  weather-")]
    # Each case twice: the entry's outcome and the output scorer; the tool call still passes.
    assert sorted(set(regressed)) == sorted(
        f"weather-{c}" for c in ["paris", "tokyo", "rome", "oslo", "lima", "cairo", "quito"]
    )
    assert "  weather-paris  output: missing '18'." in lines
    quito = next(line for line in lines if line.startswith("  weather-quito  output: expected exactly"))
    assert "\\x1b[31mred" in quito  # the recorded answer, quoted by the reason, escaped
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout  # the hostile answer is shown inert
    assert lines[-1].startswith(
        "FAILED: REGRESSION: the pass rate fell significantly (p < 0.05) for the entries, output"
    )

    # Every time has its unit: base -> new (signed delta, relative).
    timed = r"latency p(50|95): [\d.]+ (ms|s) -> [\d.]+ (ms|s) \([+-][\d.]+ (ms|s), [+-][\d.]+%\)"
    assert len([line for line in lines if re.fullmatch(timed, line)]) == 2, lines
    assert any(re.fullmatch(r"cost: \$[\d.]+ -> \$[\d.]+ \(.*\)", line) for line in lines), lines

    data = json.loads((work / "cmp.json").read_text(encoding="utf-8"))
    rows = {row["scorer"]: row for row in data["rows"]}
    assert (rows[None]["regressions"], rows[None]["fixes"], rows[None]["unchanged"]) == (7, 0, 3)
    assert rows[None]["p_value"] == pytest.approx(2 / 2**7)
    assert rows[None]["ci_high"] < 0 < 1 + rows[None]["ci_low"]
    assert rows["trajectory"]["delta"] == 0 and not rows["trajectory"]["significant_regression"]
    assert data["regressed"] is True and data["changed_scorers"] == []
    assert {s["name"] for s in data["stats"]} >= {"latency_p50_seconds", "input_tokens", "cost_usd"}
    tokens = next(s for s in data["stats"] if s["name"] == "input_tokens")
    assert tokens["base"] == tokens["new"] == 3000 and tokens["delta"] == 0

    markdown = (work / "cmp.md").read_text(encoding="utf-8")
    assert markdown.startswith("## evaltrace compare: ❌ regression (7 cases regressed)\n")
    assert "| (entries) | 100.0% | 30.0% | -70.0% * |" in markdown
    assert "### Regressions: 7 cases (14 outcomes)" in markdown
    assert "Regressions (passed -> failed), 7 cases (14 outcomes):" in lines
    assert "- `weather-quito` output:" in markdown
    assert len(re.findall(r"^- " + timed.replace("->", "-&gt;") + "$", markdown, re.M)) == 2, markdown
    assert "\x1b" not in markdown and "<b>" not in markdown and "&lt;b&gt;" in markdown


def test_the_html_page_is_self_contained_and_shows_the_regressions_as_text(work: Path) -> None:
    result = evaltrace("compare", "base.json", "bad.json", "--html", "cmp.html", cwd=work)
    assert result.returncode == 1, result.stderr
    page = (work / "cmp.html").read_text(encoding="utf-8")
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert "<script" not in page and not re.search(r"""(src|href)=|url\(|@import""", page)  # nothing fetched or run
    assert "FAILED: REGRESSION: the pass rate fell significantly" in page
    # 7 cases, each as entry and as output: counted as cases, the outcomes beside.
    assert "<h2>Regressions (passed → failed): 7 cases (14 outcomes)</h2>" in page
    for city in ["paris", "tokyo", "rome", "oslo", "lima", "cairo", "quito"]:
        assert f"<td>weather-{city}</td>" in page
    # The hostile answer quoted by a reason: escaped, its controls made visible.
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    assert "\x1b" not in page and "\u202e" not in page and "\\x1b[31mred" in page
    assert '<td class="num">100.0%</td><td class="num">30.0%</td>' in page  # the entries' row
    assert len(re.findall(r"<li>latency p(50|95): [\d.]+ (ms|s) -&gt; [\d.]+ (ms|s) \(", page)) == 2, page
    assert page.count('<rect class="new"') == page.count('<rect class="base"') >= 2  # a bar pair per row


def test_the_html_page_renders_in_chromium_with_nothing_run(work: Path) -> None:
    result = evaltrace("compare", "base.json", "bad.json", "--html", "cmp.html", cwd=work)
    assert result.returncode == 1, result.stderr
    with headless_page(chromium_executable()) as page:
        page.open(work / "cmp.html")
        assert page.problems() == []  # no console error, CSP violation, exception or dialog
        assert page.evaluate("[document.scripts.length, document.images.length]") == [0, 0]
        shown = page.evaluate("document.body.innerText")
        assert "Regressions (passed → failed): 7 cases (14 outcomes)" in shown and "weather-quito" in shown
        assert "<b>x</b>" in shown and "\\x1b[31mred" in shown  # the hostile answer as text
        bars = page.evaluate("[...document.querySelectorAll('svg rect.new')].map(r => r.getBBox().width)")
        assert len(bars) >= 2 and all(width >= 0 for width in bars) and max(bars) > 0  # drawn, not empty


def test_stored_runs_are_compared_by_run_id(work: Path) -> None:
    base_id, bad_id = (work / "base.id").read_text(), (work / "bad.id").read_text()
    result = evaltrace("compare", base_id, bad_id[:20].lower(), "--store", "store", "--json", "-", cwd=work)
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert (data["base"], data["new"]) == (base_id, bad_id)  # a unique prefix names the run, any case
    from_files = json.loads(evaltrace("compare", "base.json", "bad.json", "--json", "-", cwd=work).stdout)
    for key in ("rows", "regressions", "fixes", "new_cases", "missing_cases", "changed_scorers", "verdict"):
        assert data[key] == from_files[key], key
    # A report against a stored run: EVALTRACE_STORE names the store.
    mixed = evaltrace(
        "compare", "base.json", (work / "same.id").read_text(), env={"EVALTRACE_STORE": "store"}, cwd=work
    )
    assert mixed.returncode == 0, mixed.stderr
    unknown = evaltrace("compare", base_id, "01ZZZZ", "--store", "store", cwd=work)
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("Error: 01ZZZZ: no such report file; store: no scoring run '01ZZZZ' (latest: ")


def test_identical_runs_exit_0(work: Path) -> None:
    result = evaltrace("compare", "base.json", "same.json", cwd=work)
    assert result.returncode == 0, result.stderr
    assert "Regressions" not in result.stdout
    assert result.stdout.splitlines()[-1] == "OK: no regression"
    entries = next(line for line in result.stdout.splitlines() if line.startswith("(entries)"))
    assert entries.split()[:4] == ["(entries)", "100.0%", "100.0%", "+0.0%"]


def test_one_regression_is_not_significant_but_fails_with_strict(work: Path) -> None:
    result = evaltrace("compare", "base.json", "one.json", cwd=work)
    assert result.returncode == 0, result.stderr
    assert "  weather-perth  entry: output: " in result.stdout
    # The entry and its output scorer both regressed: one case, counted once, and never shown as a success.
    assert result.stdout.splitlines()[-1] == "WARNING: 1 case regressed (not significant at alpha=0.05)"
    strict = evaltrace("compare", "base.json", "one.json", "--strict", "--markdown", "one.md", cwd=work)
    assert strict.returncode == 1
    assert strict.stdout.splitlines()[-1] == "FAILED: REGRESSION (--strict): 1 case went from passed to failed"
    assert (work / "one.md").read_text(encoding="utf-8").startswith("## evaltrace compare: ❌ regression (1 case")
    warned = evaltrace("compare", "base.json", "one.json", "--markdown", "warn.md", "--html", "warn.html", cwd=work)
    assert warned.returncode == 0, warned.stderr
    heading = (work / "warn.md").read_text(encoding="utf-8").splitlines()[0]
    assert heading == "## evaltrace compare: ⚠️ 1 case regressed (not significant at alpha=0.05)"
    assert '<p class="verdict warn">WARNING: 1 case regressed' in (work / "warn.html").read_text(encoding="utf-8")


def test_the_other_way_round_the_regressions_are_fixes(work: Path) -> None:
    result = evaltrace("compare", "bad.json", "base.json", "--json", "-", cwd=work)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["regressions"] == [] and len(data["fixes"]) == 14
    assert "Fixes (failed -> passed): weather-paris" in result.stderr  # the summary moves to stderr


def test_changed_scorer_configuration_exits_2_and_lists_the_scorer(work: Path) -> None:
    result = evaltrace("compare", "base.json", "changed.json", cwd=work)
    assert result.returncode == 2
    assert result.stderr.startswith("Error: the scorers changed between base.json and changed.json: output (")
    assert len(result.stderr.splitlines()) == 1
    assert any(line.startswith("Changed scorer: output (v") for line in result.stdout.splitlines())
    allowed = evaltrace("compare", "base.json", "changed.json", "--allow-changed-scorers", cwd=work)
    assert allowed.returncode == 0, allowed.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope.json", "base.json"], "Error: nope.json: no such report file"),
        (["base.json", "evals.yaml"], "Error: evals.yaml: not a JSON report of evaltrace score ("),
        (["base.json", "runs-base"], "Error: runs-base: not a file (give a JSON report or a scoring-run id)"),
        (["base.json", "same.json", "--alpha", "0"], "Error: --alpha 0: give a significance level between 0 and 0.5"),
        (
            ["base.json", "same.json", "--markdown", "no/such/dir/x.md"],
            "Error: --markdown no/such/dir/x.md: the folder",
        ),
        (["base.json", "same.json", "--html", "-"], "Error: --html -: the html report is written to a file only"),
        (["base.json", "same.json", "--html", "runs-base"], "Error: --html runs-base: names a folder"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(work: Path, args: list[str], message: str) -> None:
    result = evaltrace("compare", *args, cwd=work)
    assert result.returncode == 2
    assert result.stderr.startswith(message), result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr


def test_a_report_missing_its_fields_is_named(work: Path) -> None:
    broken = json.loads((work / "base.json").read_text(encoding="utf-8"))
    broken["entries"][0]["passed"] = "maybe"
    (work / "broken.json").write_text(json.dumps(broken), encoding="utf-8")
    result = evaltrace("compare", "base.json", "broken.json", cwd=work)
    assert result.returncode == 2
    assert result.stderr.startswith("Error: broken.json: not a valid evaltrace report: entries.0.passed: ")


def test_score_with_a_baseline_fails_the_gate_on_a_significant_regression(work: Path) -> None:
    result = evaltrace(
        "score", "runs-bad", "--spec", "evals.yaml", "--confidence", "0.2", "--baseline", "base.json", cwd=work
    )
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index("Against the baseline base.json:")
    assert any(line.startswith("  weather-paris  entry: output: ") for line in lines[start:])
    assert lines[-1].startswith("Baseline: FAILED: REGRESSION: the pass rate fell significantly")
    same = evaltrace("score", "runs-same", "--spec", "evals.yaml", "--baseline", "base.json", cwd=work)
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.splitlines()[-1] == "Baseline: OK: no regression"
    missing = evaltrace("score", "runs-same", "--spec", "evals.yaml", "--baseline", "gone.json", cwd=work)
    assert missing.returncode == 2
    assert missing.stderr.startswith("Error: gone.json: no such report file")


def test_score_baseline_counts_each_regressed_case_once_and_never_shows_success(work: Path) -> None:
    # Perth passed in the baseline and fails now (its entry and its output scorer): one regressed case.
    args = ("score", "runs-one", "--spec", "evals.yaml", "--baseline", "base.json", "--no-store")
    result = evaltrace(*args, "--markdown", "one-score.md", "--json", "one-score.json", cwd=work)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "Baseline: WARNING: 1 case regressed (not significant at alpha=0.05)"
    summary = (work / "one-score.md").read_text(encoding="utf-8")
    assert summary.startswith("## evaltrace: ⚠️ gate passed, 1 case regressed (not significant at alpha=0.05)\n")
    assert "✅" not in summary and "- weather-perth" in summary
    baseline = json.loads((work / "one-score.json").read_text(encoding="utf-8"))["baseline"]
    assert (baseline["regressed"], baseline["regressed_cases"], baseline["ref"]) == (
        False,
        ["weather-perth"],
        "base.json",
    )

    strict = evaltrace(*args, "--strict", "--markdown", "strict.md", "--html", "strict.html", cwd=work)
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert (
        strict.stdout.splitlines()[-1] == "Baseline: FAILED: REGRESSION (--strict): 1 case went from passed to failed"
    )
    assert (work / "strict.md").read_text(encoding="utf-8").startswith("## evaltrace: ❌ gate failed\n")
    page = (work / "strict.html").read_text(encoding="utf-8")
    assert "<title>evaltrace: gate failed</title>" in page and '<div class="gate fail" id="baseline">' in page


def test_score_alpha_sets_the_baseline_tests_level(work: Path) -> None:
    # Seven regressions: p = 0.016, significant at 0.05 but not at 0.01 (then only counted, exit 0).
    args = ("score", "runs-bad", "--spec", "evals.yaml", "--confidence", "0.2", "--baseline", "base.json", "--no-store")
    lenient = evaltrace(*args, "--alpha", "0.01", cwd=work)
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr
    assert lenient.stdout.splitlines()[-1] == "Baseline: WARNING: 7 cases regressed (not significant at alpha=0.01)"
    default = evaltrace(*args, cwd=work)
    assert default.returncode == 1
    assert default.stdout.splitlines()[-1].endswith("for the entries, output (7 cases regressed)")
    for extra in (["--strict"], ["--alpha", "0.01"]):
        alone = evaltrace("score", "runs-one", "--spec", "evals.yaml", "--no-store", *extra, cwd=work)
        assert alone.returncode == 2
        assert alone.stderr == "Error: --alpha and --strict test against a baseline: pass --baseline REF\n"
    agent = evaltrace("run", "--agent", "no_such_module:run", "--spec", "evals.yaml", "--strict", cwd=work)
    assert (agent.returncode, agent.stderr) == (
        2,
        "Error: --alpha and --strict test against a baseline: pass --baseline REF\n",
    )
    wrong = evaltrace(*args, "--alpha", "0.7", cwd=work)
    assert wrong.returncode == 2 and wrong.stderr.startswith("Error: --alpha 0.7: give a significance level")


def test_an_added_case_is_a_new_case_not_a_changed_scorer(work: Path) -> None:
    result = evaltrace("compare", "base.json", "extra.json", "--json", "-", cwd=work)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    # Bern was never recorded (its entry fails as missing), but it has no BASE to regress from.
    assert (data["new_cases"], data["missing_cases"], data["changed_scorers"]) == (["weather-bern"], [], [])
    assert data["rows"][0]["n_base"] == 10 and data["regressions"] == []
    back = json.loads(evaltrace("compare", "extra.json", "base.json", "--json", "-", cwd=work).stdout)
    assert back["missing_cases"] == ["weather-bern"] and back["changed_scorers"] == []


def test_without_a_spec_different_traces_are_compared_unpaired(work: Path) -> None:
    for name in ("base", "bad"):
        scored = evaltrace("score", f"runs-{name}", "--json", f"free-{name}.json", "--no-store", cwd=work)
        assert scored.returncode in (0, 1), scored.stderr
    result = evaltrace("compare", "free-base.json", "free-bad.json", "--json", "-", cwd=work)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["matched_by"] == "trace_id"
    assert len(data["new_cases"]) == len(data["missing_cases"]) == 10
    entries = data["rows"][0]
    assert (entries["test"], entries["paired"], entries["n_base"], entries["n_new"]) == (
        "two-proportion-z",
        False,
        10,
        10,
    )
    assert "matched by trace_id: unpaired (no case in common)" in result.stderr
