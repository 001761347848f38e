"""OTLP files with an over-long line or message: a one-line error and exit 2, memory bounded by the frame limit.

Each hostile file is small on disk (gzipped) and huge inside: a 300 MB JSON line (1.1 GB peak
before the limit), a protobuf length prefix claiming 4 GiB in front of 420 MB of zeros (the whole
rest read, 520 MB peak). The CLI runs in a subprocess that reports its own peak RSS.
"""

from __future__ import annotations

import gzip
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.files import framing as otlp_frames
from evaltrace.collector.otlp.files.framing import OtlpFormat, frames

_MIB = 1 << 20
# The peak is the process's own memory's high-water mark (VmHWM), not getrusage's ru_maxrss: Linux
# carries ru_maxrss over fork and exec, so a child of a large pytest process (~900 MiB late in the full
# suite) reported the parent's size, whatever it used itself.
_SCORE_AND_PEAK = """
import sys
from evaltrace.cli.main import main
code = main(sys.argv[1:])
with open("/proc/self/status") as status:
    hwm_kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print("peak-mib", hwm_kib // 1024, "exit", code)
"""


def _score_peak(path: Path) -> tuple[int, int, str]:
    """`evaltrace score PATH` in a fresh interpreter: (exit code, peak RSS in MiB, stderr)."""
    done = subprocess.run(
        [sys.executable, "-c", _SCORE_AND_PEAK, "score", str(path), "--no-store"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    *_, peak, _, code = done.stdout.split()
    return int(code), int(peak), done.stderr


def _gzipped(path: Path, head: bytes, filler: bytes, mib: int, tail: bytes = b"") -> Path:
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(head)
        chunk = filler * _MIB
        for _ in range(mib):
            out.write(chunk)
        out.write(tail)
    return path


def test_a_300_mb_json_line_is_refused_with_bounded_memory(tmp_path: Path) -> None:
    head = b'{"resourceSpans": [{"resource": {"attributes": [{"key": "k", "value": {"stringValue": "'
    path = _gzipped(tmp_path / "one-line.jsonl.gz", head, b"a", 300, b'"}}]}}]}\n')
    assert path.stat().st_size < 2 * _MIB
    code, peak, stderr = _score_peak(path)
    assert code == 2
    assert stderr.strip() == f"Error: {path}: line 1: longer than 64 MiB, the most one request may hold"
    assert peak < 500, f"peak RSS {peak} MiB"  # 1,091 MiB before the limit


def test_a_message_claiming_4_gib_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = _gzipped(tmp_path / "claims.pb.gz", struct.pack(">I", 0xFFFFFFFF) + b"\x0a\x00", b"\x00", 420)
    code, peak, stderr = _score_peak(path)
    assert code == 2
    expected = f"Error: {path}: message 1: 4294967295 bytes, over 64 MiB, the most one request may hold"
    assert stderr.strip() == expected
    assert peak < 300, f"peak RSS {peak} MiB"  # 521 MiB when the claimed size was read


@pytest.fixture
def small_limit(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(otlp_frames, "MAX_FRAME_BYTES", 100)
    return 100


def test_a_line_of_exactly_the_limit_is_read_one_byte_more_is_not(tmp_path: Path, small_limit: int) -> None:
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"{" + b" " * (small_limit - 2) + b"}\n" + b"{}" + b"\n")
    assert [(f.number, len(f.data)) for f in frames(path, OtlpFormat.JSON)] == [(1, small_limit + 1), (2, 3)]
    path.write_bytes(b"{}\n" + b"{" + b" " * (small_limit - 1) + b"}\n")
    with pytest.raises(InputError, match=r"lines\.jsonl: line 2: longer than"):
        list(frames(path, OtlpFormat.JSON))


def test_a_message_of_exactly_the_limit_is_read_one_byte_more_is_not(tmp_path: Path, small_limit: int) -> None:
    path = tmp_path / "messages.pb"
    path.write_bytes(struct.pack(">I", small_limit) + b"\x0a" * small_limit)
    assert [len(f.data) for f in frames(path, OtlpFormat.PROTO)] == [small_limit]
    path.write_bytes(path.read_bytes() + struct.pack(">I", small_limit + 1) + b"\x0a" * (small_limit + 1))
    with pytest.raises(InputError, match=r"messages\.pb: message 2: 101 bytes, over"):
        list(frames(path, OtlpFormat.PROTO))


def _span_of_events(events: int) -> dict[str, object]:
    span = {"traceId": "1" * 32, "spanId": "1" * 16, "name": "x", "startTimeUnixNano": "1", "endTimeUnixNano": "2"}
    return {"resourceSpans": [{"scopeSpans": [{"spans": [{**span, "events": [{"name": "e"}] * events}]}]}]}


@pytest.mark.parametrize("fmt", [OtlpFormat.JSON, OtlpFormat.PROTO])
def test_an_imported_span_holds_the_sdk_limits_as_a_received_one_does(tmp_path: Path, fmt: OtlpFormat) -> None:
    # A 64 MiB line of empty events made ~20 million SDK events (a 4 MiB line peaked at 690 MiB);
    # the receiver cuts a request to the SDK's limits before decoding, and so does an import now.
    import json

    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from evaltrace.collector.otlp.files.messages import Skipped, requests

    request = _span_of_events(300)
    path = tmp_path / "events.otlp"
    if fmt is OtlpFormat.JSON:
        path.write_text(json.dumps(request) + "\n", encoding="utf-8")
    else:
        message = json_format.ParseDict(request, ExportTraceServiceRequest())  # ids: base64 in protobuf's JSON
        span = message.resource_spans[0].scope_spans[0].spans[0]
        span.trace_id, span.span_id = b"\x11" * 16, b"\x11" * 8
        data = message.SerializeToString()
        path.write_bytes(struct.pack(">I", len(data)) + data)
    ((_, items),) = list(requests(path, fmt, Skipped()))
    (span,) = items.items
    assert (len(span.events), span.dropped_events) == (128, 172)
