"""Untrusted recorded text in passing rows: a warm scoring writes it byte for byte as the per-trace path does.

A passing row's sample is made from the table's columns and its JSON from plain values
(`sample_row.sample_jsons`), not from a model; recorded content (the question, the answer, the conversation
id) is untrusted: quotes, backslashes, NUL and other control characters, U+2028/2029, bidi controls,
markup. It must come through the table whole, and be written as pydantic writes the `SampleResult`
(`test_sample_row.py` holds the builder to the model over generated samples; here, the real run).
Real `evaltrace score` subprocesses: per trace (the reference), `--no-cache`, a first and a warm scoring.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from genai_spans import Recorder, agent_attrs, chat, messages, text
from test_score_warm_path import _score, rows_decided

from evaltrace.evaluators.engine import scoring
from evaltrace.evaluators.engine.scoring import ScoreOptions
from evaltrace.evaluators.results.report.model import SampleResult
from evaltrace.evaluators.scoring.spec.loader import load_spec

HOSTILE = [
    'say "hi" \\ back \\"',
    "line\u2028sep\u2029para",
    "nul\x00 unit\x1f bell\x07 del\x7f",
    "caf\u00e9 \U0001f600 \u202erlo\u202c \ufeff",
    "</script><b>x</b> \r\n\t",
]


def _record(root: Path) -> tuple[Path, Path]:
    rec = Recorder(root / "runs")
    cases = []
    for index, hostile in enumerate(HOSTILE):
        question = f"Q{index} {hostile}"
        with rec.span(f"case {index}", {"evaltrace.case_id": f"c{index}"}):
            with rec.span("invoke_agent a", agent_attrs("a", **{"gen_ai.conversation.id": hostile})):
                prompt, answer = messages(("user", [text(question)])), messages(("assistant", [text(f"ok {hostile}")]))
                chat(rec, "gpt-x", prompt, answer, (10 + index, 2))
        cases.append({"id": f"c{index}", "input": question, "expect": {"output": {"contains": ["ok"]}}})
    rec.close()
    spec = root / "spec.json"
    spec.write_text(json.dumps({"cases": cases}), encoding="utf-8")
    return root / "runs", spec


def _report_bytes(out: Path) -> bytes:
    return re.sub(rb'"created_at":"[^"]*"', b"", (out / "report.json").read_bytes())


def test_untrusted_text_of_passing_rows_is_written_as_the_per_trace_path_writes_it(tmp_path: Path) -> None:
    runs, spec = _record(tmp_path)
    cache = tmp_path / "cache"
    per_trace = _score(runs, spec, tmp_path / "per-trace", cache, per_trace=True)
    uncached = _score(runs, spec, tmp_path / "no-cache", cache, "--no-cache")
    first = _score(runs, spec, tmp_path / "first", cache)
    warm = _score(runs, spec, tmp_path / "warm", cache)
    assert warm == first == uncached == per_trace
    written = [_report_bytes(tmp_path / name) for name in ("warm", "first", "no-cache", "per-trace")]
    assert written == [written[-1]] * 4
    samples = [entry["samples"][0] for entry in per_trace["report"]["entries"]]
    assert [entry["status"] for entry in per_trace["report"]["entries"]] == ["passed"] * len(HOSTILE)
    # The text came through whole: nothing dropped or replaced on the way.
    assert [sample["conversation_id"] for sample in samples] == HOSTILE
    assert [sample["output"] for sample in samples] == [f"ok {hostile}" for hostile in HOSTILE]
    written = (tmp_path / "warm" / "report.json").read_bytes()
    for sample in samples:  # each sample as pydantic dumps the model
        assert SampleResult.model_validate(sample).model_dump_json().encode() in written


def test_the_hostile_rows_are_decided_from_their_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs, spec = _record(tmp_path)
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    decided = rows_decided(monkeypatch)
    options = ScoreOptions(paths=(str(runs),), workers=1)
    scoring.score([runs], load_spec(spec), options)
    decided.clear()
    scoring.score([runs], load_spec(spec), options)
    assert decided == [True] * len(HOSTILE)  # the warm run made every sample from its row's columns
