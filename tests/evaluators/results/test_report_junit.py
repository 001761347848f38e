"""`--junit`'s writer on real recorded runs: schema-valid JUnit XML, one suite per tier, hostile content inert."""

from __future__ import annotations

import gc
import json
import tracemalloc
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

import pytest
import xmlschema
from report_runs import HOSTILE, PLUGIN, record_runs, write_spec

from evaltrace.collector.errors import InputError
from evaltrace.evaluators.engine import scoring
from evaltrace.evaluators.engine.scoring import ScoredRun, ScoreOptions
from evaltrace.evaluators.results.report.formats import ReportTarget, open_formats
from evaltrace.evaluators.results.report.junit_writer import JUnitWriter, xml_attribute, xml_text
from evaltrace.evaluators.results.report.model import (
    Counts,
    EntryResult,
    Report,
    ReportInputs,
    SampleResult,
    ScoreResult,
)
from evaltrace.evaluators.results.report.writer import ReportEntry, ReportFormat
from evaltrace.evaluators.scoring.scorers.registry import load_plugins
from evaltrace.evaluators.scoring.spec.loader import load_spec

SCHEMA = xmlschema.XMLSchema(str(Path(__file__).with_name("junit-10.xsd")))


@pytest.fixture
def scored(tmp_path: Path, isolated_registry: None) -> Iterator[tuple[Path, Path, ScoredRun]]:
    """The report-test run scored with its spec into `junit.xml` and `report.json` (one pass, two writers)."""
    load_plugins([str(PLUGIN)])
    runs = record_runs(tmp_path / "runs")
    spec = write_spec(tmp_path)
    junit, report = tmp_path / "junit.xml", tmp_path / "report.json"
    writer = open_formats(
        [
            ("junit", ReportTarget(str(junit), spec=str(spec))),
            ("json", ReportTarget(str(report), spec=str(spec))),
        ]
    )
    assert writer is not None
    try:
        run = scoring.score([runs], load_spec(spec), ScoreOptions(), writer)
        writer.finish(run.report)
    finally:
        writer.abort()
    yield junit, report, run


def cases(root: ET.Element) -> dict[str, ET.Element]:
    return {case.attrib["name"]: case for case in root.iter("testcase")}


def test_junit_is_schema_valid_with_one_suite_per_tier(scored: tuple[Path, Path, ScoredRun]) -> None:
    junit, _, _ = scored
    SCHEMA.validate(str(junit))
    root = ET.parse(junit).getroot()
    suites = root.findall("testsuite")
    # Tiers in the order they first appear; the cases without a tier share the spec's own suite.
    assert [s.attrib["name"] for s in suites] == ["evals.smoke", "evals.full", "evals"]
    counts = [(s.attrib["tests"], s.attrib["failures"], s.attrib["errors"], s.attrib["skipped"]) for s in suites]
    assert counts == [("2", "1", "0", "0"), ("2", "2", "0", "0"), ("2", "1", "1", "0")]
    assert [[c.attrib["name"] for c in s.findall("testcase")] for s in suites] == [
        ["paris", "hostile"],
        ["rome", "never-recorded"],
        ["broken-scorer", "nothing-applies"],
    ]
    assert (root.attrib["tests"], root.attrib["failures"], root.attrib["errors"]) == ("6", "4", "1")
    for suite in suites:
        times = [float(c.attrib["time"]) for c in suite.findall("testcase")]
        assert float(suite.attrib["time"]) == pytest.approx(sum(times), abs=0.002)
        assert all(c.attrib["classname"] == suite.attrib["name"] for c in suite.findall("testcase"))
    assert not [p for p in junit.parent.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_testcases_carry_the_verdicts_reasons_and_durations(scored: tuple[Path, Path, ScoredRun]) -> None:
    junit, report_path, _ = scored
    report = json.loads(report_path.read_text())
    by_case = {e["case_id"]: e for e in report["entries"]}
    found = cases(ET.parse(junit).getroot())

    paris = found["paris"]
    assert [child.tag for child in paris] == ["system-out"]  # passed: no verdict element
    seconds = sum(s["duration_seconds"] for s in by_case["paris"]["samples"])
    assert seconds > 0 and float(paris.attrib["time"]) == pytest.approx(seconds, abs=0.0005)
    assert f"trace: {by_case['paris']['trace_id']}" in (paris.findtext("system-out") or "")

    rome = found["rome"]
    failure = rome.find("failure")
    assert failure is not None and failure.attrib["type"] == "failed"
    assert failure.attrib["message"].startswith("output: passed in 2 of 3 samples")
    body = (failure.text or "").splitlines()
    samples = by_case["rome"]["samples"]
    assert len(samples) == 3
    assert f"sample 1/3 [trace {samples[0]['trace_id']}]: {samples[0]['status']}" in body
    failing = next(i for i, s in enumerate(samples) if s["status"] == "failed")
    header = body.index(f"sample {failing + 1}/3 [trace {samples[failing]['trace_id']}]: failed")
    assert body[header + 1] == "  - output: missing '21'."
    assert float(rome.attrib["time"]) == pytest.approx(sum(s["duration_seconds"] for s in samples), abs=0.0005)

    missing = found["never-recorded"].find("failure")
    assert missing is not None and missing.attrib["type"] == "missing"
    assert "no trace matched this case" in missing.attrib["message"]

    error = found["broken-scorer"].find("error")
    assert error is not None and found["broken-scorer"].find("failure") is None
    assert error.attrib["type"] == "scorer_error"
    assert error.attrib["message"].startswith("t_report_boom: ")
    assert "RuntimeError: scorer blew up <b>&</b>" in error.attrib["message"]  # escaped in the file, intact parsed

    nothing = found["nothing-applies"].find("failure")
    assert nothing is not None and "t_report_na" in nothing.attrib["message"]


def test_properties_name_the_versions_and_config_hashes(scored: tuple[Path, Path, ScoredRun]) -> None:
    junit, report_path, _ = scored
    report = json.loads(report_path.read_text())
    for suite in ET.parse(junit).getroot().findall("testsuite"):
        properties = {p.attrib["name"]: p.attrib["value"] for p in suite.iter("property")}
        assert properties["evaltrace.version"] == version("evaltrace")
        for name in {s["name"] for s in report["scorers"]}:
            infos = [s for s in report["scorers"] if s["name"] == name]
            assert properties[f"evaltrace.scorer.{name}.version"] == " ".join(
                sorted({str(s["version"]) for s in infos})
            )
            assert properties[f"evaltrace.scorer.{name}.config_hashes"].split() == sorted(
                {s["config_hash"] for s in infos}
            )


def test_hostile_recorded_content_is_inert_and_the_file_parses(scored: tuple[Path, Path, ScoredRun]) -> None:
    junit, _, _ = scored
    raw = junit.read_text(encoding="utf-8")
    for bad in ("\x00", "\x1b", "\u202e", "<script>", "]]>", "<b>html"):
        assert bad not in raw
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in raw and "]]&gt;" in raw
    hostile = cases(ET.parse(junit).getroot())["hostile"]
    out = hostile.findtext("system-out") or ""
    # Parsed back, the answer reads as it was recorded, its controls shown as visible escapes.
    expected = HOSTILE.replace("\x1b", "\\x1b").replace("\x00", "\\x00").replace("\u202e", "\\u202e")
    assert f"output: {expected.replace(chr(13), chr(92) + 'r')}" in out
    failure = hostile.find("failure")
    assert failure is not None
    assert failure.attrib["message"].startswith("output: expected exactly 'It is sunny.', got 'Sunny ]]> <script>")
    SCHEMA.validate(str(junit))


def test_escaping_helpers_drop_what_xml_forbids() -> None:
    text = "a\x00b\x1b[0m\ud800c\ufffe]]>&<\"'\n\tz"
    for escaped in (xml_text(text), xml_attribute(text)):
        doc = f'<r a="{xml_attribute(text)}">{escaped}</r>'
        parsed = ET.fromstring(doc)
        assert "\ud800" not in doc and "\ufffe" not in doc and "\x00" not in doc and "\x1b" not in doc
        assert parsed.attrib["a"] == "a\\x00b\\x1b[0mc]]>&<\"'\n\tz"  # newline and tab kept in the attribute
    assert xml_text("]]>") == "]]&gt;"


def _report(entries: int = 1) -> Report:
    return Report(
        evaltrace_version="0",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        inputs=ReportInputs(),
        passed=False,
        pass_rate=None,
        confidence=1.0,
        gate_reason="nothing was checked",
        counts=Counts(entries=entries),
        entries=[],
    )


def test_an_entry_nothing_applied_to_is_skipped(tmp_path: Path) -> None:
    target = tmp_path / "junit.xml"
    score = ScoreResult(scorer="tool_errors", passed=None, reason="The agent made no tool calls.")
    sample = SampleResult(trace_id="ab" * 16, status="not_applicable", passed=None, scores=[score])
    entry = EntryResult(
        case_id=None, trace_id="ab" * 16, passed=None, status="not_applicable", pass_rate=None, scores=[score]
    )
    with JUnitWriter(str(target)) as writer:
        writer.add(ReportEntry.of(entry.model_copy(update={"samples": [sample]})))
        writer.finish(_report())
    SCHEMA.validate(str(target))
    suite = ET.parse(target).getroot().find("testsuite")
    assert suite is not None and suite.attrib["name"] == "evaltrace" and suite.attrib["skipped"] == "1"
    case = suite.find("testcase")
    assert case is not None and case.attrib["name"] == "ab" * 16 and case.attrib["classname"] == "evaltrace"
    skipped = case.find("skipped")
    assert skipped is not None and skipped.attrib["message"] == "no scorer applied to this entry"


def test_an_unwritable_destination_is_an_input_error_and_abort_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"junit\.xml: cannot write the JUnit report"):
        JUnitWriter(str(tmp_path / "no-such-folder" / "junit.xml"))
    target = tmp_path / "junit.xml"
    with pytest.raises(RuntimeError, match="scoring broke"), JUnitWriter(str(target)) as writer:
        writer.add(ReportEntry.of(EntryResult(case_id="a", trace_id=None, passed=True, status="passed", pass_rate=1)))
        raise RuntimeError("scoring broke")
    assert list(tmp_path.iterdir()) == []


def _big_entry(index: int) -> ReportEntry:
    answer = f"answer {index} " + "x" * 20_000
    sample = SampleResult(
        trace_id=f"{index:032x}",
        status="failed",
        passed=False,
        output=answer,
        duration_seconds=0.5,
        scores=[ScoreResult(scorer="output", passed=False, reason=f"missing 'y' in {answer[:50]}")],
    )
    entry = EntryResult(
        case_id=f"case-{index}",
        trace_id=sample.trace_id,
        passed=False,
        status="failed",
        pass_rate=0.0,
        output=answer,
        tier=("smoke", "full", None)[index % 3],
        scores=sample.scores,
        samples=[sample],
    )
    return ReportEntry.from_json(entry.model_dump_json().encode())


def _peak_while_writing(target: Path, count: int) -> int:
    writer: ReportFormat = JUnitWriter(str(target), spec="evals.yaml")
    gc.collect()
    tracemalloc.start()
    try:
        for index in range(count):
            writer.add(_big_entry(index))
        writer.finish(_report(count))
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        writer.abort()


def test_entries_are_streamed_not_held(tmp_path: Path) -> None:
    """1,500 entries of ~20 kB each (30 MB given, 6 MB of XML) peak at about what 100 entries take."""
    small = _peak_while_writing(tmp_path / "small.xml", 100)
    large = _peak_while_writing(tmp_path / "large.xml", 1500)
    assert (tmp_path / "large.xml").stat().st_size > 6_000_000
    assert large < small + 2_000_000, (small, large)
    root = ET.parse(tmp_path / "large.xml").getroot()
    assert [s.attrib["tests"] for s in root.findall("testsuite")] == ["500", "500", "500"]
