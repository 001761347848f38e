"""OTLP files: recognised by content, bad ones refused with the file and line named, imports cached safely.

Real files written by the official OTLP JSON file exporter and a Collector-style protobuf writer
(`_otlp_file_fixtures.py`), damaged on purpose; the commands run as real subprocesses.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _otlp_file_fixtures import Writers, gzipped, record_rich
from _send_fixtures import evaltrace

from evaltrace.collector.otlp.files.framing import OtlpFormat, frames, sniff


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Writers:
    return record_rich(tmp_path_factory.mktemp("rich"))


def test_files_are_recognised_by_content_not_by_name(recorded: Writers, tmp_path: Path) -> None:
    named = {
        "a.parquet": recorded.traces_json.read_bytes(),  # JSON lines under a Parquet name
        "b.json": recorded.traces_proto.read_bytes(),  # protobuf under a JSON name
        "c.txt": gzip.compress(recorded.logs_json.read_bytes()),
        "d": gzip.compress(recorded.logs_proto.read_bytes()),
        "e.jsonl": next(recorded.parquet.glob("*.parquet")).read_bytes(),  # Parquet under a JSON name
    }
    for name, data in named.items():
        (tmp_path / name).write_bytes(data)
    found = {name: sniff(tmp_path / name) for name in named}
    assert found == {
        "a.parquet": OtlpFormat.JSON,
        "b.json": OtlpFormat.PROTO,
        "c.txt": OtlpFormat.JSON,
        "d": OtlpFormat.PROTO,
        "e.jsonl": None,
    }
    assert len(list(frames(tmp_path / "d", OtlpFormat.PROTO))) == 3  # one message per log record exported


def test_a_truncated_protobuf_message_is_marked(recorded: Writers, tmp_path: Path) -> None:
    # The reader judges it (skipped with a warning when last: tests/collector/otlp/test_otlp_truncated.py).
    data = recorded.traces_proto.read_bytes()
    cut = tmp_path / "cut.pb"
    cut.write_bytes(data[:-5])
    read = list(frames(cut, OtlpFormat.PROTO))
    assert [(f.number, f.cut) for f in read] == [(1, ""), (2, ""), (3, ""), (4, "261 of its 266 bytes")]


def damaged(recorded: Writers, folder: Path) -> dict[str, tuple[Path, str]]:
    """Damaged OTLP files and what their error names (the file and where)."""
    lines = recorded.traces_json.read_text(encoding="utf-8").splitlines(keepends=True)
    truncated_line = folder / "truncated.jsonl"
    truncated_line.write_text("".join(lines[:2]) + lines[2][: len(lines[2]) // 2] + "\n" + "".join(lines[3:]))
    not_otlp = folder / "other.jsonl"
    not_otlp.write_text(lines[0] + json.dumps({"hello": "world"}) + "\n", encoding="utf-8")
    bad_id = folder / "bad-id.jsonl"
    bad_id.write_text(lines[0].replace('"spanId":"', '"spanId":"ab', 1), encoding="utf-8")
    gz = gzipped(recorded.traces_json)
    cut_gz = folder / "cut.jsonl.gz"
    cut_gz.write_bytes(gz.read_bytes()[: gz.stat().st_size // 2])
    broken_pb = folder / "broken.pb"  # message 2's first byte made an invalid tag (wire type 7)
    data = bytearray(recorded.logs_proto.read_bytes())
    data[4 + int.from_bytes(data[:4], "big") + 4] = 0xFF
    broken_pb.write_bytes(bytes(data))
    return {
        "truncated line": (truncated_line, "line 3"),
        "not OTLP": (not_otlp, "line 2"),
        "bad span id": (bad_id, "line 1"),
        "truncated gzip": (cut_gz, "cannot read on"),
        "damaged protobuf message": (broken_pb, "message 2"),
    }


@pytest.mark.parametrize("command", ["score", "traces", "import"])
def test_bad_files_exit_2_naming_the_file_and_line(recorded: Writers, tmp_path: Path, command: str) -> None:
    for what, (path, where) in damaged(recorded, tmp_path).items():
        args = ["--out", tmp_path / "out"] if command == "import" else []
        result = (
            evaltrace(command, recorded.parquet, path, *args)
            if command != "import"
            else evaltrace(command, path, *args)
        )
        assert result.returncode == 2, (what, result.stdout, result.stderr)
        error = result.stderr.strip().splitlines()
        assert len(error) == 1 and error[0].startswith("Error: "), (what, result.stderr)
        assert path.name in error[0] and where in error[0], (what, error[0])
        assert "Traceback" not in result.stderr
    # A failed import leaves nothing behind to be read twice after a retry.
    assert not list((tmp_path / "out").glob("*")) if (tmp_path / "out").exists() else True


def test_import_refuses_a_parquet_or_missing_file(recorded: Writers, tmp_path: Path) -> None:
    parquet = next(recorded.parquet.glob("*.parquet"))
    for path, message in ((parquet, "not an OTLP file"), (tmp_path / "nope.jsonl", "no such file")):
        result = evaltrace("import", path, "--out", tmp_path / "out")
        assert result.returncode == 2 and message in result.stderr and path.name in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder", encoding="utf-8")
    result = evaltrace("import", recorded.traces_json, "--out", blocked / "sub")
    assert result.returncode == 2 and "cannot write the run files" in result.stderr and "Traceback" not in result.stderr


def imports(cache: Path) -> list[Path]:
    return sorted((cache / "imports").glob("*/*.parquet"))


def grown_request(recorded: Writers) -> dict[str, Any]:
    """The file's first request again, as a new trace of a service named `grown`."""
    request = json.loads(recorded.traces_json.read_text(encoding="utf-8").splitlines()[0])
    for resource in request["resourceSpans"]:
        resource["resource"]["attributes"] = [{"key": "service.name", "value": {"stringValue": "grown"}}]
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                span["traceId"] = "f" * 32
    return dict(request)


def test_imports_are_cached_by_file_identity_and_cleaned(recorded: Writers, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {"EVALTRACE_CACHE_DIR": str(cache)}
    source = tmp_path / "traces.jsonl"
    source.write_bytes(recorded.traces_json.read_bytes())
    first = evaltrace("runs", source, env=env)
    assert first.returncode == 0 and re.search(r"spans:\s+4\n", first.stdout), first.stderr
    cached = imports(cache)
    assert len(cached) == 1
    stamp = cached[0].stat().st_mtime_ns
    assert evaltrace("traces", source, env=env).returncode == 0
    assert imports(cache) == cached and cached[0].stat().st_mtime_ns == stamp  # read again, not imported again
    # The file grows: a new import, never the stale one.
    with source.open("a", encoding="utf-8") as out:
        out.write(json.dumps(grown_request(recorded)) + "\n")
    grown = evaltrace("runs", source, env=env)
    assert "grown" in grown.stdout, grown.stdout
    assert len(imports(cache)) == 2
    # --no-cache imports again (replacing the cached import) rather than trusting it.
    before = {p.name for p in imports(cache)}
    scored = evaltrace("score", source, "--no-cache", "--json", tmp_path / "r.json", "--no-store", env=env)
    assert scored.returncode in (0, 1), scored.stderr
    assert len(imports(cache)) == 2 and {p.name for p in imports(cache)} != before
    cleaned = evaltrace("clean", "--cache", env=env)
    assert cleaned.returncode == 0 and "imported OTLP" in cleaned.stdout, cleaned.stdout
    assert imports(cache) == [] and not [p for p in (cache / "imports").iterdir()]


def test_two_scorings_at_once_share_one_import(recorded: Writers, tmp_path: Path) -> None:
    import subprocess

    cache = tmp_path / "cache"
    source = tmp_path / "traces.jsonl"
    source.write_bytes(recorded.traces_json.read_bytes() * 1)
    env = {**os.environ, "EVALTRACE_CACHE_DIR": str(cache)}
    command = [sys.executable, "-m", "evaltrace.cli", "traces", str(source), "--json"]
    procs = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    assert outputs[0][0] == outputs[1][0] == outputs[2][0] and len(outputs[0][0].splitlines()) == 2
    assert len(list((cache / "imports").iterdir())) == 1  # one published import, no temporary left


def test_empty_otlp_files_metrics_lines_and_folders_are_explained(recorded: Writers, tmp_path: Path) -> None:
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n{}\n", encoding="utf-8")
    result = evaltrace("traces", blank)
    assert result.returncode == 2 and "blank.jsonl: no spans or log records in this OTLP file" in result.stderr
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text('{"resourceMetrics":[]}\n' + recorded.traces_json.read_text(encoding="utf-8"), encoding="utf-8")
    result = evaltrace("runs", mixed)
    assert result.returncode == 0 and re.search(r"spans:\s+4\n", result.stdout), result.stderr
    assert "1 metrics or profiles request(s) skipped (line 1):" in result.stderr  # said, not silently dropped
    folder = tmp_path / "otlp"
    folder.mkdir()
    (folder / "traces.jsonl").write_bytes(recorded.traces_json.read_bytes())
    result = evaltrace("traces", folder)
    assert result.returncode == 2 and "OTLP files are read when named" in result.stderr, result.stderr


def test_old_imports_are_pruned_past_the_bound_but_recent_ones_kept(
    recorded: Writers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evaltrace.collector import cachedir
    from evaltrace.collector.otlp.files import import_cache as otlp_cache

    root = tmp_path / "cache"
    old, recent = root / "imports" / "old", root / "imports" / "recent"
    for folder in (old, recent):
        folder.mkdir(parents=True)
        (folder / "x.parquet").write_bytes(b"0" * 1000)
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    monkeypatch.setattr(cachedir, "MAX_BYTES", 500)
    files = otlp_cache.imported_files(recorded.traces_json, OtlpFormat.JSON, root=root)
    assert len(files) == 1 and files[0].exists()
    assert not old.exists()  # over the bound and unused for two hours
    assert recent.exists()  # over the bound too, but a scoring may be reading it


def test_a_json_number_too_long_to_read_exits_2_naming_the_line(recorded: Writers, tmp_path: Path) -> None:
    lines = recorded.traces_json.read_text(encoding="utf-8").splitlines(keepends=True)
    path = tmp_path / "long-number.jsonl"
    path.write_text(lines[0] + '{"resourceSpans": [], "x": ' + "1" * 5000 + "}\n", encoding="utf-8")
    result = evaltrace("traces", path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    error = result.stderr.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("Error: ") and path.name in error[0], result.stderr
    assert "line 2" in error[0] and "more than" in error[0], error[0]
