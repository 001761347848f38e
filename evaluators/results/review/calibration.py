"""Judges against people: each judge's (and the entry outcome's) agreement with the store's labels.

A label is about a trace (`labels.py`); the verdict it is held against is the stored one for the
same (case, trace, scorer): the scorer's `passed`, or for the entry outcome (scorer empty) the
entry's `entry_passed`. With a RUN, that run's verdicts; without, each key's latest verdict over
every stored run (newer runs win), which is what `score --min-judge-kappa` checks before it gates.
Verdicts that did not apply (null) are left out; so are labels with no verdict to hold them to.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel

from evaltrace.collector.errors import InputError
from evaltrace.evaluators.results.review.kappa import Agreement, Confusion, agreement
from evaltrace.evaluators.results.store.labels import Label, read_labels
from evaltrace.evaluators.results.store.reader import StoredRun, find_run, list_runs, read_run_scores

MIN_GATED = 10
"""Labelled verdicts a scorer needs before its kappa can fail `--min-kappa` / `--min-judge-kappa`."""
OUTCOME = ""
"""The `scorer` of labels (and calibration rows) about the entry's outcome."""
_COLUMNS = ("run_id", "case_id", "trace_id", "scorer", "passed", "entry_passed")

Key = tuple[str, str, str]
"""(case_id, trace_id, scorer); scorer `OUTCOME` for the entry's outcome."""


class Verdict(BaseModel):
    """A stored verdict a label is held against."""

    passed: bool
    run_id: str


class Disagreement(BaseModel):
    """A labelled entry where the person and the scorer differ."""

    case_id: str
    trace_id: str
    label: str
    verdict: str
    note: str
    run_id: str


class ScorerCalibration(BaseModel):
    """One scorer's (or the outcome's) agreement with the labels."""

    scorer: str
    """The scorer's name; empty for the entry outcome."""
    judge: bool
    stats: Agreement
    matrix: Confusion
    disagreements: list[Disagreement]

    @property
    def title(self) -> str:
        """How the scorer is named in messages."""
        return self.scorer or "entry outcome"

    def below(self, min_kappa: float) -> bool:
        """Whether this scorer's kappa fails `min_kappa` (only with at least `MIN_GATED` labels)."""
        kappa = self.stats.kappa
        return self.stats.n >= MIN_GATED and kappa is not None and kappa < min_kappa


class Calibration(BaseModel):
    """Every calibrated scorer against the store's labels."""

    store: str
    run_id: str | None
    """The run whose verdicts were used; null: each key's latest over every run."""
    labels: int
    scorers: list[ScorerCalibration]


def stored_verdicts(store: Path, runs: Iterable[StoredRun]) -> dict[Key, Verdict]:
    """Every (case, trace, scorer) verdict of `runs`, later runs overriding earlier ones."""
    verdicts: dict[Key, Verdict] = {}
    for run in runs:
        table = read_run_scores(store, run, _COLUMNS).to_pylist()
        for row in table:
            if row["trace_id"] is None:
                continue
            case = row["case_id"] or ""
            if row["entry_passed"] is not None:
                verdicts[(case, row["trace_id"], OUTCOME)] = Verdict(passed=row["entry_passed"], run_id=run.run_id)
            if row["scorer"] is not None and row["passed"] is not None:
                verdicts[(case, row["trace_id"], row["scorer"])] = Verdict(passed=row["passed"], run_id=run.run_id)
    return verdicts


def is_judge(name: str) -> bool:
    """Whether the scorer `name` asks an LLM judge (an unknown name, e.g. an unloaded plugin: no)."""
    from evaltrace.evaluators.scoring.scorers.registry import scorer_class

    try:
        return scorer_class(name).uses_judge
    except InputError:
        return False


def calibrate(store: Path, run_id: str | None = None) -> Calibration:
    """The labels of `store` against the verdicts of `run_id` (else each key's latest).

    Raises:
        InputError: the store has no labels, or the run is unknown.
    """
    labels = read_labels(store)
    if not labels:
        raise InputError(
            f"{store}: no labels in the score store (label entries with evaltrace review, "
            "or add them with evaltrace labels import FILE)"
        )
    runs = [find_run(store, run_id)] if run_id is not None else list_runs(store)
    verdicts = stored_verdicts(store, runs)
    judged = sorted({key[2] for key in verdicts if key[2] != OUTCOME and is_judge(key[2])})
    labelled = sorted({label.scorer for label in labels if label.scorer != OUTCOME})
    names = [OUTCOME, *sorted(set(judged) | set(labelled))]
    scorers = [_one(name, labels, verdicts) for name in names]
    chosen = runs[0].run_id if run_id is not None else None
    return Calibration(store=str(store), run_id=chosen, labels=len(labels), scorers=scorers)


def _one(name: str, labels: list[Label], verdicts: dict[Key, Verdict]) -> ScorerCalibration:
    pairs: list[tuple[Label, Verdict]] = []
    for label in labels:
        verdict = verdicts.get(label.key) if label.scorer == name else None
        if verdict is not None:
            pairs.append((label, verdict))
    matrix = Confusion.of((label.passed, verdict.passed) for label, verdict in pairs)
    disagreements = [
        Disagreement(
            case_id=label.case_id,
            trace_id=label.trace_id,
            label=label.label,
            verdict="pass" if verdict.passed else "fail",
            note=label.note,
            run_id=verdict.run_id,
        )
        for label, verdict in pairs
        if label.passed != verdict.passed
    ]
    judge = name != OUTCOME and is_judge(name)
    return ScorerCalibration(
        scorer=name, judge=judge, stats=agreement(matrix), matrix=matrix, disagreements=disagreements
    )


def judge_check(store: Path, judges: Iterable[str], min_kappa: float) -> list[str]:
    """`score --min-judge-kappa`: notes on judges that could not be checked (too few labels).

    Raises:
        InputError: a judge's kappa (with at least `MIN_GATED` labels) is below `min_kappa`; the
            message names the judge, its kappa and n.
    """
    names = sorted(set(judges))
    if not names:
        return []
    try:
        result = calibrate(store)
    except InputError:
        return [f"--min-judge-kappa: no labels in {store}: judges {', '.join(names)} are not calibrated"]
    by_name = {item.scorer: item for item in result.scorers}
    notes = []
    for name in names:
        item = by_name.get(name)
        n = item.stats.n if item is not None else 0
        if item is not None and item.below(min_kappa):
            raise InputError(
                f"--min-judge-kappa {min_kappa:g}: judge {name} agrees with people's labels at kappa "
                f"{item.stats.kappa:.3f} (n={n}, {store}): not gating on it (see evaltrace calibrate)"
            )
        if n < MIN_GATED:
            notes.append(f"--min-judge-kappa: judge {name} has {n} labelled verdicts ({MIN_GATED} needed): not checked")
        elif item is not None and item.stats.kappa is None:
            notes.append(f"--min-judge-kappa: judge {name}: kappa undefined (labels and verdicts all one value)")
    return notes
