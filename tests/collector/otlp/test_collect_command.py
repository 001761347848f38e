"""`evaltrace collect [options] -- CMD`: runs CMD exporting to the receiver and returns once every span
CMD's exporter flushed is in a complete run file, with CMD's exit code.

CMD is a real process using the real OTel SDK's OTLP exporters, configured by nothing but the
environment collect gives it (`_collect_child_app.py`). The files are read back with evaltrace's
own reader, which skips in-flight files: a span counted there is in a finished file.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import shlex
import shutil
import signal
import subprocess
import sys
import termios
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from _receive_process import clean_env

from evaltrace.collector import resolve_paths
from evaltrace.collector.runfiles.reader import read_spans

APP = Path(__file__).with_name("_collect_child_app.py")
NODE_APP = Path(__file__).with_name("_collect_node_app.js")
TOKEN = "s3cr3t-t0ken,with=odd%chars"


def _collect(
    folder: Path, *command: str, listen: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    listeners = listen or ("--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0")
    args = [sys.executable, "-m", "evaltrace.cli", "collect", "--dir", str(folder), *listeners, "--", *command]
    return subprocess.run(args, capture_output=True, text=True, timeout=180, env=clean_env(env))


def _names(folder: Path) -> list[str]:
    return [span.name for span in read_spans(resolve_paths([folder]))]


@pytest.mark.parametrize(
    ("listen", "env"),
    [
        pytest.param((), None, id="http"),
        pytest.param(("--http", "off", "--grpc", "127.0.0.1:0"), None, id="grpc-only"),
        pytest.param((), {"EVALTRACE_COLLECT_TOKEN": TOKEN}, id="http-token"),
    ],
)
def test_the_files_are_complete_when_the_command_returns(
    tmp_path: Path, listen: tuple[str, ...], env: dict[str, str] | None
) -> None:
    folder = tmp_path / "runs"
    done = _collect(folder, sys.executable, str(APP), "send", "2000", "3", listen=listen, env=env)
    assert done.returncode == 3, done.stderr
    names = _names(folder)
    assert len(names) == 2000
    assert set(names) == {f"span {n}" for n in range(2000)}
    assert "received 2000 spans and 0 log records" in done.stderr, done.stderr
    assert "refused" not in done.stderr  # a token the child did not carry would show as HTTP 401
    assert done.stdout == ""  # collect's own lines go to stderr: stdout is the command's
    assert TOKEN not in done.stderr and "s3cr3t" not in done.stderr
    files = list(folder.glob("*.parquet"))
    assert files and all(pq.read_metadata(f).metadata[b"evaltrace.received_by"] == b"collect" for f in files)


def test_the_command_gets_the_receivers_real_address_and_protocol(tmp_path: Path) -> None:
    done = _collect(tmp_path / "runs", sys.executable, str(APP), "env", env={"EVALTRACE_COLLECT_TOKEN": TOKEN})
    assert done.returncode == 0, done.stderr
    given = json.loads(done.stdout)
    endpoint = given["OTEL_EXPORTER_OTLP_ENDPOINT"]
    assert endpoint.startswith("http://127.0.0.1:") and not endpoint.endswith(":0")
    assert f"OTLP/HTTP  {endpoint}" in done.stderr
    assert given["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    assert given["OTEL_EXPORTER_OTLP_HEADERS"] == "authorization=Bearer%20s3cr3t-t0ken%2Cwith%3Dodd%25chars"
    assert "s3cr3t" not in done.stderr


def test_headers_meant_for_another_backend_are_not_sent_to_the_receiver(tmp_path: Path) -> None:
    # The user's exporter headers carry their backend's key; with the endpoint moved to the receiver,
    # the command would send that key here. Only the receiver's own token header is given.
    theirs = {
        "OTEL_EXPORTER_OTLP_HEADERS": "x-langfuse-key=lf-secret-1",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "api_key=phoenix-secret-2",
        "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "api_key=phoenix-secret-3",
    }
    done = _collect(
        tmp_path / "runs", sys.executable, str(APP), "env", env={**theirs, "EVALTRACE_COLLECT_TOKEN": TOKEN}
    )
    assert done.returncode == 0, done.stderr
    given = json.loads(done.stdout)
    assert given["OTEL_EXPORTER_OTLP_HEADERS"] == "authorization=Bearer%20s3cr3t-t0ken%2Cwith%3Dodd%25chars"
    assert "OTEL_EXPORTER_OTLP_TRACES_HEADERS" not in given and "OTEL_EXPORTER_OTLP_LOGS_HEADERS" not in given
    assert "secret-" not in done.stdout + done.stderr


def test_an_endpoint_already_set_is_left_alone(tmp_path: Path) -> None:
    mine = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"}
    done = _collect(tmp_path / "runs", sys.executable, str(APP), "env", env=mine)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == mine
    assert "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is already set" in done.stderr


@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_is_passed_to_the_command_and_its_last_spans_written(tmp_path: Path, sent: int) -> None:
    # Sent to collect alone (a supervisor's kill, not a terminal's Ctrl-C, which reaches the whole
    # process group): its own session, so no terminal is involved.
    folder = tmp_path / "runs"
    command = [sys.executable, "-m", "evaltrace.cli", "collect", "--dir", str(folder)]
    command += ["--http", "127.0.0.1:0", "--grpc", "off", "--", sys.executable, str(APP), "wait-term", "5"]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(), start_new_session=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
        process.send_signal(sent)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 5, err
    assert _names(folder) == ["terminated after 1 signal(s)"]


def test_ctrl_c_on_a_terminal_reaches_the_command_once(tmp_path: Path) -> None:
    # Ctrl-C on a terminal interrupts its whole foreground process group, collect and the command
    # alike: collect must not pass it on a second time (that would interrupt the command's own
    # shutdown, before its exporter flushed). collect runs as the session leader of a new pty.
    folder = tmp_path / "runs"
    leader, follower = pty.openpty()
    command = [sys.executable, "-m", "evaltrace.cli", "collect", "--dir", str(folder)]
    command += ["--http", "127.0.0.1:0", "--grpc", "off", "--", sys.executable, str(APP), "wait-term", "5"]

    def take_the_terminal() -> None:  # runs after setsid (start_new_session), before exec
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    process = subprocess.Popen(
        command,
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
        start_new_session=True,
        preexec_fn=take_the_terminal,
    )
    os.close(follower)
    try:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
        os.write(leader, b"\x03")  # Ctrl-C
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
        os.close(leader)
    assert process.returncode == 5, err
    assert _names(folder) == ["terminated after 1 signal(s)"]


def test_a_command_ended_by_a_signal_exits_128_plus_n(tmp_path: Path) -> None:
    done = _collect(tmp_path / "runs", sys.executable, str(APP), "kill-self")
    assert done.returncode == 128 + signal.SIGKILL, done.stderr


def test_a_receiver_that_could_not_write_exits_2_saying_why(tmp_path: Path) -> None:
    # The command replaces the run folder with a file, then sends: its spans cannot be written.
    app = f"{shlex.quote(sys.executable)} {shlex.quote(str(APP))} send 10 3"
    done = _collect(tmp_path / "runs", "sh", "-c", f"rm -rf {tmp_path / 'runs'} && touch {tmp_path / 'runs'} && {app}")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == "Error: 10 received items could not be written"
    assert "Traceback" not in done.stderr


def test_a_command_that_does_not_exist_is_one_error_line(tmp_path: Path) -> None:
    done = _collect(tmp_path / "runs", "no-such-command-h8", "--flag")
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["Error: cannot run no-such-command-h8: No such file or directory"]


def test_a_protocol_with_no_listener_is_one_error_line(tmp_path: Path) -> None:
    done = _collect(
        tmp_path / "runs",
        sys.executable,
        str(APP),
        "env",
        listen=("--http", "127.0.0.1:0", "--grpc", "off"),
        env={"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "Error: $OTEL_EXPORTER_OTLP_PROTOCOL is grpc, but that listener is off (--http / --grpc)"
    ]


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")
def test_the_readmes_ci_recipe_records_a_node_app(tmp_path: Path) -> None:
    # The docs' line (CI gating), as written, in a folder holding app.js: a Node.js app exporting OTLP/JSON.
    from readme_blocks import docs_text

    line = next(line for line in docs_text().splitlines() if "- run: evaltrace collect" in line)
    words = shlex.split(line.split("run:", 1)[1])
    assert words[:2] == ["evaltrace", "collect"] and words[-3:] == ["--", "node", "app.js"]
    shutil.copy(NODE_APP, tmp_path / "app.js")
    command = [sys.executable, "-m", "evaltrace.cli", *words[1:]]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=clean_env())
    assert done.returncode == 0, done.stderr
    assert sorted(_names(tmp_path / "runs")) == sorted(f"node span {n}" for n in range(25))
