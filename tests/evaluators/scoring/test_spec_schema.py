"""The shipped JSON Schema of spec files: generated from the models, valid, and accepting the samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from evaltrace.evaluators.scoring.scorers.registry import load_plugins
from evaltrace.evaluators.scoring.spec.loader import load_spec, shipped_schema
from evaltrace.evaluators.scoring.spec.model import spec_json_schema

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "evaluators" / "scoring" / "spec" / "spec_schema.json"


def test_shipped_schema_is_what_the_models_generate() -> None:
    # Regenerate with:
    # python -c "import json; from evaltrace.evaluators.scoring.spec.model import spec_json_schema as s;
    #   open('evaluators/scoring/spec/spec_schema.json', 'w').write(json.dumps(s(), indent=2) + '\n')"
    assert json.loads(SHIPPED.read_text(encoding="utf-8")) == spec_json_schema()
    assert shipped_schema() == spec_json_schema()


def test_shipped_schema_is_a_valid_draft_2020_12_schema() -> None:
    Draft202012Validator.check_schema(shipped_schema())
    assert shipped_schema()["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert shipped_schema()["required"] == ["cases"]


@pytest.mark.usefixtures("isolated_registry")
def test_sample_specs_validate_and_load() -> None:
    samples = sorted((ROOT / "samples").glob("*.yaml"))
    assert samples, "the repository ships sample specs"
    validator = Draft202012Validator(shipped_schema())
    load_plugins([str(ROOT / "samples" / "scorers.py")])  # evals-custom.yaml names its scorer
    for path in samples:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert list(validator.iter_errors(data)) == [], path
        assert load_spec(path).cases, path
