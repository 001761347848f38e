"""`evaltrace collect` on the command line: bad options and busy ports are one `Error:` line and exit
code 2, SIGINT stops it as cleanly as SIGTERM, and the announcement says where to send."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _receive_process import clean_env, rows, running_collector
from test_receive_requests import PROTOBUF, _body, post

from evaltrace.collector.otlp.receive.config import parse_address


def _collect(*args: str, folder: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "evaltrace.cli", "collect", "--dir", str(folder), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=clean_env())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--http", "nope"), "Error: --http 'nope': expected HOST:PORT (e.g. 127.0.0.1:4318, [::1]:4318) or 'off'"),
        (("--grpc", "127.0.0.1:70000"), "Error: --grpc '127.0.0.1:70000': expected HOST:PORT"),
        (("--http", "off", "--grpc", "off"), "Error: --http and --grpc are both off: nothing to listen on"),
    ],
)
def test_bad_options_are_one_error_line(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    result = _collect(*args, folder=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith(message) and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_an_unusable_folder_is_refused_at_start(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    result = _collect("--http", "127.0.0.1:0", "--grpc", "off", folder=blocker / "runs")
    assert result.returncode == 2
    assert result.stderr.startswith(f"Error: --dir {blocker / 'runs'}: cannot create it (Not a directory)")


def test_a_port_in_use_is_named(tmp_path: Path) -> None:
    with running_collector(tmp_path / "first") as first:
        for option, address in (("--http", first.http), ("--grpc", first.grpc)):
            other = "--grpc" if option == "--http" else "--http"
            result = _collect(option, str(address), other, "off", folder=tmp_path / "second")
            assert result.returncode == 2, result.stderr
            assert result.stderr.startswith(f"Error: {option} {address}: cannot listen there")
            assert "Traceback" not in result.stderr


def test_sigint_writes_everything_and_the_announcement_says_where_to_send(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    with running_collector(folder, "--run-id", "my-run") as collector:
        assert f"OTEL_EXPORTER_OTLP_ENDPOINT=http://{collector.http}" in collector.stdout
        assert (
            f"OTEL_EXPORTER_OTLP_PROTOCOL=grpc OTEL_EXPORTER_OTLP_ENDPOINT=http://{collector.grpc}" in collector.stdout
        )
        assert f"recording into {folder} (run id my-run)" in collector.stdout
        assert post(collector, "/v1/traces", _body(3, "interrupted"), PROTOBUF)[0] == 200
        assert collector.stop(signal.SIGINT) == 0, collector.err
    assert sorted(r["name"] for r in rows(folder)) == ["interrupted 0", "interrupted 1", "interrupted 2"]
    assert {r["run_id"] for r in rows(folder)} == {"my-run"}
    assert "received 3 spans and 0 log records in 1 request" in collector.stdout


@pytest.mark.parametrize(
    ("text", "loopback"),
    [
        ("127.0.0.1:4318", True),
        ("127.8.9.10:1", True),
        ("[::1]:4317", True),
        ("localhost:4318", True),
        ("0.0.0.0:4318", False),
        ("[::]:4317", False),
        ("192.168.1.5:4318", False),
        ("collector.example:4318", False),
    ],
)
def test_what_counts_as_loopback(text: str, loopback: bool) -> None:
    # Beyond loopback without a token, collect refuses to start (test_receive_hostile_auth.py).
    address = parse_address(text, "--http")
    assert address is not None and address.is_loopback is loopback
