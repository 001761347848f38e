"""An OTLP file whose attribute values nest bytes and non-finite floats inside maps is read, not a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_SPAN = {
    "traceId": "0af7651916cd43dd8448eb211c80319c",
    "spanId": "b7ad6b7169203331",
    "name": "nested values",
    "kind": 1,
    "startTimeUnixNano": "1700000000000000000",
    "endTimeUnixNano": "1700000001000000000",
    "attributes": [
        {"key": "a", "value": {"doubleValue": "NaN"}},
        {"key": "b", "value": {"kvlistValue": {"values": [{"key": "c", "value": {"bytesValue": "AAE="}}]}}},
        {"key": "d", "value": {"arrayValue": {"values": [{"bytesValue": "b2s="}, {"doubleValue": "Infinity"}]}}},
    ],
}


def test_nested_bytes_and_non_finite_values_are_imported(tmp_path: Path) -> None:
    request = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": [_SPAN]}]}]}
    path = tmp_path / "spans.otlp.jsonl"
    path.write_text(json.dumps(request) + "\n", encoding="utf-8")
    env_cache = {"EVALTRACE_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "evaltrace.cli", "show", "0af7651916cd43dd8448eb211c80319c", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**_base_env(), **env_cache},
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    shown = json.loads(done.stdout)
    assert shown["trace_id"] == "0af7651916cd43dd8448eb211c80319c"


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("EVALTRACE_")}
