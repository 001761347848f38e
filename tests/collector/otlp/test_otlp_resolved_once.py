"""A scoring resolves its PATHs once: an OTLP file is sniffed once and imported once, whoever reads the run.

`evaltrace score` runs as a real subprocess on an OTLP JSON file, with the progress bar's trace
count on (it reads the run's trace ids before scoring) and an HTML report (its trace trees read
the run again after scoring). A Python audit hook in the child counts every `open` of the OTLP
file: each resolution of a PATH opens it to tell its format, and the import reads it once more.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from _otlp_file_fixtures import record_rich

_SCORE_COUNTING_OPENS = """
import os, sys
name = os.path.basename(sys.argv[1])
opens = []

def hook(event, args):
    # `open` is raised by open(), io.open() and os.open(): every Python-level read of the file.
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        if os.fsdecode(args[0]).endswith(os.sep + name):
            opens.append(event)

sys.addaudithook(hook)
from evaltrace.cli import _progress
_progress.stderr_is_terminal = lambda: True  # the bar, and so its count of the run's traces, as on a terminal
from evaltrace.cli.main import main
code = main(sys.argv[2:])
sys.stdout.write("\\nOPENS %d EXIT %s\\n" % (len(opens), code))
"""


def test_a_scoring_reads_an_otlp_path_once_for_the_count_the_engine_and_the_html_report(tmp_path: Path) -> None:
    (tmp_path / "recorded").mkdir()
    writers = record_rich(tmp_path / "recorded")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    report = tmp_path / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _SCORE_COUNTING_OPENS,
            str(writers.traces_json),
            "score",
            str(writers.traces_json),
            "--json",
            str(report),
            "--html",
            str(tmp_path / "report.html"),
            "--no-store",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "EVALTRACE_CACHE_DIR": str(cache)},
    )
    assert done.returncode in (0, 1), done.stderr  # 1: the gate; either way the run was scored
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("OPENS ")]
    opens = int(line.split()[1])
    # One sniff when the PATH is resolved, one read by the import. Before the PATHs were resolved
    # once per scoring, the count, the engine and the HTML report each resolved them again (4 opens).
    assert opens == 2, done.stderr
    assert len([p for p in (cache / "imports").iterdir() if not p.name.startswith(".")]) == 1
    entries = json.loads(report.read_text(encoding="utf-8"))["entries"]
    assert entries and "trace-" in (tmp_path / "report.html").read_text(encoding="utf-8")
