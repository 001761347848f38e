r"""The JUnit XML report (`--junit FILE`) that Jenkins, GitLab and GitHub test reporters read.

Layout. One `testsuite` per tier, in the order tiers first appear (entries without a tier share
one suite; a run without tiers has one suite), inside one `testsuites` root. Each entry is a
`testcase` named by its case id (the trace id without a spec), with `classname` the spec's name
and the tier (`evals.smoke`: Jenkins shows the part after the last dot as the class) and `time`
the entry's trace durations. A testcase holds at most one verdict element, as most readers show
one: `error` when a scorer could not run, `failure` when the entry failed or is missing,
`skipped` when no scorer applied; its body lists every failing or erroring scorer with its
reason, per sample when the case was repeated. Every suite carries `properties`: the evaltrace
version and each scorer's version and configuration hashes, so a past report can be compared.

Streaming. A suite's attributes (its counts) come before its testcases, and entries of several
tiers are interleaved, so each suite's testcases are spooled to its own unnamed temporary file as
entries arrive, and `finish` copies the spools into the report between the suite headers. Only
the per-suite counters stay in memory.

Untrusted content. Recorded text (inputs, answers, reasons quoting them) is escaped for XML;
terminal controls become visible escapes (`\x1b`) and characters XML 1.0 forbids are dropped, so
the file always parses and never drives a terminal it is printed on.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import IO, TYPE_CHECKING

from evaltrace.collector.terminal import printable
from evaltrace.evaluators.results.report._publish import AtomicFile
from evaltrace.evaluators.results.report.model import EntryResult, Report, SampleResult, ScoreResult
from evaltrace.evaluators.results.report.writer import AbortOnExit, ReportEntry

if TYPE_CHECKING:
    from evaltrace.evaluators.results.report.formats import ReportTarget

_MAX_REASON = 2000
"""Characters of one reason in a testcase body (the JSON report has them whole)."""
_MAX_MESSAGE = 1000
"""Characters of a `message` attribute, which readers show on one line."""
_MAX_TEXT = 4000
"""Characters of the input and the answer in a testcase's `system-out`."""
_SPOOL_BUFFER = 1 << 16

# XML 1.0 allows #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]; `printable`
# has already made the C0 controls visible, so what is left to drop is surrogates and U+FFFE/U+FFFF.
_XML_FORBIDDEN = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
# In an attribute a raw newline or tab would be normalised to a space by the parser: keep them as references.
_ATTRIBUTE_ESCAPES = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\n": "&#10;", "\r": "&#13;", "\t": "&#9;"}
)


def xml_text(text: str) -> str:
    """`text` as XML character data: controls shown as escapes, forbidden characters dropped, markup escaped."""
    return _XML_FORBIDDEN.sub("", printable(text, layout=True)).translate(_TEXT_ESCAPES)


def xml_attribute(text: str) -> str:
    """`text` as the inside of a double-quoted XML attribute value."""
    return _XML_FORBIDDEN.sub("", printable(text, layout=True)).translate(_ATTRIBUTE_ESCAPES)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class _Suite:
    """One testsuite: its counters and the spool of its testcases' XML."""

    name: str
    spool: IO[bytes] = field(default_factory=lambda: tempfile.TemporaryFile(buffering=_SPOOL_BUFFER))
    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    seconds: float = 0.0


class JUnitWriter(AbortOnExit):
    """Streams a report's entries into a JUnit XML file, published atomically by `finish`."""

    def __init__(self, destination: str, spec: str | None = None) -> None:
        """Open the report's temporary file.

        Args:
            destination: the JUnit file to write.
            spec: the spec file scored with, whose name becomes the test classes' (`None`: the defaults).

        Raises:
            InputError: the destination cannot be written.
        """
        self._file = AtomicFile(destination, "JUnit report")
        self._package = PurePath(spec.split("::", 1)[0]).stem if spec else "evaltrace"
        self._suites: dict[str | None, _Suite] = {}

    def add(self, entry: ReportEntry) -> None:
        """Spool one entry's testcase into its tier's suite."""
        result = entry.result()
        suite = self._suites.get(result.tier)
        if suite is None:
            name = self._package if result.tier is None else f"{self._package}.{result.tier}"
            suite = self._suites[result.tier] = _Suite(name)
        seconds = sum(s.duration_seconds or 0.0 for s in result.samples)
        verdict = _verdict(result)
        suite.tests += 1
        suite.seconds += seconds
        if verdict is not None:
            kind = verdict[0]
            suite.failures += kind == "failure"
            suite.errors += kind == "error"
            suite.skipped += kind == "skipped"
        suite.spool.write(_testcase(result, suite.name, seconds, verdict).encode())

    def finish(self, report: Report) -> None:
        """Write the suites with their counts and properties, then publish the file."""
        suites = list(self._suites.values()) or [_Suite(self._package)]
        tests = sum(s.tests for s in suites)
        failures = sum(s.failures for s in suites)
        errors = sum(s.errors for s in suites)
        seconds = sum(s.seconds for s in suites)
        properties = _properties(report)
        timestamp = report.created_at.replace(microsecond=0).isoformat()
        head = '<?xml version="1.0" encoding="UTF-8"?>\n'
        head += f'<testsuites name="evaltrace" tests="{tests}" failures="{failures}" errors="{errors}" '
        head += f'time="{seconds:.3f}">\n'
        self._file.write(head.encode())
        for suite in suites:
            attributes = (
                f'name="{xml_attribute(suite.name)}" tests="{suite.tests}" failures="{suite.failures}" '
                f'errors="{suite.errors}" skipped="{suite.skipped}" time="{suite.seconds:.3f}" timestamp="{timestamp}"'
            )
            self._file.write(f"  <testsuite {attributes}>\n{properties}".encode())
            suite.spool.seek(0)
            self._copy(suite.spool)
            self._file.write(b"  </testsuite>\n")
        self._file.write(b"</testsuites>\n")
        self._close_spools()
        self._file.publish()

    def abort(self) -> None:
        """Drop the unfinished file and the spools."""
        self._close_spools()
        self._file.discard()

    def _copy(self, spool: IO[bytes]) -> None:
        while chunk := spool.read(_SPOOL_BUFFER):
            self._file.write(chunk)

    def _close_spools(self) -> None:
        for suite in self._suites.values():
            suite.spool.close()


_Verdict = tuple[str, str, str, str]
"""Element (`failure`, `error`, `skipped`), its `type`, its `message`, its body."""


def _verdict(entry: EntryResult) -> _Verdict | None:
    """The testcase's one verdict element, or `None` for a passed entry."""
    if entry.status == "passed":
        return None
    if entry.status == "not_applicable":
        return ("skipped", "not_applicable", "no scorer applied to this entry", "")
    if entry.status == "missing":
        reason = entry.reason or "no trace matched this case"
        return ("failure", "missing", _clip(reason, _MAX_MESSAGE), reason)
    problems = [s for s in entry.scores if s.passed is False or s.error is not None]
    errored = [s for s in problems if s.error is not None]
    kind, type_ = ("error", "scorer_error") if errored else ("failure", "failed")
    message = "; ".join(f"{s.scorer}{_turn(s)}: {_reason(s, 300)}" for s in problems)
    if not message:
        message = entry.reason or "the entry failed"
    return (kind, type_, _clip(message, _MAX_MESSAGE), _body(entry))


def _body(entry: EntryResult) -> str:
    """Every failing or erroring scorer with its reason; per sample when the case has several."""
    samples = entry.samples
    if len(samples) <= 1:
        lines = _score_lines(entry.scores)
        if samples and samples[0].error:
            lines.append(f"the agent's run ended with an error: {_clip(samples[0].error, _MAX_REASON)}")
    else:
        lines = [f"{entry.reason}"] if entry.reason else []
        for number, sample in enumerate(samples, start=1):
            lines += _sample_lines(sample, number, len(samples))
    return "\n".join(lines)


def _sample_lines(sample: SampleResult, number: int, total: int) -> list[str]:
    trace = f" [trace {sample.trace_id}]" if sample.trace_id else ""
    lines = [f"sample {number}/{total}{trace}: {sample.status.replace('_', ' ')}"]
    lines += [f"  {line}" for line in _score_lines(sample.scores)]
    if sample.error:
        lines.append(f"  the agent's run ended with an error: {_clip(sample.error, _MAX_REASON)}")
    return lines


def _score_lines(scores: Iterable[ScoreResult]) -> list[str]:
    return [
        f"- {s.scorer}{_turn(s)}: {'error: ' if s.error is not None else ''}{_reason(s, _MAX_REASON)}"
        for s in scores
        if s.passed is False or s.error is not None
    ]


def _turn(score: ScoreResult) -> str:
    return f" (turn {score.turn})" if score.turn is not None else ""


def _reason(score: ScoreResult, limit: int) -> str:
    text = score.reason or score.error or "failed"
    if score.error is not None and score.reason and score.error not in score.reason:
        text = f"{score.error}: {score.reason}"
    return _clip(" ".join(text.split()), limit)


def _testcase(entry: EntryResult, classname: str, seconds: float, verdict: _Verdict | None) -> str:
    name = entry.case_id or entry.trace_id or "(no trace)"
    opening = f'    <testcase name="{xml_attribute(name)}" classname="{xml_attribute(classname)}" time="{seconds:.3f}"'
    parts = []
    if verdict is not None:
        element, type_, message, body = verdict
        parts.append(
            f'      <{element} type="{type_}" message="{xml_attribute(message)}">{xml_text(body)}</{element}>\n'
        )
    out = _system_out(entry)
    if out:
        parts.append(f"      <system-out>{xml_text(out)}</system-out>\n")
    if not parts:
        return opening + "/>\n"
    return opening + ">\n" + "".join(parts) + "    </testcase>\n"


def _system_out(entry: EntryResult) -> str:
    """The entry's trace, input and answer, for a reader looking into a failure."""
    lines = []
    if entry.trace_id:
        lines.append(f"trace: {entry.trace_id}")
    if entry.input is not None:
        lines.append(f"input: {_clip(entry.input, _MAX_TEXT)}")
    if entry.output is not None:
        lines.append(f"output: {_clip(entry.output, _MAX_TEXT)}")
    return "\n".join(lines)


def _properties(report: Report) -> str:
    """The suites' `properties`: the evaltrace version, then per scorer its versions and config hashes."""
    rows = [("evaltrace.version", report.evaltrace_version)]
    versions: dict[str, set[int]] = {}
    hashes: dict[str, set[str]] = {}
    for info in report.scorers:
        versions.setdefault(info.name, set()).add(info.version)
        hashes.setdefault(info.name, set()).add(info.config_hash)
    for name in versions:
        rows.append((f"evaltrace.scorer.{name}.version", " ".join(str(v) for v in sorted(versions[name]))))
        rows.append((f"evaltrace.scorer.{name}.config_hashes", " ".join(sorted(hashes[name]))))
    lines = [f'      <property name="{xml_attribute(n)}" value="{xml_attribute(v)}"/>\n' for n, v in rows]
    return "    <properties>\n" + "".join(lines) + "    </properties>\n"


def for_target(target: ReportTarget) -> JUnitWriter:
    """The `junit` format (`formats.FORMATS`)."""
    return JUnitWriter(target.destination, spec=target.spec)
