"""Shared fixtures: the scripted OpenAI-compatible server and a span recorder writing real Parquet files."""

from __future__ import annotations

import compileall
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_llm import FakeLLM
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from evaltrace.collector import resolve_paths
from evaltrace.collector.recorder.exporter import ParquetSpanExporter
from evaltrace.collector.traces.rebuild import read_traces
from evaltrace.collector.traces.records import Trace

REPO = Path(__file__).resolve().parents[1]
RAY_TESTS = "tests/evaluators/engine/ray/"


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """The pytest-xdist workers (`-n 2` in pyproject.toml) take whole test files, so a module's fixtures
    (a server, a venv's app) start once and its tests run in order; all of tests/evaluators/engine/ray
    is one unit, as two Ray clusters at once would share 127.0.0.2 and Ray's default ports, and double the memory.
    (xdist's own `--dist loadgroup` does not group under pytest 9: it renames the node ids pytest 9
    no longer reads.)"""
    from xdist.scheduler import LoadFileScheduling

    class _FilesAndRay(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return RAY_TESTS if path.startswith(RAY_TESTS) else path

    return _FilesAndRay(config, log)  # type: ignore[arg-type]


@pytest.fixture(autouse=True, scope="session")
def compiled_sources() -> None:
    """Bytecode of this repository's packages, written once before the tests start their hundreds of
    `evaltrace` processes. Where PYTHONDONTWRITEBYTECODE is set (this machine sets it) each of them
    would compile the modules it imports again: 0.25 s of CPU for a `score` of the samples."""
    for package in ("collector", "evaluators", "cli"):
        compileall.compile_dir(REPO / package, quiet=1)


@pytest.fixture(autouse=True, scope="session")
def score_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The score store of every scoring the tests run, in process or in a subprocess (it inherits the
    environment): never `.evaltrace/store` in the folder a test runs in. Tests of the store pass their own."""
    store = tmp_path_factory.mktemp("score-store")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVALTRACE_STORE", str(store))
        yield store


@pytest.fixture(autouse=True, scope="session")
def traces_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The traces cache of every scoring the tests run, in process or in a subprocess (it inherits the
    environment): never the user's ~/.cache/evaltrace. Tests of the cache pass their own."""
    folder = tmp_path_factory.mktemp("traces-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVALTRACE_CACHE_DIR", str(folder))
        yield folder


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A started, empty `FakeLLM`; give it turns with `fake_llm.script([...])`."""
    with FakeLLM() as server:
        yield server


class SpanRecorder:
    """A local TracerProvider whose spans go through `ParquetSpanExporter` into `directory`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.provider = TracerProvider()
        self.exporter = ParquetSpanExporter(directory, run_id="test")
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def flush(self) -> None:
        """Write the buffered spans to a new Parquet file."""
        # SimpleSpanProcessor.force_flush does not reach its exporter: ask the exporter itself.
        self.exporter.force_flush()

    def traces(self) -> list[Trace]:
        """Flush, shut down, and rebuild every trace from the files written."""
        self.provider.force_flush()
        self.provider.shutdown()
        return list(read_traces(resolve_paths([self.directory])))


@pytest.fixture
def span_recorder(tmp_path: Path) -> SpanRecorder:
    """A `SpanRecorder` writing into a fresh folder."""
    return SpanRecorder(tmp_path / "runs")


@pytest.fixture
def isolated_registry() -> Iterator[None]:
    """Scorers registered during the test (a plugin, a sample scorer) are removed afterwards."""
    from evaltrace.evaluators.scoring.scorers import registry
    from evaltrace.evaluators.scoring.scorers.plugins import FILE_MODULE_PREFIX

    saved = set(registry.scorer_names())  # the built-ins and installed plugins (loaded now), so they stay
    modules = set(sys.modules)
    try:
        yield
    finally:
        for name in set(registry.scorer_names()) - saved:
            registry.SCORERS.remove(name)
        # Plugin files imported by the test go too, so a later test loading them registers again.
        for name in set(sys.modules) - modules:
            if name.startswith(FILE_MODULE_PREFIX):
                del sys.modules[name]
