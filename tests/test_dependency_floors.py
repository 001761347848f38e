"""The OpenTelemetry floors in pyproject.toml are the releases the suite runs (issue 28, item 12).

A floor below what is tested lets pip install releases evaltrace was never run with: with 1.38
evaltrace did not import, and 1.39's OTLP/HTTP exporter followed redirects with the headers and
the body. Each floor must be met by the installed release and name the same minor release, so
moving the suite to a newer OTel release means moving the floor with it.
"""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
FLOORED = ("opentelemetry-sdk", "opentelemetry-exporter-otlp", "opentelemetry-instrumentation")


def _floors() -> dict[str, Version]:
    dependencies = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["dependencies"]
    floors = {}
    for line in dependencies:
        requirement = Requirement(line)
        for specifier in requirement.specifier:
            if specifier.operator == ">=":
                floors[requirement.name] = Version(specifier.version)
    return floors


@pytest.mark.parametrize("package", FLOORED)
def test_the_floor_is_the_release_the_suite_runs(package: str) -> None:
    floor = _floors()[package]
    installed = Version(version(package))
    assert installed >= floor, f"{package} {installed} is below its floor {floor}"
    assert installed.release[:2] == floor.release[:2], (
        f"{package}: the suite runs {installed}, the floor is {floor}: set the floor to the release tested"
    )
