"""Golden traces: the full JSON of a few rebuilt traces, pinned in tests/collector/traces/test_convert/<case>.json.

Spans are made with the real SDK (counting ids, a fixed clock: see `tests/genai_spans.py`), written
by `ParquetSpanExporter`, read back by the reader and converted. The JSON compared is
`Trace.model_dump(mode="json")` unchanged.

Regenerate after an intended change with `EVALTRACE_REGEN_GOLDEN=1 pytest tests/collector/traces/test_convert_golden.py`
and review the diff.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from genai_scenarios import old_events_no_agent, parallel_nested, sequential, unfinished_parent
from genai_spans import Recorder, without_prompts

from evaltrace.collector import resolve_paths
from evaltrace.collector.traces.rebuild import read_traces

GOLDEN = Path(__file__).with_name("test_convert")
REGEN = os.environ.get("EVALTRACE_REGEN_GOLDEN") == "1"


CASES: dict[str, Callable[[Recorder], None]] = {
    "sequential": sequential,
    "parallel_nested": parallel_nested,
    "old_events_no_agent": old_events_no_agent,
    "unfinished_parent": unfinished_parent,
}


def _traces(case: str, folder: Path, *, histories: bool = True) -> list[dict[str, Any]]:
    """The JSON of the traces `case` records into `folder` (recorded once per folder)."""
    if not any(folder.glob("*.parquet")):
        rec = Recorder(folder)
        CASES[case](rec)
        rec.close()
    return [t.model_dump(mode="json") for t in read_traces(resolve_paths([folder]), histories=histories)]


@pytest.mark.parametrize("case", list(CASES))
def test_golden(case: str, tmp_path: Path) -> None:
    got = _traces(case, tmp_path)
    path = GOLDEN / f"{case}.json"
    if REGEN:
        path.write_text(json.dumps(got, indent=2, ensure_ascii=False) + "\n")
    assert got == json.loads(path.read_text()), f"{path} differs; regenerate with EVALTRACE_REGEN_GOLDEN=1 if intended"


@pytest.mark.parametrize("case", list(CASES))
def test_golden_without_histories_differs_only_by_the_prompts(case: str, tmp_path: Path) -> None:
    full = _traces(case, tmp_path)
    lean = _traces(case, tmp_path, histories=False)
    assert any(it["input_messages"] for t in full for it in t["iterations"])  # the case has prompts to leave out
    assert lean == without_prompts(full)
