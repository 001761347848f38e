"""The one registry mechanism (collector/registry.py): names, lazy references, errors that list the choices."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from evaltrace.collector.errors import InputError
from evaltrace.collector.registry import Registry, did_you_mean


class Widget:
    """Something to register."""


def test_a_lazy_name_is_a_valid_choice_before_its_module_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "registry_probe.py").write_text("class Probe:\n    pass\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "registry_probe", raising=False)
    things: Registry[object] = Registry("thing")
    things.lazy("probe", "registry_probe:Probe")
    assert things.names() == ["probe"]
    things.check("probe")
    assert "registry_probe" not in sys.modules  # listing and checking the name import nothing
    probe = things.get("probe")
    assert probe is sys.modules["registry_probe"].Probe
    assert things.loaded() == {"probe": probe}


def test_an_unknown_name_names_the_kind_the_closest_name_and_every_choice() -> None:
    class Unknown(InputError):
        pass

    things: Registry[object] = Registry("widget", hint=" (see the docs)", error=Unknown)
    things.add("spinner", Widget)
    things.lazy("sprocket", "fractions:Fraction")
    with pytest.raises(Unknown) as raised:
        things.get("spiner")
    assert (
        str(raised.value)
        == "Unknown widget 'spiner' (did you mean 'spinner'?). Valid choices: spinner, sprocket (see the docs)"
    )
    assert did_you_mean("zzz", ["spinner"]) == ""


def test_two_objects_under_one_name_are_refused_but_the_object_a_reference_names_is_not() -> None:
    things: Registry[object] = Registry("thing")
    things.add("widget", Widget)
    things.add("widget", Widget)  # the same object again: a no-op
    with pytest.raises(ValueError, match=r"thing name 'widget' is registered twice \(Widget, Fraction\)"):
        from fractions import Fraction

        things.add("widget", Fraction)
    things.lazy("ref", f"{__name__}:Widget")
    things.add("ref", Widget)  # what the reference names (a decorator running as its module loads)
    assert things.get("ref") is Widget


def test_values_keep_the_order_registered_and_follow_changes() -> None:
    things: Registry[object] = Registry("thing")
    things.add("b", 2)
    things.lazy("a", "math:pi")
    first = things.values()
    assert things.values() is first  # kept: conventions are asked once per span
    things.add("c", 3)
    assert things.values()[0] == 2 and things.values()[2] == 3
    things.remove("b")
    assert len(things.values()) == 2
