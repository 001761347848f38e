"""`evaltrace calibrate`, `labels export/import` and `score --min-judge-kappa` on a real judged store.

The store is made by the real `evaltrace score` with a scripted judge (review_store.py); labels go
in through `evaltrace labels import`. Calibrate's figures are checked against an independent
computation: the confusion matrix counted here from the scores table and the labels, and kappa with
its 95% interval from statsmodels' `cohens_kappa`.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from cli_process import evaltrace
from review_store import CASES, JUDGE_PASSES, JudgedStore, case_id, judged_store
from statsmodels.stats.inter_rater import cohens_kappa

# The person fails these cases (the judge passes cases in JUDGE_PASSES): disagreements on both sides.
PERSON_FAILS = frozenset({0, 3, 4, 5, 7, 9, 11, 13})


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> JudgedStore:
    return judged_store(tmp_path_factory.mktemp("judged"))


def _labels_csv(path: Path, judged: JudgedStore, cases: range, scorer: str) -> Path:
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["case_id", "trace_id", "scorer", "label", "note"])
        for n in cases:
            label = "fail" if n in PERSON_FAILS else "pass"
            writer.writerow([case_id(n), judged.trace_ids[case_id(n)], scorer, label, f"note {n}"])
    return path


def _independent(judged: JudgedStore, scorer: str, cases: range) -> list[list[int]]:
    """The (person, judge) matrix, counted from the scores file and PERSON_FAILS."""
    rows = pq.read_table(judged.store / "scores" / f"{judged.run_id}.parquet").to_pylist()
    verdict = {
        r["case_id"]: (r["entry_passed"] if scorer == "" else r["passed"])
        for r in rows
        if (scorer == "" or r["scorer"] == scorer)
    }
    matrix = [[0, 0], [0, 0]]
    for n in cases:
        matrix[int(n in PERSON_FAILS)][int(not verdict[case_id(n)])] += 1
    return matrix


def test_no_labels_exits_2_with_one_error_line(judged: JudgedStore, tmp_path: Path) -> None:
    result = evaltrace("calibrate", "--store", judged.store, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error: ") and "no labels" in result.stderr


def test_calibrate_equals_an_independent_computation_and_gates(judged: JudgedStore, tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    for part in ("scores", "runs"):  # a copy of the judged store, so the module's store stays label-free
        (store / part).mkdir()
        for file in (judged.store / part).glob("*.parquet"):
            (store / part / file.name).write_bytes(file.read_bytes())
    copy = JudgedStore(store, judged.runs, judged.run_id, judged.trace_ids)
    for scorer, name in (("task_completion", "judge.csv"), ("", "outcome.csv")):
        imported = evaltrace(
            "labels",
            "import",
            "--store",
            store,
            "--author",
            "ann",
            _labels_csv(tmp_path / name, copy, range(CASES), scorer),
        )
        assert imported.returncode == 0, imported.stderr
    result = evaltrace("calibrate", judged.run_id, "--store", store, "--json", tmp_path / "c.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "c.json").read_text())
    assert report["labels"] == 2 * CASES and report["run_id"] == judged.run_id
    by_name = {item["scorer"]: item for item in report["scorers"]}
    assert set(by_name) == {"", "task_completion"} and by_name["task_completion"]["judge"] is True
    for scorer in ("task_completion", ""):
        item, table = by_name[scorer], _independent(copy, scorer, range(CASES))
        m = item["matrix"]
        assert [[m["pass_pass"], m["pass_fail"]], [m["fail_pass"], m["fail_fail"]]] == table
        expected = cohens_kappa(table)
        stats = item["stats"]
        assert stats["n"] == CASES
        assert stats["agreement"] == pytest.approx((table[0][0] + table[1][1]) / CASES)
        assert stats["kappa"] == pytest.approx(expected.kappa)
        assert stats["kappa_low"] == pytest.approx(expected.kappa_low)
        assert stats["kappa_high"] == pytest.approx(expected.kappa_upp)
        differ = {d["case_id"] for d in item["disagreements"]}
        assert len(differ) == table[0][1] + table[1][0]
    judge_differ = {d["case_id"] for d in by_name["task_completion"]["disagreements"]}
    assert judge_differ == {case_id(n) for n in range(CASES) if (n in JUDGE_PASSES) == (n in PERSON_FAILS)}
    kappa = by_name["task_completion"]["stats"]["kappa"]
    assert f"kappa {kappa:.3f}" in result.stdout and "label fail" in result.stdout
    # --min-kappa gates: below every kappa passes; above the judge's (the higher one) exits 1 naming it.
    lowest = min(item["stats"]["kappa"] for item in report["scorers"])
    assert kappa > lowest  # the outcome agrees less (case 6 fails a rule the judge passes)
    assert evaltrace("calibrate", "--store", store, "--min-kappa", f"{lowest - 0.05:.3f}").returncode == 0
    between = evaltrace("calibrate", "--store", store, "--min-kappa", f"{(lowest + kappa) / 2:.3f}")
    assert between.returncode == 1
    assert [line.split(":")[0] for line in between.stdout.splitlines() if "BELOW" in line] == ["entry outcome"]
    above = evaltrace("calibrate", "--store", store, "--min-kappa", f"{kappa + 0.05:.3f}")
    assert above.returncode == 1 and above.stdout.count("BELOW --min-kappa") == 2


def test_fewer_than_ten_labels_are_not_gated(judged: JudgedStore, tmp_path: Path) -> None:
    store = tmp_path / "store"
    for part in ("scores", "runs"):
        (store / part).mkdir(parents=True)
        for file in (judged.store / part).glob("*.parquet"):
            (store / part / file.name).write_bytes(file.read_bytes())
    labels = _labels_csv(tmp_path / "few.csv", judged, range(5), "task_completion")
    assert evaltrace("labels", "import", "--store", store, labels).returncode == 0
    result = evaltrace("calibrate", "--store", store, "--min-kappa", "0.99")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "fewer than 10 labels: not gated" in result.stdout


def test_labels_round_trip_through_csv_and_json_lines(judged: JudgedStore, tmp_path: Path) -> None:
    store = tmp_path / "store"
    labels = _labels_csv(tmp_path / "in.csv", judged, range(4), "task_completion")
    assert evaltrace("labels", "import", "--store", store, "--author", "bob", labels).returncode == 0
    relabel = tmp_path / "again.jsonl"  # a later label of the same key wins on export
    relabel.write_text(
        json.dumps({"case_id": case_id(0), "trace_id": judged.trace_ids[case_id(0)], "scorer": "task_completion",
                    "label": "PASS", "note": "changed my mind"}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    assert evaltrace("labels", "import", "--store", store, relabel).returncode == 0
    for name in ("out.csv", "out.jsonl"):
        result = evaltrace("labels", "export", "--store", store, tmp_path / name)
        assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader((tmp_path / "out.csv").read_text(encoding="utf-8").splitlines()))
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(rows) == len(lines) == 4
    assert list(rows[0]) == ["case_id", "trace_id", "scorer", "label", "note", "run_id", "author", "labelled_at"]
    first = next(r for r in lines if r["case_id"] == case_id(0))
    assert (first["label"], first["note"]) == ("pass", "changed my mind")
    assert {r["author"] for r in lines if r["case_id"] != case_id(0)} == {"bob"}
    assert all(r["labelled_at"].endswith("Z") or "+00:00" in r["labelled_at"] for r in lines)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("bad.csv", "case_id,trace_id,label\nc,t,maybe\n", "bad.csv: line 2: label 'maybe' is not one of: pass, fail"),
        ("bad.csv", "case_id,label\nc,pass\n", "bad.csv: line 1: the header has no trace_id column"),
        ("bad.jsonl", '{"trace_id": "t", "label": "pass"}\n[1]\n', "bad.jsonl: line 2: a row is a JSON object"),
        ("bad.txt", "x", "bad.txt: unknown labels file type"),
    ],
)
def test_a_bad_labels_file_exits_2_naming_file_and_line(tmp_path: Path, name: str, text: str, message: str) -> None:
    (tmp_path / name).write_text(text, encoding="utf-8")
    result = evaltrace("labels", "import", "--store", tmp_path / "store", name, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr
    assert not (tmp_path / "store" / "labels").exists()


def test_score_min_judge_kappa_refuses_a_poorly_calibrated_judge(judged: JudgedStore, tmp_path: Path) -> None:
    store = tmp_path / "store"
    for part in ("scores", "runs"):
        (store / part).mkdir(parents=True)
        for file in (judged.store / part).glob("*.parquet"):
            (store / part / file.name).write_bytes(file.read_bytes())
    spec = judged.runs.parent / "judged.yaml"
    args = ["score", judged.runs, "--spec", spec, "--store", store, "--judge-model", "m", "--judge-api-key", "k"]
    args += ["--judge-base-url", "http://127.0.0.1:9/v1"]  # never reached: the check comes before scoring
    few = _labels_csv(tmp_path / "few.csv", judged, range(3), "task_completion")
    assert evaltrace("labels", "import", "--store", store, few).returncode == 0
    too_few = evaltrace(*args, "--min-judge-kappa", "0.9", cwd=tmp_path)
    assert "judge task_completion has 3 labelled verdicts (10 needed): not checked" in too_few.stderr
    every = _labels_csv(tmp_path / "all.csv", judged, range(CASES), "task_completion")
    assert evaltrace("labels", "import", "--store", store, every).returncode == 0
    kappa = cohens_kappa(_independent(judged, "task_completion", range(CASES))).kappa
    refused = evaltrace(*args, "--min-judge-kappa", f"{kappa + 0.05:.3f}", cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.count("\n") == 1 and refused.stderr.startswith("Error: --min-judge-kappa")
    assert f"judge task_completion agrees with people's labels at kappa {kappa:.3f} (n={CASES}" in refused.stderr
    assert len(list((store / "runs").glob("*.parquet"))) == 1  # nothing was scored
    accepted = evaltrace(*args, "--min-judge-kappa", f"{kappa - 0.05:.3f}", cwd=tmp_path)
    assert "--min-judge-kappa" not in accepted.stderr  # past the check: it fails later, at the unreachable judge


def _readme_commands() -> list[list[str]]:
    """The `$ evaltrace labels|calibrate ...` lines of the docs ("Review traces and calibrate judges")."""
    import re
    import shlex

    from readme_blocks import docs_text

    lines = re.findall(r"^\$ evaltrace ((?:labels|calibrate) .*)$", docs_text(), re.MULTILINE)
    return [shlex.split(line) for line in lines]


def test_the_readme_labels_and_calibrate_commands_run_as_written(judged: JudgedStore, tmp_path: Path) -> None:
    commands = _readme_commands()
    assert [c[0] for c in commands] == ["labels", "labels", "calibrate", "calibrate"]
    store = tmp_path / "store"
    for part in ("scores", "runs"):
        (store / part).mkdir(parents=True)
        for file in (judged.store / part).glob("*.parquet"):
            (store / part / file.name).write_bytes(file.read_bytes())
    first = _labels_csv(tmp_path / "first.csv", judged, range(CASES), "task_completion")
    assert evaltrace("labels", "import", "--store", store, first).returncode == 0
    for words in commands:
        words = [judged.run_id if w == "01K..." else w for w in words]
        done = evaltrace(*words, cwd=tmp_path, env={"EVALTRACE_STORE": str(store)})
        assert done.returncode == 0, (words, done.stdout, done.stderr)
    assert json.loads((tmp_path / "calibration.json").read_text())["run_id"] == judged.run_id
    assert (tmp_path / "labels.csv").read_text(encoding="utf-8").count("\n") == CASES + 1
