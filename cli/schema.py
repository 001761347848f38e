"""`evaltrace schema`: the JSON Schema of spec files."""

from __future__ import annotations

import json

import typer


def schema() -> None:
    """Print the JSON Schema of spec files (point your editor's YAML/JSON support at it)."""
    from evaltrace.evaluators.scoring.spec.loader import shipped_schema

    typer.echo(json.dumps(shipped_schema(), indent=2))
