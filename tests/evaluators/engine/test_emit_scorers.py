"""The report's scorer list and the score store's scorer texts when the scoring processes noted them.

Each process that scores a case's samples notes its scorers' configuration hashes and JSON texts
(a sharded run's workers, in parallel), and the parent builds the scorer list from those. These
tests hold that list to the one made from the spec's scorers directly, for one and several processes.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_engine_shards import record_spec_run

from evaltrace.evaluators.engine import scoring
from evaltrace.evaluators.engine.scoring import ScoreOptions
from evaltrace.evaluators.results.report.model import ScorerInfo
from evaltrace.evaluators.results.store.identities import ScorerPairing
from evaltrace.evaluators.results.store.writer import open_store
from evaltrace.evaluators.scoring.spec.loader import LoadedSpec, load_spec


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


def test_a_scorer_given_its_json_text_is_the_scorer_given_its_configuration() -> None:
    config = {"expected": [{"name": "caf\u00e9", "arguments": {"n": 1.5, "k": [1, None]}}], "mode": "strict"}
    text = json.dumps(config)
    (made,) = ScorerInfo.from_config_json([("trajectory", 2, "0123456789ab", text)])
    plain = ScorerInfo(name="trajectory", version=2, config_hash="0123456789ab", config=config)
    assert made == plain and made.model_dump_json() == plain.model_dump_json()
    assert made.config_json() == plain.config_json() == text


def test_scorers_made_from_texts_at_once_keep_their_order_and_texts() -> None:
    configs = [{"b": 1, "a": "\u00e9"}, {"expected": []}, {}]
    rows = [(f"s{i}", i, f"{i:012d}", json.dumps(config)) for i, config in enumerate(configs)]
    made = ScorerInfo.from_config_json(rows)
    assert [(m.name, m.version, m.config_hash, m.config) for m in made] == [
        r[:3] + (c,) for r, c in zip(rows, configs, strict=True)
    ]
    assert [m.config_json() for m in made] == [r[3] for r in rows] and list(made[0].config) == ["b", "a"]
    made[0].config = {"other": True}  # a replaced configuration is dumped anew
    assert made[0].config_json() == '{"other": true}' and ScorerInfo.from_config_json([]) == []


def test_a_pickled_pairing_keeps_no_identity_by_object_id(run_dir: tuple[Path, Path]) -> None:
    spec = load_spec(run_dir[1])
    pairing = ScorerPairing(spec)
    scorer = spec.case_scorers["weather"][0][0]
    first = pairing.identity(scorer)
    assert first == (scorer.name, scorer.version, scorer.config_hash())
    # Another process meets other objects at those ids: what it unpickles must be empty.
    copy = pickle.loads(pickle.dumps(pairing))
    assert vars(copy)["_hashes"] == {} and copy.identity(scorer) == first
