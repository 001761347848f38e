"""OTLP files read like run files: `evaltrace import` round-trips every field, and scoring gives the same outcomes.

The same spans and log records go, through the real SDK, to evaltrace's exporters (Parquet run
files) and to the official OTLP JSON file exporters and a Collector-style protobuf file
(`_otlp_file_fixtures.py`); the commands run as real subprocesses.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from _otlp_file_fixtures import Writers, gzipped, record_rich
from _send_fixtures import evaltrace
from opentelemetry.sdk.resources import Resource
from report_runs import RUNS, record_run


def rows(files: list[Path], *, drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Every row of the run files, as plain values, without the `drop` columns, in a stable order."""
    found: list[dict[str, Any]] = []
    for path in files:
        for row in pq.read_table(path).to_pylist():
            for name in drop:
                row.pop(name)
            if row.get("large_attributes") is not None:
                row["large_attributes"] = sorted(row["large_attributes"])
            found.append(row)
    return sorted(found, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def run_files(folder: Path, logs: bool) -> list[Path]:
    return sorted(p for p in folder.glob("*.parquet") if p.name.endswith(".logs.parquet") == logs)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Writers:
    return record_rich(tmp_path_factory.mktemp("rich"))


@pytest.mark.parametrize("layout", ["json", "proto", "json.gz", "proto.gz"])
def test_import_round_trips_every_field_of_spans_and_log_records(
    recorded: Writers, tmp_path: Path, layout: str
) -> None:
    traces, logs = (
        (recorded.traces_json, recorded.logs_json) if "json" in layout else (recorded.traces_proto, recorded.logs_proto)
    )
    if layout.endswith(".gz"):
        traces, logs = gzipped(traces), gzipped(logs)
    out = tmp_path / "imported"
    result = evaltrace("import", traces, logs, "--out", out, "--run-id", "original")
    assert result.returncode == 0, result.stderr
    assert "4 spans" in result.stdout and "3 log records" in result.stdout, result.stdout
    expected = rows(run_files(recorded.parquet, logs=False))
    assert len(expected) == 4
    assert rows(run_files(out, logs=False)) == expected
    # log_id numbers records per writer; everything else is the record itself.
    assert rows(run_files(out, logs=True), drop=("log_id",)) == rows(
        run_files(recorded.parquet, logs=True), drop=("log_id",)
    )


def test_commands_read_otlp_files_and_mix_them_with_parquet(recorded: Writers, tmp_path: Path) -> None:
    listed = evaltrace("traces", recorded.traces_json, recorded.logs_json, "--json")
    assert listed.returncode == 0, listed.stderr
    from_otlp = [json.loads(line) for line in listed.stdout.splitlines()]
    parquet = [json.loads(line) for line in evaltrace("traces", recorded.parquet, "--json").stdout.splitlines()]
    # The same traces; only the run label differs (an OTLP file has none: its name stands for it).
    assert {t["run_id"] for t in from_otlp} == {"traces"} and {t["run_id"] for t in parquet} == {"original"}
    assert [{**t, "run_id": None} for t in parquet] == [{**t, "run_id": None} for t in from_otlp]
    assert len(from_otlp) == 2
    # Mixed in one call: the copies of the same spans are read once (deduplicated on their ids).
    mixed = evaltrace("runs", recorded.parquet, recorded.traces_proto, str(recorded.folder / "*.jsonl"))
    assert mixed.returncode == 0, mixed.stderr
    assert re.search(r"spans:\s+4 \(8 duplicate rows ignored\)", mixed.stdout), mixed.stdout
    assert re.search(r"files:\s+5\n", mixed.stdout), mixed.stdout  # 2 run files, 3 imported (2 from the glob)
    trace_id = from_otlp[0]["trace_id"]
    shown = evaltrace("show", trace_id, gzipped(recorded.traces_json))
    assert shown.returncode == 0, shown.stderr
    assert trace_id in shown.stdout


def record_scored(folder: Path) -> Writers:
    """`report_runs.RUNS` recorded once into every writer (Parquet, OTLP JSON, OTLP protobuf)."""
    writers = Writers(folder, run_id="scored")
    provider = writers.tracer_provider(Resource({"service.name": "weather-agent"}))
    tracer = provider.get_tracer("report-test-agent")
    for kwargs in RUNS:
        record_run(tracer, **kwargs)
    provider.shutdown()
    for exporter in writers.log_exporters:  # nothing logged: closes their files
        exporter.shutdown()
    return writers


def outcomes(report_path: Path) -> list[Any]:
    """The report's entries, whole: cases, outcomes, scores, reasons, samples with their ids and times."""
    return list(json.loads(report_path.read_text(encoding="utf-8"))["entries"])


def test_the_same_traces_score_alike_from_otlp_json_and_from_parquet(tmp_path: Path) -> None:
    writers = record_scored(tmp_path)
    spec = tmp_path / "evals.yaml"
    spec.write_text(_plain_spec(), encoding="utf-8")
    reports = {}
    for name, path in (("parquet", writers.parquet), ("json", writers.traces_json), ("proto", writers.traces_proto)):
        result = evaltrace("score", path, "--spec", spec, "--json", tmp_path / f"{name}.json", "--no-store")
        assert result.returncode in (0, 1), result.stderr
        reports[name] = outcomes(tmp_path / f"{name}.json")
    assert [(e["case_id"], e["status"]) for e in reports["parquet"]] == [
        ("paris", "passed"),
        ("hostile", "failed"),
        ("rome", "failed"),
    ]
    assert all(e["scores"] for e in reports["parquet"]), reports["parquet"]
    assert reports["json"] == reports["parquet"]
    assert reports["proto"] == reports["parquet"]


def _plain_spec() -> str:
    """`report_runs.SPEC` without the plugin scorers (the CLI runs without `--plugin` here)."""
    return """\
confidence: 0.5
cases:
  - id: paris
    input: "What's the weather in Paris?"
    expect:
      tool_calls:
        - {name: get_weather, arguments: {city: Paris}}
      output: {contains: ["18"]}
  - id: hostile
    input: "Tell me about the weather"
    expect:
      output: {equals: "It is sunny."}
  - id: rome
    input: "And in Rome?"
    repeat: mean
    expect:
      output: {contains: ["21"]}
"""


def test_a_long_import_is_written_as_several_complete_files(recorded: Writers, tmp_path: Path) -> None:
    from evaltrace.collector.otlp.files.framing import OtlpFormat
    from evaltrace.collector.otlp.files.importer import ImportTarget, import_otlp

    target = ImportTarget(tmp_path, run_id="original", writer_id="w", max_rows=2, batch_rows=1)
    done = import_otlp(recorded.traces_proto, OtlpFormat.PROTO, target)
    spans = run_files(tmp_path, logs=False)
    assert done.spans == 4 and done.files == spans and len(spans) == 2  # a new file every 2 rows
    assert rows(spans) == rows(run_files(recorded.parquet, logs=False))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left
