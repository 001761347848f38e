"""`evaltrace review` driven in a real headless Chromium (Debian's `chromium`, over the DevTools protocol).

The app runs as the real CLI subprocess on a judged store (review_store.py) and its run folder.
A test lists the entries, filters them, opens an entry (its trace tree, with hostile recorded text
shown as text), labels the entry's outcome with a mouse click and a judge score by keyboard (with
a note), and finds both labels in the store's labels table; the page saw no console error, CSP
violation, exception or dialog throughout. With EVALTRACE_REVIEW_SCREENSHOT=FILE the test saves
the page (how docs/review.png was made).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from _chromium import Page, chromium_executable, headless_page
from review_server import review_server
from review_store import CASES, JudgedStore, case_id, judged_store

from evaltrace.evaluators.results.store.labels import read_labels

_KEYS = {"Enter": ("Enter", 13, "\r"), "Escape": ("Escape", 27, "")}


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> JudgedStore:
    return judged_store(tmp_path_factory.mktemp("judged"))


def press(page: Page, key: str) -> None:
    """A real key press (down, up) as the keyboard sends it to the focused element."""
    code, vk, text = _KEYS[key] if key in _KEYS else (f"Key{key.upper()}", ord(key.upper()), key)
    page.send("Input.dispatchKeyEvent", type="keyDown", key=key, code=code, windowsVirtualKeyCode=vk, text=text)
    page.send("Input.dispatchKeyEvent", type="keyUp", key=key, code=code, windowsVirtualKeyCode=vk)


def wait_until(page: Page, expression: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s: {expression}")
        time.sleep(0.05)


def rows(page: Page) -> list[str]:
    return list(
        page.evaluate("[...document.querySelectorAll('#entries-body tr td:nth-child(2)')].map(t => t.textContent)")
    )


def test_list_filter_open_and_label_by_click_and_keyboard(judged: JudgedStore, tmp_path: Path) -> None:
    scores = pq.read_table(judged.store / "scores" / f"{judged.run_id}.parquet").to_pylist()
    failed = sorted({r["case_id"] for r in scores if r["entry_status"] == "failed"})
    judge_failed = sorted({r["case_id"] for r in scores if r["scorer"] == "task_completion" and r["passed"] is False})
    assert 0 < len(judge_failed) < len(failed) < CASES  # the filters have something to tell apart
    executable = chromium_executable()
    with review_server("--store", judged.store, "--author", "reviewer-1", judged.runs, cwd=tmp_path) as server:
        with headless_page(executable) as page:
            page.open(server.url)
            wait_until(page, f"document.querySelectorAll('#entries-body tr').length === {CASES}")
            assert rows(page) == [case_id(n) for n in range(CASES)]
            sources = page.evaluate("[...document.querySelectorAll('#source option')].map(o => o.value)")
            assert sources == [f"run:{judged.run_id}", "paths"]

            page.click("#f-failed")  # filter: failed only (a real click on the checkbox)
            wait_until(page, f"document.querySelectorAll('#entries-body tr').length === {len(failed)}")
            assert rows(page) == failed
            page.evaluate("(() => { const s = document.getElementById('f-scorer'); s.value = 'task_completion';"
                          " s.dispatchEvent(new Event('change')); })()")  # fmt: skip
            wait_until(page, f"document.querySelectorAll('#entries-body tr').length === {len(judge_failed)}")
            assert rows(page) == judge_failed
            page.evaluate("(() => { const t = document.getElementById('f-tier'); t.value = 'full';"
                          " t.dispatchEvent(new Event('change')); })()")  # fmt: skip
            full = [c for c in judge_failed if int(c.split("-")[1]) >= 7]
            wait_until(page, f"document.querySelectorAll('#entries-body tr').length === {len(full)}")
            assert rows(page) == full
            page.evaluate("(() => { const c = document.getElementById('f-case'); c.value = 'case-1*';"
                          " c.dispatchEvent(new Event('change')); })()")  # fmt: skip
            tens = [c for c in full if c.startswith("case-1")]
            assert 0 < len(tens) < len(full)
            wait_until(page, f"document.querySelectorAll('#entries-body tr').length === {len(tens)}")
            assert rows(page) == tens
            page.evaluate("(() => { for (const [id, v] of [['f-scorer', ''], ['f-tier', ''], ['f-case', '']]) {"
                          " const e = document.getElementById(id); e.value = v; e.dispatchEvent(new Event('change')); }"
                          " })()")  # fmt: skip
            wait_until(page, f"document.querySelectorAll('#entries-body tr').length === {len(failed)}")

            # Open case-03 (hostile answer, a tool call) with a click: the trace tree beside its scores.
            page.click(f"#entries-body tr:nth-child({failed.index(case_id(3)) + 1})")
            tree = page.text_of("#detail .trace-tree ul.tree")
            assert "get_weather" in tree and '"city": "Paris"' in tree and "18C sunny" in tree
            assert "<script>alert(1)</script>" in tree and "\\x1b[31m" in tree  # shown as text
            assert page.evaluate("document.querySelectorAll('#detail script, #detail b').length") == 0
            detail = page.text_of("#detail")
            assert "task_completion" in detail and "judged no" in detail and "missing '18C'" in detail

            # Label the entry's outcome by mouse: the first target's Fail button.
            page.click("#detail .target .label-fail")
            wait_until(page, "document.getElementById('status').textContent === 'saved: fail'")
            # Label the judge's score by keyboard: t (next target), n (note), type, Escape, p (pass).
            press(page, "t")
            press(page, "n")
            page.send("Input.insertText", text="the judge is right, the rule is not")
            press(page, "Escape")
            press(page, "p")
            wait_until(page, "document.getElementById('status').textContent === 'saved: pass'")
            given = page.evaluate("[...document.querySelectorAll('#detail .given')].map(e => e.textContent)")
            assert given == [
                "labelled fail by reviewer-1",
                "labelled pass by reviewer-1: the judge is right, the rule is not",
            ]

            # Keyboard navigation: j moves to the next failed entry, Enter opens it.
            press(page, "j")
            press(page, "Enter")
            nxt = failed[failed.index(case_id(3)) + 1]
            wait_until(page, f"document.querySelector('#detail h2').textContent.startsWith({json.dumps(nxt)})")
            shot = os.environ.get("EVALTRACE_REVIEW_SCREENSHOT")
            if shot:
                page.click(f"#entries-body tr:nth-child({failed.index(case_id(3)) + 1})")
                wait_until(page, "document.querySelector('#detail h2').textContent.startsWith('case-03')")
                page.screenshot(Path(shot))
            assert page.problems() == []

    trace = judged.trace_ids[case_id(3)]
    labels = {label.key: label for label in read_labels(judged.store)}
    outcome, judge = labels[(case_id(3), trace, "")], labels[(case_id(3), trace, "task_completion")]
    assert (outcome.label, outcome.author, outcome.run_id, outcome.note) == ("fail", "reviewer-1", judged.run_id, "")
    assert (judge.label, judge.note) == ("pass", "the judge is right, the rule is not")
    assert len(labels) == 2


def test_run_folders_without_scores_are_listed_and_labelled(judged: JudgedStore, tmp_path: Path) -> None:
    store = tmp_path / "fresh-store"  # no scoring run at all: only the traces of PATH
    with review_server("--store", store, judged.runs, cwd=tmp_path) as server:
        with headless_page(chromium_executable()) as page:
            page.open(server.url)
            wait_until(page, f"document.querySelectorAll('#entries-body tr').length === {CASES}")
            assert page.evaluate("document.getElementById('source').value") == "paths"
            press(page, "Enter")
            assert "Answer number 00" in page.text_of("#detail .trace-tree ul.tree")
            press(page, "f")
            wait_until(page, "document.getElementById('status').textContent === 'saved: fail'")
            assert page.problems() == []
    (label,) = read_labels(store)
    assert (label.case_id, label.trace_id, label.scorer, label.label, label.run_id) == (
        case_id(0), judged.trace_ids[case_id(0)], "", "fail", None
    )  # fmt: skip


ATTACKER = """<!DOCTYPE html><html><body>
<form id="form" method="post" enctype="text/plain" action="REVIEW/api/labels">
<input name='{"trace_id": "TRACE", "case_id": "case-00", "scorer": "", "label": "fail", "x": "' value='"}'>
</form>
<script>
fetch("REVIEW/api/labels", {method: "POST", headers: {"X-Evaltrace-Token": "TOKEN",
  "Content-Type": "application/json"}, body: JSON.stringify({trace_id: "TRACE", case_id: "case-00", label: "fail"})})
  .then(function (r) { window.result = "answered " + r.status; })
  .catch(function () { window.result = "blocked"; });
</script></body></html>"""


@contextmanager
def attacker_site(page: str) -> Iterator[str]:
    """Another origin on loopback (its own port) serving `page`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_a_page_of_another_origin_cannot_label_even_with_the_token(judged: JudgedStore, tmp_path: Path) -> None:
    store = tmp_path / "store"
    with review_server("--store", store, judged.runs, cwd=tmp_path) as server:
        html = ATTACKER.replace("REVIEW", server.base).replace("TOKEN", server.token)
        html = html.replace("TRACE", judged.trace_ids[case_id(0)])
        with attacker_site(html) as url, headless_page(chromium_executable()) as page:
            page.open(url)
            wait_until(page, "window.result !== undefined")
            assert page.evaluate("window.result") == "blocked"  # the preflight finds no CORS: never sent
            # A form is a simple request (no preflight) but cannot carry the token header.
            page.evaluate("document.getElementById('form').submit()")
            wait_until(page, f"location.href.startsWith({json.dumps(server.base)})")
            wait_until(page, "document.body && document.body.innerText.includes('error')")
            assert "missing or wrong access token" in page.evaluate("document.body.innerText")
    assert read_labels(store) == []
