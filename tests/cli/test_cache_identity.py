"""The caches cannot be fooled by a replaced file, and the cache folder is private (real `evaltrace score` runs).

A run file replaced by another of the same size, mtime and inode (what tar extracting over it,
`cp -p` or `rsync -t` leave) must be scored as what it holds now, from the traces cache and from
the OTLP import cache alike. The cache folder is created 0700; an existing one others may write
is not used (a forged table in it is not read), one others may only read is made private.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from cli_process import evaltrace
from genai_spans import Recorder, agent_attrs, chat, messages, text
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

QUESTION = "What's the weather in Paris?"
PASSING, FAILING = "It is 18C in Paris.", "It is 21C in Paris."
SPEC = f"""\
cases:
  - id: paris
    input: "{QUESTION}"
    expect:
      output: {{contains: ["18"]}}
"""


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    """The umask most users have (022): what made the old cache folder readable by everyone."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def _run_file(folder: Path, answer: str) -> Path:
    """One agent run answering `answer`, written by evaltrace's exporter (fixed ids and times: same size)."""
    rec = Recorder(folder)
    with rec.span("invoke_agent weather", agent_attrs("weather")):
        asked, said = messages(("user", [text(QUESTION)])), messages(("assistant", [text(answer)]))
        chat(rec, "gpt-test", asked, said, (10, 5))
    rec.close()
    (path,) = folder.glob("*.parquet")
    return path


def _otlp_file(path: Path, answer: str) -> Path:
    """The same run as OTLP JSON lines, written by the official OTLP JSON file exporter."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent weather", attributes=agent_attrs("weather")):
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-test",
            "gen_ai.input.messages": messages(("user", [text(QUESTION)])),
            "gen_ai.output.messages": messages(("assistant", [text(answer)])),
        }
        with tracer.start_as_current_span("chat gpt-test", attributes=attributes):
            pass
    provider.shutdown()
    return path


def _replace_in_place(target: Path, content: bytes) -> None:
    """Write `content` over `target` keeping its inode, size and mtime (as `cp -p` or tar would)."""
    before = target.stat()
    assert len(content) == before.st_size
    with target.open("r+b") as out:
        out.write(content)
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = target.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)


def _score(path: Path, tmp_path: Path, cache: Path) -> tuple[int, str]:
    spec = tmp_path / "evals.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    done = evaltrace("score", path, "--spec", spec, "--no-store", env={"EVALTRACE_CACHE_DIR": str(cache)})
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stderr


def test_a_run_file_replaced_with_the_same_size_mtime_and_inode_is_scored_anew(tmp_path: Path) -> None:
    passing = _run_file(tmp_path / "passing", PASSING)
    failing = _run_file(tmp_path / "failing", FAILING)
    runs = tmp_path / "runs"
    runs.mkdir()
    target = runs / "run.parquet"
    shutil.copyfile(passing, target)
    cache = tmp_path / "cache"
    assert _score(runs, tmp_path, cache)[0] == 0
    assert list((cache / "traces").glob("*.parquet")), "the first scoring wrote the traces cache"
    _replace_in_place(target, failing.read_bytes())
    assert _score(runs, tmp_path, cache)[0] == 1  # the failing run, not the cached passing one


def test_an_otlp_file_replaced_with_the_same_size_mtime_and_inode_is_imported_anew(tmp_path: Path) -> None:
    target = _otlp_file(tmp_path / "traces.jsonl", PASSING)
    cache = tmp_path / "cache"
    assert _score(target, tmp_path, cache)[0] == 0
    assert list((cache / "imports").iterdir()), "the first scoring imported the file into the cache"
    content = target.read_bytes()
    assert content.count(PASSING.encode()) == 1
    _replace_in_place(target, content.replace(PASSING.encode(), FAILING.encode()))
    # A stale import would hand back the old run files, and the traces cache their old traces.
    assert _score(target, tmp_path, cache)[0] == 1
    assert len(list((cache / "imports").iterdir())) == 2, "imported again, under a new key"


def test_the_cache_folder_is_created_private(tmp_path: Path) -> None:
    runs = _run_file(tmp_path / "runs", PASSING).parent
    cache = tmp_path / "new" / "cache"
    code, stderr = _score(runs, tmp_path, cache)
    assert code == 0
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert "cache folder" not in stderr  # a folder evaltrace made itself is not warned about


def test_a_cache_folder_others_can_write_is_not_read(tmp_path: Path) -> None:
    """A table forged for the failing file's key, in a folder anyone may write: not read, the run fails."""
    passing = _run_file(tmp_path / "passing", PASSING).parent
    failing = _run_file(tmp_path / "failing", FAILING).parent
    cache = tmp_path / "cache"
    assert _score(passing, tmp_path, cache)[0] == 0
    assert _score(failing, tmp_path, cache)[0] == 1
    tables = {_answer(path): path for path in (cache / "traces").glob("*.parquet")}
    good, bad = tables[PASSING], tables[FAILING]
    _forge(good, bad)  # the failing file's table now holds the passing trace, under the right key
    assert _score(failing, tmp_path, cache)[0] == 0, "the forgery works on a private folder (trusted by design)"
    cache.chmod(0o777)
    code, stderr = _score(failing, tmp_path, cache)
    assert code == 1
    assert f"cache folder {cache} is not private" in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr


def _answer(table: Path) -> str:
    (output,) = pq.read_table(table, columns=["output"]).column("output").to_pylist()
    return str(output)


def _forge(source: Path, target: Path) -> None:
    """Rewrite `target` as `source`'s rows with `target`'s schema metadata (its key)."""
    metadata = pq.read_schema(target).metadata
    rows = pq.read_table(source)
    pq.write_table(rows.replace_schema_metadata(metadata), target)


def test_a_cache_folder_others_can_read_is_made_private(tmp_path: Path) -> None:
    runs = _run_file(tmp_path / "runs", PASSING).parent
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    cache.chmod(0o755)
    code, stderr = _score(runs, tmp_path, cache)
    assert code == 0
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert f"cache folder {cache} was readable by others" in stderr
    assert list((cache / "traces").glob("*.parquet")), "then used"
    assert "cache folder" not in _score(runs, tmp_path, cache)[1]  # once: it is private now
