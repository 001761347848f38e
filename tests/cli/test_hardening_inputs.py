"""Hostile spec content and runaway scorers end as one-line errors through the real CLI."""

from __future__ import annotations

from pathlib import Path

from cli_process import evaltrace


def test_unhashable_yaml_key_is_a_one_line_error_and_exit_2(tmp_path: Path) -> None:
    spec = tmp_path / "evals.yaml"
    spec.write_text("cases:\n  - id: a\n    input: x\n    ? [a, b]\n    : 1\n", encoding="utf-8")
    result = evaltrace("score", tmp_path, "--spec", spec)
    assert result.returncode == 2
    assert result.stderr.strip() == f"Error: {spec}: line 4, column 7: invalid YAML: found unhashable key"
    assert "Traceback" not in result.stderr + result.stdout
