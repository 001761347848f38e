"""The compiled-spec cache (`evaluators/scoring/spec/cache.py`): a spec is validated and compiled once
per content, read back whole afterwards; a damaged, foreign or stale entry is a miss, never an error or a
wrong spec; an invalid spec is never kept."""

from __future__ import annotations

import hashlib
import pickle
import textwrap
from pathlib import Path
from typing import Any, ClassVar

import pytest

from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.errors import SpecError
from evaltrace.evaluators.scoring import columns
from evaltrace.evaluators.scoring.scorers import trajectory
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.registry import register
from evaltrace.evaluators.scoring.spec import loader
from evaltrace.evaluators.scoring.spec.loader import LoadedSpec, load_spec

SPEC = """\
scorers: [{tool_errors: {max_errors: 2}}]
cases:
  - id: paris
    input: weather in Paris
    expect:
      tool_calls: [{name: get_weather, arguments: {city: Paris}}]
      trajectory: {mode: strict, arguments: {mode: exact}}
      output: {contains: Paris}
  - id: chat
    turns:
      - {input: hello, expect: {output: {contains: hi}}}
      - {input: bye, expect: {output: {contains: bye}}}
"""


class Politeness(Scorer):
    """A scorer from outside evaltrace (its module is not `evaltrace.*`)."""

    name: ClassVar[str] = "t_spec_cache_politeness"
    words: list[str] = []

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        return self.result(True)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(folder))
    return folder


def _write(folder: Path, text: str = SPEC, name: str = "evals.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _entries(root: Path) -> list[Path]:
    return sorted((root / "specs").glob("*.pickle"))


def _same(loaded: LoadedSpec, fresh: LoadedSpec) -> None:
    """`loaded` is the spec `fresh` compiled: its cases, scorers, their hashes and configurations."""
    assert loaded.spec == fresh.spec and loaded.global_scorers == fresh.global_scorers
    assert loaded.case_scorers == fresh.case_scorers and loaded.case_rows == fresh.case_rows
    assert loaded.scorer_rows == fresh.scorer_rows
    for case_id, turns in loaded.case_scorers.items():
        hashes = [s.config_hash() for turn in turns for s in turn]
        assert hashes == [s.config_hash() for turn in fresh.case_scorers[case_id] for s in turn]
        assert hashes == [loaded.scorer_rows[i][2] for i in loaded.case_rows[case_id]]
        assert all(s.spec_check for turn in turns for s in turn[1:])
        # Read back as it was compiled, down to which fields were set (models sharing that set in the pickle).
        dumps = [s.model_dump(exclude_unset=True) for turn in turns for s in turn]
        assert dumps == [s.model_dump(exclude_unset=True) for turn in fresh.case_scorers[case_id] for s in turn]
    for case, twin in zip(loaded.spec.cases, fresh.spec.cases, strict=True):
        assert case.model_dump(exclude_unset=True) == twin.model_dump(exclude_unset=True)


def _no_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("the spec was validated again")

    monkeypatch.setattr(loader, "validate_spec_data", refuse)


def test_a_spec_loaded_again_is_read_back_without_validation(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path)
    fresh = load_spec(path, cache=False)
    assert not (root / "specs").exists()  # `cache=False` neither reads nor writes
    first = load_spec(path)
    (entry,) = _entries(root)
    _no_validation(monkeypatch)
    again = load_spec(path)
    _same(again, fresh)
    _same(first, fresh)
    assert again.path == str(path)
    # Shared scorers stay shared: the global scorer is one object across cases and turns.
    assert again.case_scorers["paris"][0][0] is again.case_scorers["chat"][1][0] is again.global_scorers[0]
    assert entry.stat().st_mode & 0o077 == 0


def test_the_forms_plans_are_made_at_compile_and_read_back_with_the_spec(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a columnar form reads of its scorer's configuration alone (its plan) is not made again per run."""
    path = _write(tmp_path)
    load_spec(path)
    monkeypatch.setattr(trajectory, "compared_flags", None)  # making the trajectory's plan again would fail
    (scorer,) = [s for s in load_spec(path).case_scorers["paris"][0] if isinstance(s, trajectory.Trajectory)]
    assert columns.plan(scorer).text == '[{"city":"Paris"}]'  # the expected arguments as the table encodes them


def test_the_same_text_elsewhere_hits_under_its_own_name(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_spec(_write(tmp_path))
    other = tmp_path / "other"
    other.mkdir()
    moved = _write(other, name="copy.yaml")
    _no_validation(monkeypatch)
    assert load_spec(moved).path == str(moved)
    assert len(_entries(root)) == 1


def test_an_edited_spec_misses(root: Path, tmp_path: Path) -> None:
    path = _write(tmp_path)
    load_spec(path)
    _write(tmp_path, SPEC.replace("contains: Paris", "contains: Oslo"))
    loaded = load_spec(path)
    assert loaded.spec.cases[0].expect is not None
    assert loaded.spec.cases[0].expect.output is not None and loaded.spec.cases[0].expect.output.contains == "Oslo"
    assert len(_entries(root)) == 2
    _same(loaded, load_spec(path, cache=False))


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda blob: blob[:-1] + bytes([blob[-1] ^ 1]), id="flipped-byte"),
        pytest.param(lambda blob: blob[:100], id="cut-short"),
        pytest.param(lambda blob: b"", id="empty"),
        pytest.param(lambda blob: (lambda p: hashlib.sha256(p).digest() + p)(pickle.dumps({"a": 1})), id="not-a-spec"),
        pytest.param(lambda blob: (lambda p: hashlib.sha256(p).digest() + p)(b"not a pickle"), id="not-a-pickle"),
    ],
)
def test_a_damaged_entry_is_a_miss_and_is_written_again(root: Path, tmp_path: Path, damage: Any) -> None:
    path = _write(tmp_path)
    fresh = load_spec(path, cache=False)
    load_spec(path)
    (entry,) = _entries(root)
    sound = entry.read_bytes()
    entry.write_bytes(damage(sound))
    _same(load_spec(path), fresh)
    assert entry.read_bytes() == sound  # compiled again and kept, whole


def test_an_invalid_spec_is_never_kept_and_its_error_is_unchanged(root: Path, tmp_path: Path) -> None:
    path = _write(tmp_path, "cases:\n  - id: a\n    expect: {trajectory: {mode: sideways}}\n")
    with pytest.raises(SpecError) as first:
        load_spec(path)
    with pytest.raises(SpecError) as second:
        load_spec(path)
    with pytest.raises(SpecError) as uncached:
        load_spec(path, cache=False)
    assert str(first.value) == str(second.value) == str(uncached.value)
    assert str(path) in str(first.value) and "mode" in str(first.value)
    assert _entries(root) == []


def test_a_spec_with_a_plugin_scorer_is_not_kept(root: Path, tmp_path: Path) -> None:
    register(Politeness)
    path = _write(
        tmp_path, "cases:\n  - id: a\n    input: hi\n    expect: {t_spec_cache_politeness: {words: [please]}}\n"
    )
    loaded = load_spec(path)
    assert type(loaded.case_scorers["a"][0][0]) is Politeness
    assert _entries(root) == []


def test_a_root_others_may_write_is_never_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "shared"
    root.mkdir()
    root.chmod(0o777)
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(root))
    path = _write(tmp_path)
    load_spec(path)
    assert not (root / "specs").exists()
