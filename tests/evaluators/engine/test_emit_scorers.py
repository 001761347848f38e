"""The report's scorer list and the score store's scorer texts when the scoring processes noted them.

Each process that scores a case's samples notes its scorers' configuration hashes and JSON texts
(a sharded run's workers, in parallel), and the parent builds the scorer list from those. These
tests hold that list to the one made from the spec's scorers directly, for one and several processes.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any, ClassVar

import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError
from test_engine_shards import record_spec_run

from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.engine import scoring
from evaltrace.evaluators.engine.scoring import ScoreOptions
from evaltrace.evaluators.results.report.model import Report, ScorerInfo
from evaltrace.evaluators.results.store.identities import ScorerPairing
from evaltrace.evaluators.results.store.writer import open_store
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.spec.loader import LoadedSpec, load_spec
from evaltrace.evaluators.scoring.spec.scorer_infos import ScorerList, distinct, scorer_row


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return record_spec_run(tmp_path_factory.mktemp("emit-scorers"))


def expected_scorers(spec: LoadedSpec) -> list[ScorerInfo]:
    """The scorer list made from the spec's scorers themselves, each (name, hash) once."""
    infos: dict[tuple[str, str], ScorerInfo] = {}
    for case in spec.cases:
        for turn in spec.case_scorers[case.id]:
            for scorer in turn:
                digest = scorer.config_hash()
                config = scorer.model_dump(mode="json")
                info = ScorerInfo(name=scorer.name, version=scorer.version, config_hash=digest, config=config)
                infos.setdefault((scorer.name, digest), info)
    return list(infos.values())


@pytest.mark.parametrize("workers", [1, 2])
def test_the_scorer_list_and_stored_texts_are_the_spec_scorers(
    run_dir: tuple[Path, Path], tmp_path: Path, workers: int
) -> None:
    runs, spec_file = run_dir
    spec = load_spec(spec_file)
    store = open_store(tmp_path / "store", spec)
    run = scoring.score([runs], spec, ScoreOptions(paths=(str(runs),), workers=workers), store)
    store.finish(run.report)
    expected = expected_scorers(spec)
    # The missing case's scorers come too: no process scored a sample of it.
    assert len(expected) >= 4 and run.report.scorers == expected
    assert run.report.model_dump_json(include={"scorers"}) == json.dumps(
        {"scorers": [info.model_dump(mode="json") for info in expected]}, separators=(",", ":")
    )
    stored = pq.read_table(tmp_path / "store" / "runs" / f"{store.run_id}.parquet").to_pylist()[0]["scorers"]
    assert [row["config"] for row in stored] == [json.dumps(info.config) for info in expected]
    assert [row["config_hash"] for row in stored] == [info.config_hash for info in expected]


class _Configured(Scorer):
    """A scorer whose configuration is any JSON data (and, for the fallback, any Python value)."""

    name: ClassVar[str] = "t_emit_configured"
    config: Any = None

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        return self.result(True)


CONFIGS = [
    {"expected": [{"name": "caf\u00e9 \u2603 \U0001f600", "arguments": {"n": 1.5, "k": [1, None], "e": 1e-05}}]},
    {"big": 1e16, "small": -2.5e-300, "inf": float("inf"), "nan": float("nan"), "int": 2**70, "ctl": "\x00\u2028</"},
    {"b": 1, "a": {"nested": [True, False, {}]}},
]


@pytest.mark.parametrize("config", CONFIGS)
def test_a_scorer_row_is_the_report_s_scorer_info_and_the_store_s_text(config: object) -> None:
    """The row made when the spec is compiled gives the same JSON, model and text as the model made at the end did."""
    scorer = _Configured(config=config)
    dumped = scorer.model_dump(mode="json")
    info = ScorerInfo(name=scorer.name, version=scorer.version, config_hash=scorer.config_hash(), config=dumped)
    listed = ScorerList([scorer_row(scorer)])
    assert listed.json() == b"[" + info.model_dump_json().encode() + b"]"
    assert listed.configs() == [(info.name, info.version, info.config_hash, json.dumps(info.config))]
    assert list(listed) == [info] or config is CONFIGS[1]  # nan != nan: compared as JSON below
    assert ScorerList(infos=listed.infos()).json() == listed.json()


def test_a_scorer_list_is_a_report_field_as_a_list_of_scorer_infos_was() -> None:
    rows = [scorer_row(_Configured(config=config)) for config in CONFIGS[::2]]
    listed = distinct([*rows, rows[0]])  # each (name, hash) once
    infos = listed.infos()
    head = {"evaltrace_version": "0", "created_at": "2026-01-01T00:00:00Z", "inputs": {}, "passed": True}
    fields = {**head, "pass_rate": 1.0, "confidence": 1.0, "gate_reason": "", "counts": {}, "entries": []}
    lazy, plain = (
        Report.model_validate({**fields, "scorers": listed}),
        Report.model_validate({**fields, "scorers": infos}),
    )
    assert lazy.scorers is listed and isinstance(plain.scorers, ScorerList) and lazy == plain
    assert lazy.to_json() == plain.to_json() and lazy.model_dump() == plain.model_dump()
    assert lazy.header_json() == plain.header_json() == lazy.model_dump_json(exclude={"entries"}).encode()
    assert Report.model_validate_json(lazy.to_json()) == lazy and len(lazy.scorers) == 2 and lazy.scorers[1] == infos[1]
    with pytest.raises(ValidationError, match="scorers.0.version"):
        Report.model_validate({**fields, "scorers": [{"name": "x", "version": "?", "config_hash": "", "config": {}}]})


def test_a_pickled_pairing_keeps_no_identity_by_object_id(run_dir: tuple[Path, Path]) -> None:
    spec = load_spec(run_dir[1])
    pairing = ScorerPairing(spec)
    scorer = spec.case_scorers["weather"][0][0]
    first = pairing.identity(scorer)
    assert first == (scorer.name, scorer.version, scorer.config_hash())
    # Another process meets other objects at those ids: what it unpickles must be empty.
    copy = pickle.loads(pickle.dumps(pairing))
    assert vars(copy)["_hashes"] == {} and copy.identity(scorer) == first
