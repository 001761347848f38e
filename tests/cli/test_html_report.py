"""`--html FILE` on `evaltrace score` and `evaltrace run`: real recorded runs scored in subprocesses, the page
opened in headless Chromium (see tests/_chromium.py) and used as a reader would: filters, drill-down, hostile text.

A screenshot of each page is kept under the test's tmp_path and copied to tests/artifacts/ (ignored by git).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _chromium import Page, chromium_executable, headless_page
from cli_process import evaltrace
from report_runs import HOSTILE, PLUGIN, RUNS, record_runs, write_spec

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "tests" / "artifacts"
AGENTS = Path(__file__).resolve().parent / "run_agents.py"
SCRIPT_BREAK = "</script><script>alert(1)</script>"
ATTRIBUTE_BREAK = '"><img src=x onerror=alert(1)>'
ANSWER = f"{HOSTILE} {SCRIPT_BREAK} {ATTRIBUTE_BREAK}"
"""The hostile case's recorded answer: the report tests' hostile text plus script and attribute breakers."""

VISIBLE_CASES = "[...document.querySelectorAll('#entry-list .entry')].filter(e => !e.hidden).map(e => e.querySelector('.case').textContent)"  # noqa: E501


@pytest.fixture(scope="module")
def chromium() -> str:
    return chromium_executable()


def keep_screenshot(page: Page, tmp_path: Path, name: str) -> Path:
    shot = page.screenshot(tmp_path / name)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / ".gitignore").write_text("*\n")
    shutil.copy(shot, ARTIFACTS / name)
    print(f"screenshot: {ARTIFACTS / name}")
    return shot


def choose(page: Page, select: str, option: str) -> None:
    """Pick the option shown as `option` in the filter `select`, as a user's change would."""
    page.evaluate(
        f"(s => {{ s.value = [...s.options].find(o => o.text === {json.dumps(option)}).value;"
        f" s.dispatchEvent(new Event('change')); }})(document.getElementById({json.dumps(select)}))"
    )


@pytest.fixture
def scored(tmp_path: Path) -> tuple[Path, dict[str, object]]:
    runs = [dict(run, answer=ANSWER) if run["user"] == "Tell me about the weather" else run for run in RUNS]
    record_runs(tmp_path / "runs", runs)
    write_spec(tmp_path)
    result = evaltrace(
        "score", "runs", "--spec", "evals.yaml", "--plugin", PLUGIN, "--json", "report.json", "--html", "report.html",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr  # the gate fails; the page is written all the same
    assert "Error" not in result.stderr and "Traceback" not in result.stderr
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    return tmp_path / "report.html", json.loads((tmp_path / "report.json").read_text())


def test_page_renders_filters_and_drills_down_in_chromium(
    chromium: str, scored: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    html, report = scored
    entries = report["entries"]
    assert isinstance(entries, list)
    failed = sorted(e["case_id"] for e in entries if e["status"] in ("failed", "missing"))
    assert failed == ["broken-scorer", "hostile", "never-recorded", "nothing-applies", "rome"]
    with headless_page(chromium) as page:
        page.open(html)
        assert page.problems() == []  # no console error, no CSP violation, no exception, no dialog
        assert page.evaluate("document.getElementById('gate').textContent").startswith("Gate FAILED")
        assert sorted(page.evaluate(VISIBLE_CASES)) == sorted(e["case_id"] for e in entries)
        assert page.evaluate("document.getElementById('shown').textContent") == "6"
        # Only the page's own script ran or exists; no markup came out of the recorded text.
        assert page.evaluate("[document.scripts.length, document.images.length]") == [1, 0]
        assert page.evaluate("document.querySelectorAll('#charts svg').length") >= 4

        page.click("#f-failed")
        assert page.evaluate("document.getElementById('f-failed').checked") is True
        assert sorted(page.evaluate(VISIBLE_CASES)) == failed
        assert page.evaluate("document.getElementById('shown').textContent") == "5"
        page.click("#f-failed")  # off again: every entry is back
        assert len(page.evaluate(VISIBLE_CASES)) == 6

        choose(page, "f-tier", "full")
        assert sorted(page.evaluate(VISIBLE_CASES)) == ["never-recorded", "rome"]
        choose(page, "f-tier", "all")
        choose(page, "f-scorer", "t_report_boom")
        assert page.evaluate(VISIBLE_CASES) == ["broken-scorer"]
        choose(page, "f-scorer", "all")

        paris = "#entry-list details.entry:nth-of-type(1)"
        assert page.evaluate(f"document.querySelector('{paris} .case').textContent") == "paris"
        assert page.evaluate(f"document.querySelector('{paris}').open") is False
        page.click(f"{paris} > summary")
        assert page.evaluate(f"document.querySelector('{paris}').open") is True
        tree = page.text_of(f"{paris} .slot .tree", "innerText")
        assert "tool call" in tree and "get_weather" in tree and '"city": "Paris"' in tree
        assert "18C sunny" in tree and "It is 18C and sunny in Paris." in tree and "iteration 0" in tree

        hostile = "#entry-list details.entry:nth-of-type(2)"
        page.click(f"{hostile} > summary")
        shown = page.evaluate(f"document.querySelector('{hostile}').innerText")
        for literal in (SCRIPT_BREAK, ATTRIBUTE_BREAK, "<b>html</b>", "\\x1b[31mred", "\\u202eevil", "\\x00nul"):
            assert literal in shown, literal  # shown as text, controls as visible escapes
        assert "\x1b" not in shown and "\u202e" not in shown
        tree = page.text_of(f"{hostile} .slot .tree", "textContent")
        assert SCRIPT_BREAK in tree and ATTRIBUTE_BREAK in tree
        assert page.evaluate("[document.scripts.length, document.images.length]") == [1, 0]
        keep_screenshot(page, tmp_path, "html-report.png")
        assert page.problems() == []  # still no dialog, error or violation after everything opened


def test_page_keeps_recorded_text_out_of_the_script_and_allows_only_it(scored: tuple[Path, object]) -> None:
    html = scored[0].read_text(encoding="utf-8")
    assert html.count("<script") == 1 and html.count("</script") == 1  # the page's own: the recorded ones are escaped
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    script = html[html.index("<script>") : html.index("</script>")]
    assert "alert" not in script and "Sunny" not in script
    assert "default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-" in html
    assert "http://" not in html.replace("http://x", "") and "https://" not in html  # nothing to fetch


def test_shipped_samples_and_run_pages_show_their_trees(chromium: str, tmp_path: Path) -> None:
    samples = REPO / "samples"
    scored = evaltrace(
        "score", samples / "runs", "--spec", samples / "evals.yaml", "--html", tmp_path / "samples.html",
        "--no-store", cwd=tmp_path,
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    shutil.copy(AGENTS, tmp_path / "run_agents.py")
    (tmp_path / "evals.yaml").write_text(
        'cases:\n  - id: fine\n    input: "hello"\n    tier: smoke\n'
        '    expect: {output: {contains: ["answer to hello"]}, tool_calls: [{name: lookup}]}\n'
    )
    ran = evaltrace(
        "run", "--agent", "run_agents:answer", "--spec", "evals.yaml", "--out", "o", "--html", "run.html",
        cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    with headless_page(chromium) as page:
        page.open(tmp_path / "samples.html")
        assert page.evaluate("document.getElementById('gate').textContent").startswith("Gate PASSED")
        cases = page.evaluate(VISIBLE_CASES)
        assert "paris-weather" in cases and "two-cities" in cases
        two = f"#entry-list details.entry:nth-of-type({cases.index('two-cities') + 1})"
        page.click(f"{two} > summary")
        tree = page.text_of(f"{two} .slot .tree", "innerText")
        assert tree.count("get_weather") == 2 and "Tokyo" in tree and "Paris" in tree
        keep_screenshot(page, tmp_path, "html-report-samples.png")
        assert page.problems() == []
        page.open(tmp_path / "run.html")
        page.click("#entry-list details.entry > summary")
        tree = page.text_of("#entry-list .slot .tree")
        assert "lookup" in tree and "answer to hello" in tree
        assert page.problems() == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--html", "missing/r.html"], "Error: --html missing/r.html: the folder missing does not exist"),
        (["--html", "out/"], "Error: --html out/: names a folder; give a file name"),
        (["--html", "-"], "Error: --html -: the html report is written to a file only ('-' is for --json)"),
    ],
)
def test_bad_html_paths_are_refused_before_scoring(tmp_path: Path, args: list[str], message: str) -> None:
    result = evaltrace("score", "no-such-runs", *args, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [message]


def test_run_refuses_a_bad_html_path_before_running_the_agent(tmp_path: Path) -> None:
    shutil.copy(AGENTS, tmp_path / "run_agents.py")
    (tmp_path / "evals.yaml").write_text(
        'cases:\n  - id: fine\n    input: "hello"\n    expect: {output: {contains: [x]}}\n'
    )
    ran = evaltrace(
        "run", "--agent", "run_agents:answer", "--spec", "evals.yaml", "--out", "o", "--html", "nope/r.html",
        cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 2
    assert ran.stderr.splitlines() == ["Error: --html nope/r.html: the folder nope does not exist"]
    assert not (tmp_path / "o").exists()
