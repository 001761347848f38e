"""OTLP files whose last record is cut short, as a Collector that crashed leaves them.

The files hold one agent trace per request (a line of OTLP JSON, or a length-prefixed protobuf
message as the Collector's file exporter writes it), encoded by the SDK's own encoders. The last
record cut mid-way is skipped with one warning naming the file, the record and what is left of
it, and every complete trace is read and scored; a record damaged before the end still exits 2
naming it; a protobuf file cut inside its first message is reported as such, not as a Parquet
file. The commands run as real subprocesses.
"""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path

import pytest
from _send_fixtures import evaltrace
from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans as json_encode_spans
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

TRACES = 4


def _requests() -> list[tuple[bytes, bytes]]:
    """Per trace, its protobuf request and its OTLP/JSON line (no newline)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "crashy"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent")
    found = []
    for n in range(TRACES):
        exporter.clear()
        with tracer.start_as_current_span(f"invoke_agent run{n}") as root:
            root.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": f"run{n}"})
            with tracer.start_as_current_span("chat m", kind=SpanKind.CLIENT) as chat:
                chat.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"})
        spans = exporter.get_finished_spans()
        found.append((encode_spans(spans).SerializeToString(), json.dumps(json_encode_spans(spans).to_dict()).encode()))
    return found


@pytest.fixture(scope="module")
def requests() -> list[tuple[bytes, bytes]]:
    return _requests()


def _jsonl(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def _proto(path: Path, messages: list[bytes]) -> Path:
    path.write_bytes(b"".join(struct.pack(">I", len(m)) + m for m in messages))
    return path


def _warning(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def _traces(path: Path, tmp_path: Path) -> list[str]:
    result = evaltrace("traces", path, "--json", env={"EVALTRACE_CACHE_DIR": str(tmp_path / "cache")})
    assert result.returncode == 0, result.stderr
    return sorted(json.loads(line)["name"] for line in result.stdout.splitlines())


def test_a_json_lines_file_cut_in_its_last_line_reads_every_complete_trace(
    requests: list[tuple[bytes, bytes]], tmp_path: Path
) -> None:
    lines = [js for _, js in requests]
    path = tmp_path / "crashed.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines[:-1]) + lines[-1][:100])
    result = evaltrace("import", path, "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert f"{path} (OTLP JSON lines): 6 spans, 0 log records" in result.stdout  # three traces of two spans
    warning = _warning(result.stderr)
    assert str(path) in warning and "line 4 (100 bytes with no newline at the end, not complete JSON)" in warning
    assert "is cut short" in warning and "lost" in warning and "the 3 before it were read" in warning
    cache = {"EVALTRACE_CACHE_DIR": str(tmp_path / "cache")}
    for run in ("imported", "read from the cache"):  # the loss is said each time the file is read
        score = evaltrace("score", path, "--no-store", "--json", tmp_path / "r.json", env=cache)
        assert score.returncode in (0, 1), score.stderr
        warned = f"{path}: the last record, line 4 (100 bytes"
        assert warned in score.stderr and "Traceback" not in score.stderr, (run, score.stderr)
        report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
        assert len({e["trace_id"] for e in report["entries"]}) == TRACES - 1


def test_a_protobuf_file_cut_in_its_last_message_reads_every_complete_trace(
    requests: list[tuple[bytes, bytes]], tmp_path: Path
) -> None:
    messages = [pb for pb, _ in requests]
    whole = _proto(tmp_path / "whole.pb", messages).read_bytes()
    path = tmp_path / "crashed.pb"
    path.write_bytes(whole[:-10])
    result = evaltrace("import", path, "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert "6 spans" in result.stdout
    size = len(messages[-1])
    warning = _warning(result.stderr)
    assert str(path) in warning and f"message 4 ({size - 10:,} of its {size:,} bytes)" in warning
    assert _traces(path, tmp_path) == [f"invoke_agent run{n}" for n in range(TRACES - 1)]


def test_a_file_cut_inside_a_length_prefix_warns_too(requests: list[tuple[bytes, bytes]], tmp_path: Path) -> None:
    messages = [pb for pb, _ in requests]
    path = tmp_path / "prefix.pb"
    path.write_bytes(_proto(tmp_path / "whole.pb", messages[:2]).read_bytes() + b"\x00\x00")
    result = evaltrace("import", path, "--out", tmp_path / "out")
    assert result.returncode == 0 and "4 spans" in result.stdout, result.stderr
    assert "message 3 (2 of the 4 bytes of its length prefix)" in _warning(result.stderr)


def test_a_protobuf_file_cut_inside_its_first_message_is_named_so(
    requests: list[tuple[bytes, bytes]], tmp_path: Path
) -> None:
    path = tmp_path / "first.pb"
    path.write_bytes(_proto(tmp_path / "whole.pb", [requests[0][0]]).read_bytes()[:200])
    size = len(requests[0][0])
    for command in (["import", path, "--out", tmp_path / "out"], ["score", path, "--no-store"]):
        result = evaltrace(*command)
        assert result.returncode == 2, result.stderr
        error = result.stderr.strip().splitlines()[-1]
        assert error == (
            f"Error: {path}: an OTLP protobuf file whose first record is cut short: "
            f"message 1 (196 of its {size:,} bytes); nothing to read"
        ), result.stderr
        assert "Parquet" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("layout", ["json", "proto"])
def test_damage_before_the_end_still_exits_2_naming_it(
    requests: list[tuple[bytes, bytes]], tmp_path: Path, layout: str
) -> None:
    # A Collector restarted after a crash appends after the cut record: it is no longer the last.
    if layout == "json":
        lines = [js for _, js in requests]
        path = tmp_path / "restarted.jsonl"
        path.write_bytes(lines[0] + b"\n" + lines[1][:100] + lines[2] + b"\n" + lines[3] + b"\n")
        where = "line 2: not valid JSON"
    else:
        messages = [pb for pb, _ in requests]
        path = tmp_path / "restarted.pb"
        data = bytearray(_proto(tmp_path / "whole.pb", messages).read_bytes())
        data[4 + len(messages[0]) + 4] = 0xFF  # message 2's first byte: an invalid tag
        path.write_bytes(bytes(data))
        where = "message 2: not an OTLP protobuf request"
    for command in (["import", path, "--out", tmp_path / "out"], ["traces", path]):
        result = evaltrace(*command, env={"EVALTRACE_CACHE_DIR": str(tmp_path / "cache")})
        assert result.returncode == 2, result.stderr
        (error,) = result.stderr.strip().splitlines()
        assert error.startswith(f"Error: {path}: {where}"), error


def test_a_gzip_file_that_is_not_otlp_is_named_as_gzip(tmp_path: Path) -> None:
    path = tmp_path / "notes.gz"
    path.write_bytes(gzip.compress(b"just some text\n" * 10))
    result = evaltrace("traces", path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"Error: {path}: a gzip file holding neither OTLP JSON lines nor OTLP protobuf messages"
        " (run files are plain Parquet)"
    )


def test_a_complete_last_line_without_a_newline_is_read_without_a_warning(
    requests: list[tuple[bytes, bytes]], tmp_path: Path
) -> None:
    path = tmp_path / "no-newline.jsonl"
    path.write_bytes(b"\n".join(js for _, js in requests))
    result = evaltrace("import", path, "--out", tmp_path / "out")
    assert result.returncode == 0 and "8 spans" in result.stdout, result.stderr
    assert result.stderr == ""
