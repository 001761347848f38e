"""The one cache (`collector/cachedir.py`): one root, one pruning rule across the traces, imports, judge and
specs namespaces (least recently used first, a read touching its entry), and `evaltrace clean --cache`
emptying all four. The entries are written by the real users: the traces cache over the sample run's
Parquet files, the OTLP import cache over an OTLP/JSON file, the judge verdict cache, the spec loader.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from cli_process import evaltrace

from evaltrace.collector import cachedir
from evaltrace.collector.otlp.files.framing import OtlpFormat
from evaltrace.collector.otlp.files.import_cache import imported_files
from evaltrace.collector.traces.cache import cached_traces
from evaltrace.evaluators.scoring.judge.cache import CachedVerdict, VerdictCache, cache_key
from evaltrace.evaluators.scoring.spec.loader import load_spec

SAMPLE_RUNS = Path(__file__).resolve().parents[2] / "samples" / "runs"
SPAN = {"traceId": "a" * 32, "spanId": "b" * 16, "name": "agent", "startTimeUnixNano": "1", "endTimeUnixNano": "2"}


def _otlp_file(folder: Path) -> Path:
    path = folder / "spans.jsonl"
    request = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": [SPAN]}]}]}
    path.write_text(json.dumps(request) + "\n", encoding="utf-8")
    return path


def _verdict(cache: VerdictCache, question: str) -> str:
    key = cache_key({"question": question})
    cache.put(
        key, CachedVerdict(key=key, passed=True, reason="r", model="m", template="t", template_version=1, sample=0)
    )
    return key


def _fill(root: Path, tmp_path: Path) -> dict[str, Path]:
    """One entry per namespace, written by its real user: a traces table, an import, a verdict, a spec."""
    runs = tmp_path / "runs"
    shutil.copytree(SAMPLE_RUNS, runs)
    assert list(cached_traces(sorted(runs.glob("*.parquet")), root=root))
    imported_files(_otlp_file(tmp_path), OtlpFormat.JSON, root=root)
    _verdict(VerdictCache(root), "first")
    spec = tmp_path / "evals.yaml"
    spec.write_text("cases:\n  - {id: a, input: hi, expect: {outcome: success}}\n", encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVALTRACE_CACHE_DIR", str(root))
        load_spec(spec)
    entries = {name: next((root / name).iterdir()) for name in cachedir.NAMESPACES}
    assert not [path for path in root.rglob("*") if path.name.endswith(cachedir.TEMP_SUFFIX)]
    return entries


def _age(path: Path, hours: float) -> None:
    then = time.time() - hours * 3600
    os.utime(path, (then, then))


def test_one_pruning_rule_over_every_namespace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "cache"
    entries = _fill(root, tmp_path)
    _age(entries["imports"], 5)  # least recently used
    _age(entries["traces"], 4)
    _age(entries["judge"], 3)
    _age(entries["specs"], 3)
    verdicts = VerdictCache(root)
    assert verdicts.get(entries["judge"].stem) is not None  # a read touches it: now the most recently used
    monkeypatch.setattr(cachedir, "MAX_BYTES", cachedir._size(entries["judge"]) + 1000)
    kept = _verdict(verdicts, "second")  # a judge write prunes the whole root, not only judge/
    assert not entries["imports"].exists() and not entries["traces"].exists() and not entries["specs"].exists()
    assert entries["judge"].exists() and verdicts.get(kept) is not None


def test_entries_used_in_the_last_hour_are_not_pruned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "cache"
    entries = _fill(root, tmp_path)
    _age(entries["traces"], 2)
    monkeypatch.setattr(cachedir, "MAX_BYTES", 1)
    cachedir.prune(root)
    assert not entries["traces"].exists()
    assert entries["imports"].exists() and entries["judge"].exists() and entries["specs"].exists()  # may be in use


def test_clean_cache_empties_all_four_namespaces_and_says_what(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    entries = _fill(root, tmp_path)
    sizes = {name: cachedir._size(path) for name, path in entries.items()}
    done = evaltrace("clean", "--cache", env={"EVALTRACE_CACHE_DIR": str(root)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"traces tables {root / 'traces'}: removed 1 entry, {sizes['traces']} bytes",
        f"imported OTLP files {root / 'imports'}: removed 1 entry, {sizes['imports']} bytes",
        f"judge verdicts {root / 'judge'}: removed 1 entry, {sizes['judge']} bytes",
        f"compiled specs {root / 'specs'}: removed 1 entry, {sizes['specs']} bytes",
    ]
    assert [list((root / name).iterdir()) for name in cachedir.NAMESPACES] == [[], [], [], []]


def test_a_root_others_may_write_is_not_used_by_the_judge_cache(tmp_path: Path) -> None:
    root = tmp_path / "shared"
    root.mkdir()
    root.chmod(0o777)
    cache = VerdictCache(root)
    key = _verdict(cache, "q")
    assert cache.get(key) is None and not (root / "judge").exists()


def test_the_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "mine"))
    assert cachedir.cache_root() == tmp_path / "mine"
    monkeypatch.delenv("EVALTRACE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cachedir.cache_root() == tmp_path / "xdg" / "evaltrace"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")  # the XDG spec says to ignore a relative path
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cachedir.cache_root() == tmp_path / "home" / ".cache" / "evaltrace"


def test_the_judge_cache_defaults_to_the_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "root"))
    monkeypatch.chdir(tmp_path)
    key = _verdict(VerdictCache(), "q")
    entry = tmp_path / "root" / "judge" / f"{key}.json"
    assert entry.is_file() and entry.stat().st_mode & 0o077 == 0  # the user's alone, as the root is
    assert not (tmp_path / ".evaltrace-cache").exists()  # the old per-folder location is no longer written
