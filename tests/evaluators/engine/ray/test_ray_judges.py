"""Judge scorers on `--engine ray`: a pool of judge actors on a real cluster, compared with the local engine.

The cluster (a head and a worker node, separate processes on 127.0.0.x) and the CLI run from
the cached Ray venv; the judge is the scripted OpenAI-compatible server of the judge tests on
127.0.0.1, answering by the question's content (so the verdicts do not depend on the order the
questions arrive in), and garbage for one trace. The API key is in the nodes' environment only:
the Ray runs' driver has none, and the judge still receives it from the actors.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest
from _ray_cluster import Cluster, Node, ray_python
from genai_spans import Recorder, agent_turn

T = TypeVar("T")
KILL_ATTEMPTS = 3
REPO = Path(__file__).resolve().parents[4]
KEY = "sk-ray-judge-5f1c9a7e3b2d4c68"
ACTORS = "EVALTRACE_RAY_JUDGE_ACTORS"
CITIES = ["Paris", "Rome", "Oslo", "Lima", "Kyiv", "Doha", "Bern", "Riga"]


def _judge_server_module() -> Any:
    found = importlib.util.spec_from_file_location(
        "judge_server", REPO / "tests" / "evaluators" / "scoring" / "judge_server.py"
    )
    assert found is not None and found.loader is not None
    module = importlib.util.module_from_spec(found)
    sys.modules.setdefault("judge_server", module)  # its dataclasses look their module up by name
    found.loader.exec_module(sys.modules["judge_server"])
    return sys.modules["judge_server"]


judge_server = _judge_server_module()


def _answer(body: dict[str, Any]) -> Any:
    """The judge's reply by content: garbage for the garbled answer, else a verdict on the weather given."""
    user = str(body["messages"][1]["content"])
    if "garbled" in user:
        return judge_server.Reply(raw=b"<html>not a completion</html>")
    if "It is 18C" in user:  # the final answer, not the tool result (also in the prompt)
        return judge_server.verdict(True, "the answer gives the weather asked for")
    return judge_server.verdict(False, "the answer does not give the weather")


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with judge_server.JudgeServer(responder=_answer) as running:
        yield running


@pytest.fixture(scope="module")
def cluster(server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    setup = Cluster(ray_python(), tmp_path_factory.mktemp("ray-cache"))
    setup.env.update(
        EVALTRACE_JUDGE_API_KEY=KEY,
        EVALTRACE_JUDGE_MODEL="judge-model",
        EVALTRACE_JUDGE_BASE_URL=server.base_url,
        EVALTRACE_JUDGE_MAX_RETRIES="1",
        **{ACTORS: "2"},
    )
    with setup as running:
        running.add_node("127.0.0.3")
        yield running


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """8 one-trace city cases (every third answer wrong), 3 identical repeats, a garbled answer, 2 conversations."""
    root = tmp_path_factory.mktemp("judged")
    rec = Recorder(root / "runs")
    cases: list[dict[str, Any]] = []
    for index, city in enumerate(CITIES):
        answer = "No idea." if index % 3 == 0 else f"It is 18C in {city}."
        agent_turn(rec, f"Weather in {city}?", answer, city)
        cases.append({"id": f"city-{city}", "input": f"Weather in {city}?"})
    for _ in range(3):  # the same question thrice: asked once, the repeats served by its actor
        agent_turn(rec, "Weather in Nice?", "It is 18C in Nice.", "Nice")
    rec.provider.force_flush()
    agent_turn(rec, "Weather in Cork?", "garbled", "Cork")
    for index in range(2):
        agent_turn(rec, "Hi there", "hello!", None, conversation=f"conv-{index}")
        agent_turn(rec, "And Paris?", "It is 18C." if index else "cold", "Paris", conversation=f"conv-{index}")
    rec.close()
    cases += [
        {"id": "again", "input": "Weather in Nice?", "repeat": "mean"},
        {"id": "odd", "input": "Weather in Cork?"},
        {"id": "chat", "turns": [{"input": "Hi there"}, {"input": "And Paris?"}]},
    ]
    spec = {"confidence": 0.5, "scorers": ["tool_errors", "task_completion"], "cases": cases}
    (root / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    return root / "runs", root / "spec.json"


def _score(cluster: Cluster, out: Path, runs: Path, spec: Path, *extra: str, ray: bool) -> Any:
    """`evaltrace score` in a subprocess; the Ray runs' driver has no key in its environment."""
    args = ["score", str(runs), "--spec", str(spec), "--json", str(out), "--no-store", *extra]
    env = dict(cluster.env)
    if ray:
        args += cluster.engine_args()
        del env["EVALTRACE_JUDGE_API_KEY"]
    cmd = [str(cluster.python), "-m", "evaltrace.cli", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=cluster.temp)


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    """The report without its timestamp, unmatched traces sorted, and judge details without `cached`.

    Of identical questions asked at once (the repeats of one case, equal turns of conversations),
    one is sent and the others share its answer: which sample is which depends on the order the
    tasks and the driver reach the pool, as it does on the local engine's task order. The sum per
    entry is compared instead (`_served_per_entry`), and the counters are compared whole.
    """
    kept = {key: value for key, value in report.items() if key not in {"created_at", "unmatched", "entries"}}
    kept["unmatched"] = sorted(item["trace_id"] for item in report["unmatched"])
    kept["entries"] = json.loads(json.dumps(report["entries"]))
    for entry in kept["entries"]:
        for sample in entry["samples"]:
            for score in sample["scores"]:
                ((score.get("details") or {}).get("judge") or {}).pop("cached", None)
    kept["served"] = _served_per_entry(report)
    return kept


def _served_per_entry(report: dict[str, Any]) -> list[tuple[str, int]]:
    return [
        (
            entry["case_id"],
            sum(((s.get("details") or {}).get("judge") or {}).get("cached", 0) for s in _entry_scores(entry)),
        )
        for entry in report["entries"]
    ]


def _entry_scores(entry: dict[str, Any]) -> list[dict[str, Any]]:
    return [score for sample in entry["samples"] for score in sample["scores"]]


def _both(cluster: Cluster, server: Any, tmp_path: Path, run: tuple[Path, Path], name: str, *extra: str) -> Any:
    """The local and the Ray report of one run (each with its own verdict cache); the Ray run's requests."""
    reports = []
    for engine in ("local", "ray"):
        out = tmp_path / f"{name}-{engine}.json"
        cache = ["--judge-cache-dir", str(tmp_path / f"verdicts-{engine}")]
        before = len(server.requests)
        done = _score(cluster, out, *run, *cache, *extra, ray=engine == "ray")
        assert done.returncode in (0, 1), done.stderr
        assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr
        reports.append((done.returncode, json.loads(out.read_text(encoding="utf-8")), server.requests[before:]))
    (local_code, local, _), (ray_code, ray, asked) = reports
    assert ray_code == local_code
    return local, ray, asked


def _scores(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [score for entry in report["entries"] for score in _entry_scores(entry)]


def test_judged_run_scores_the_same_on_ray_then_from_the_verdict_cache(
    cluster: Cluster, server: Any, judged_run: tuple[Path, Path], tmp_path: Path
) -> None:
    local, ray, asked = _both(cluster, server, tmp_path, judged_run, "cold")
    assert _comparable(ray) == _comparable(local)
    judge = ray["judge"]
    assert judge == local["judge"]
    assert judge["requests"] == len(asked) == 14  # 8 cities, Nice once, Cork and its retry, 3 distinct turns
    assert (judge["cache_misses"], judge["cache_hits"], judge["retries"], judge["errors"]) == (13, 3, 1, 1)
    assert {request.headers.get("authorization") for request in asked} == {f"Bearer {KEY}"}
    verdicts = Counter(
        (s["scorer"], s["passed"], s["reason"]) for s in _scores(ray) if s["scorer"] == "task_completion"
    )
    assert verdicts[("task_completion", True, "the answer gives the weather asked for")] == 9
    garbled = [s for s in _scores(ray) if s["scorer"] == "task_completion" and s.get("error")]
    assert len(garbled) == 1 and garbled[0]["reason"].startswith("judge error: unparseable judge response body")

    # Again, all but the garbled case (a failure is never cached, so it would be asked anew).
    cached = ("--case", "city-*", "--case", "again", "--case", "chat")
    warm_local, warm_ray, asked = _both(cluster, server, tmp_path, judged_run, "warm", *cached)
    assert asked == []  # no request reached the judge: every verdict came from the cache folder
    assert _comparable(warm_ray) == _comparable(warm_local)
    assert (warm_ray["judge"]["requests"], warm_ray["judge"]["cache_hits"]) == (0, 15)
    _assert_key_stays_out_of(cluster)


def test_a_budget_smaller_than_the_questions_is_spent_once_across_the_cluster(
    cluster: Cluster, server: Any, judged_run: tuple[Path, Path], tmp_path: Path
) -> None:
    # One question per city (distinct questions): 5 asked, 3 allowed for the whole run. Only cities
    # whose answer is right, so the outcome does not depend on which 3 questions the order picks.
    right = [f"city-{city}" for index, city in enumerate(CITIES) if index % 3]
    cases = [arg for case in right for arg in ("--case", case)]
    local, ray, asked = _both(cluster, server, tmp_path, judged_run, "budget", *cases, "--judge-max-requests", "3")
    assert len(right) == 5 and len(asked) == 3
    assert ray["judge"] == local["judge"]
    assert ray["judge"]["budget_exhausted"] and ray["judge"]["errors"] == 2
    counts = [
        Counter((s["scorer"], s["passed"], s["reason"], s.get("error")) for s in _scores(r)) for r in (local, ray)
    ]
    assert counts[1] == counts[0]
    assert counts[1][("task_completion", True, "the answer gives the weather asked for", None)] == 3
    exhausted = [s for s in _scores(ray) if s.get("error") == "JudgeBudgetError"]
    assert len(exhausted) == 2 and all(
        "judge request budget exhausted: all 3 requests" in s["reason"] for s in exhausted
    )
    for key in ("counts", "scorer_counts", "passed", "pass_rate"):
        assert ray[key] == local[key]


def _assert_key_stays_out_of(cluster: Cluster) -> None:
    """No file of the Ray session folders (logs, spilled objects, ...) nor any node's object store holds the key."""
    sessions = list(cluster.temp.glob("session_*"))
    files = [path for session in sessions for path in session.rglob("*") if path.is_file() and not path.is_socket()]
    assert len(files) > 10
    assert [str(path) for path in files if KEY.encode() in _read(path)] == []
    stores = _object_stores(cluster)
    assert len(stores) >= 2  # the head's and the worker node's
    assert all(b"Weather in Cork?" in store for store in stores[:1])  # the run's spans passed through it
    assert not any(KEY.encode() in store for store in stores)


def _object_stores(cluster: Cluster) -> list[bytes]:
    """Each node's shared-memory object store, read whole through its raylet's mapping (the file is unlinked)."""
    stores: dict[str, bytes] = {}
    for node in cluster.nodes:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or _group(entry) != node.process.pid:
                continue
            for line in _read(entry / "maps").decode(errors="replace").splitlines():
                fields = line.split()
                if len(fields) >= 6 and fields[5].startswith("/dev/shm/plasma") and fields[4] not in stores:
                    stores[fields[4]] = _read(entry / "map_files" / fields[0])
    return list(stores.values())


def _group(process: Path) -> int | None:
    try:
        return int(_read(process / "stat").rsplit(b")", 1)[1].split()[2])
    except (IndexError, ValueError):
        return None


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def test_a_key_the_actors_lack_stops_the_run_with_one_line(
    cluster: Cluster, server: Any, judged_run: tuple[Path, Path], tmp_path: Path
) -> None:
    # The job's runtime_env blanks the key on the actors (as `ray job submit --runtime-env-json` would);
    # this driver has one: it is not sent along, the run stops before any question.
    runs, spec = judged_run
    env = dict(cluster.env)
    env["RAY_JOB_CONFIG_JSON_ENV_VAR"] = json.dumps({"runtime_env": {"env_vars": {"EVALTRACE_JUDGE_API_KEY": " "}}})
    out = tmp_path / "r.json"
    args = ["score", str(runs), "--spec", str(spec), "--json", str(out), "--no-store", *cluster.engine_args()]
    before = len(server.requests)
    done = subprocess.run(
        [str(cluster.python), "-m", "evaltrace.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cluster.temp,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("Error: judge setup: the judge API key is set here but not on the Ray cluster")
    assert len(done.stderr.strip().splitlines()) == 1 and KEY not in done.stderr
    assert len(server.requests) == before and not out.exists()


def test_a_refused_key_stops_the_run_as_locally_and_a_key_option_is_not_shipped(
    cluster: Cluster, server: Any, judged_run: tuple[Path, Path], tmp_path: Path
) -> None:
    runs, spec = judged_run
    server.responder = lambda body: judge_server.Reply(status=401, raw=b'{"error": {"message": "invalid key"}}')
    try:
        done = [
            _score(cluster, tmp_path / f"{engine}.json", runs, spec, "--no-judge-cache", ray=engine == "ray")
            for engine in ("local", "ray")
        ]
    finally:
        server.responder = _answer
    assert [run.returncode for run in done] == [2, 2], done[1].stderr
    assert done[1].stderr == done[0].stderr
    assert done[0].stderr.startswith("Error: judge setup: judge at http://127.0.0.1:") and "HTTP 401" in done[0].stderr
    flag = _score(cluster, tmp_path / "flag.json", runs, spec, "--judge-api-key", "sk-flag-0123456789", ray=True)
    assert flag.returncode == 2
    assert flag.stderr.startswith("Error: judge setup: --judge-api-key is not used by --engine ray: the judge actors")
    assert "sk-flag-0123456789" not in flag.stderr
    cluster.env[ACTORS] = "none"
    try:
        wrong = _score(cluster, tmp_path / "wrong.json", runs, spec, ray=True)
    finally:
        cluster.env[ACTORS] = "2"
    assert wrong.returncode == 2
    assert wrong.stderr.strip() == f"Error: {ACTORS}='none': give the number of judge actors, at least 1"


ASYNC_PLUGIN = """\
import asyncio
from typing import Any, ClassVar

from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.registry import register


@register
class Lookup(Scorer):
    name: ClassVar[str] = "t_ray_async_lookup"

    def score(self, trace: Any, case: Any = None) -> Score:
        return asyncio.run(self.ascore(trace, case))

    async def ascore(self, trace: Any, case: Any = None) -> Score:
        await asyncio.sleep(0.01)  # a custom scorer doing its own I/O
        return self.result("18C" in (trace.final_answer() or ""), None, "looked up")
"""


def test_an_async_plugin_scorer_without_a_judge_scores_the_same(
    cluster: Cluster, server: Any, judged_run: tuple[Path, Path], tmp_path: Path
) -> None:
    runs, _ = judged_run
    plugin = tmp_path / "async_scorers.py"
    plugin.write_text(ASYNC_PLUGIN, encoding="utf-8")
    spec = tmp_path / "spec.json"
    cases = json.loads(judged_run[1].read_text(encoding="utf-8"))["cases"]
    spec.write_text(json.dumps({"scorers": ["t_ray_async_lookup"], "cases": cases}), encoding="utf-8")
    before = len(server.requests)
    local, ray, _ = _both(cluster, server, tmp_path, (runs, spec), "async", "--plugin", str(plugin))
    assert _comparable(ray) == _comparable(local)
    assert ray["judge"] is None and len(server.requests) == before
    looked = [s for s in _scores(ray) if s["scorer"] == "t_ray_async_lookup"]
    assert len(looked) == 16 and sum(bool(s["passed"]) for s in looked) == 9


def test_killing_a_worker_node_while_it_judges_gives_the_same_verdicts(
    cluster: Cluster, server: Any, judged_run: tuple[Path, Path], tmp_path: Path
) -> None:
    runs, spec = judged_run
    cached = ("--case", "city-*", "--case", "again", "--case", "chat")  # not the garbled one: failures are re-asked
    verdicts = ("--judge-cache-dir", str(tmp_path / "verdicts-local"))
    local = _score(cluster, tmp_path / "local.json", runs, spec, *cached, *verdicts, ray=False)
    doomed = cluster.add_node("127.0.0.4")
    server.responder = lambda body: _slowly(_answer(body))  # the groups wait on the judge: one is caught judging
    try:  # Ray may place every task on the other node: then scored again (fresh caches) until a kill lands
        for attempt in range(KILL_ATTEMPTS):
            ray_json = tmp_path / f"ray-{attempt}.json"
            args = ["score", str(runs), "--spec", str(spec), "--json", str(ray_json), "--no-store", *cached]
            args += ["--judge-cache-dir", str(tmp_path / f"verdicts-ray-{attempt}")]
            scoring = _start_without_key(cluster, [*args, *cluster.engine_args()])
            killed, err = _while_running(scoring, partial(_kill_when_judging, doomed, scoring))
            if killed:
                break
        else:
            pytest.fail(f"no task of {KILL_ATTEMPTS} scorings ran on the doomed node while they ran")
    finally:
        server.responder = _answer
    assert scoring.returncode == local.returncode, err
    reports = [json.loads(path.read_text(encoding="utf-8")) for path in (tmp_path / "local.json", ray_json)]
    # A re-run group asks its questions again: answered from the cache, they count as hits there.
    for report in reports:
        report.pop("judge")
    first, second = (_comparable(report) for report in reports)
    first.pop("served"), second.pop("served")
    assert second == first


def _start_without_key(cluster: Cluster, args: list[str]) -> subprocess.Popen[str]:
    """`evaltrace ARGS` started in the background, without the key in its environment (the actors have theirs)."""
    env = {key: value for key, value in cluster.env.items() if key != "EVALTRACE_JUDGE_API_KEY"}
    cmd = [str(cluster.python), "-m", "evaltrace.cli", *args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cluster.temp)


def _while_running(scoring: subprocess.Popen[str], act: Callable[[], T]) -> tuple[T, str]:
    """`act()` while `scoring` runs, then the scoring's stderr once it ends (killed first if `act` failed)."""
    try:
        done = act()
    except BaseException:
        scoring.kill()
        scoring.communicate()
        raise
    _, err = scoring.communicate(timeout=600)
    return done, err


def _slowly(reply: Any) -> Any:
    reply.delay = 0.4
    return reply


def _kill_when_judging(node: Node, scoring: subprocess.Popen[str]) -> bool:
    """Kill every process of `node` once it runs a task of the scoring, while the judges' answers are slow;
    `False`: the scoring ended first.

    Ray may place every group on the other node and only shuffle tasks here: those count too (their
    blocks die with the node and their groups, judging, wait for them to be re-run)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if scoring.poll() is not None:
            return False
        if node.running_a_scoring_task():
            node.kill()
            return True
        time.sleep(0.05)
    pytest.fail("no group ran on the doomed node within 300 s")


def test_a_judge_actor_killed_while_it_asks_is_restarted_and_the_run_scores_the_same(
    cluster: Cluster, server: Any, judged_run: tuple[Path, Path], tmp_path: Path
) -> None:
    # As the OOM killer would: SIGKILL the process of the judge actor that is waiting on the judge's
    # (slow) answer. Ray restarts it and sends it the questions it had in flight again.
    runs, spec = judged_run
    local = _score(
        cluster, tmp_path / "local.json", runs, spec, "--judge-cache-dir", str(tmp_path / "v-local"), ray=False
    )
    server.responder = lambda body: _slowly(_answer(body))
    before = len(server.requests)
    try:
        args = ["score", str(runs), "--spec", str(spec), "--json", str(tmp_path / "ray.json"), "--no-store"]
        args += ["--judge-cache-dir", str(tmp_path / "v-ray"), *cluster.engine_args()]
        scoring = _start_without_key(cluster, args)

        def kill_and_watch() -> bool:
            killed = _kill_an_asking_judge(cluster, server, before, scoring)
            return _wait_for_judge_other_than(cluster, killed, scoring)

        restarted, err = _while_running(scoring, kill_and_watch)
    finally:
        server.responder = _answer
    assert restarted, "no judge actor process replaced the killed one"
    assert scoring.returncode == local.returncode, err
    assert "Traceback" not in err and "Error" not in err, err
    reports = [json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8")) for name in ("local", "ray")]
    judges = [report.pop("judge") for report in reports]
    first, second = (_comparable(report) for report in reports)
    first.pop("served"), second.pop("served")
    assert second == first  # the verdicts, reasons, error results and summaries of the local run
    # The counters of the killed actor were kept by the ledger: every request sent is counted,
    # the killed one's included (its questions in flight were sent twice).
    assert judges[1]["requests"] == len(server.requests) - before > judges[0]["requests"]
    assert judges[1]["errors"] == judges[0]["errors"] == 1  # the garbled answer, once
    assert judges[1]["cache_misses"] > judges[0]["cache_misses"]


def _kill_an_asking_judge(cluster: Cluster, server: Any, before: int, scoring: subprocess.Popen[str]) -> int:
    """SIGKILL the judge actor process connected to the judge once the judge has a question (slow to answer)."""
    port = int(server.base_url.split(":")[2].split("/")[0])
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert scoring.poll() is None, "the scoring ended before the judge was asked"
        if len(server.requests) > before:
            asking = [pid for pid in _judge_processes(cluster) if _connected_to(pid, port)]
            if asking:
                os.kill(asking[0], signal.SIGKILL)
                return asking[0]
        time.sleep(0.02)
    pytest.fail("no judge actor asked the judge within 300 s")


def _wait_for_judge_other_than(cluster: Cluster, killed: int, scoring: subprocess.Popen[str]) -> bool:
    """Whether a judge actor process other than `killed` (and its surviving peers) appears before the run ends."""
    survivors = set(_judge_processes(cluster)) - {killed}
    while scoring.poll() is None:
        if set(_judge_processes(cluster)) - survivors - {killed}:
            return True
        time.sleep(0.05)
    return False


def _judge_processes(cluster: Cluster) -> list[int]:
    return [pid for node in cluster.nodes for pid in node.processes_titled("ray::JudgeWorker")]


def _connected_to(pid: int, port: int) -> bool:
    """Whether process `pid` holds an established TCP connection to 127.0.0.1:`port`."""
    sockets = set()
    for fd in Path(f"/proc/{pid}/fd").glob("*"):
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            sockets.add(target[8:-1])
    remote = f"0100007F:{port:04X}"
    for line in _read(Path("/proc/net/tcp")).decode().splitlines()[1:]:
        fields = line.split()
        if fields[2] == remote and fields[3] == "01" and fields[9] in sockets:
            return True
    return False


def test_a_dead_budget_ledger_ends_the_requests_with_a_budget_error(
    cluster: Cluster, server: Any, judged_run: tuple[Path, Path], tmp_path: Path
) -> None:
    # The ledger counting --judge-max-requests is never restarted (a fresh budget would exceed the
    # limit): killed once the judge is asked (one question at a time per actor), every question
    # not yet sent becomes a budget error result.
    runs, spec = judged_run
    args = ["score", str(runs), "--spec", str(spec), "--json", str(tmp_path / "ray.json"), "--no-store"]
    args += ["--case", "city-*", "--judge-max-requests", "50", "--judge-cache-dir", str(tmp_path / "v")]
    env = {key: value for key, value in cluster.env.items() if key != "EVALTRACE_JUDGE_API_KEY"}
    env["EVALTRACE_JUDGE_CONCURRENCY"] = "1"
    server.responder = lambda body: _slowly(_answer(body))
    before = len(server.requests)
    try:
        cmd = [str(cluster.python), "-m", "evaltrace.cli", *args, *cluster.engine_args()]
        scoring = subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cluster.temp
        )
        _, err = _while_running(scoring, lambda: _kill_when_asked(cluster, "ray::RunLedger", server, before, scoring))
    finally:
        server.responder = _answer
    assert scoring.returncode == 1 and "Traceback" not in err, err
    report = json.loads((tmp_path / "ray.json").read_text(encoding="utf-8"))
    judged = [s for s in _scores(report) if s["scorer"] == "task_completion"]
    lost = [s for s in judged if s.get("error") == "JudgeBudgetError"]
    assert len(judged) == 8 and 1 <= len(lost) < 8
    assert all("judge request budget lost: the Ray actor counting the 50 requests" in s["reason"] for s in lost)
    assert len(server.requests) - before + len(lost) == 8  # each question was either sent once or not judged
    assert all(not s.get("error") for s in judged if s not in lost)
    assert report["judge"]["budget_exhausted"] and report["judge"]["errors"] == len(lost)


def _kill_when_asked(cluster: Cluster, title: str, server: Any, before: int, scoring: subprocess.Popen[str]) -> None:
    """SIGKILL the actor process titled `title` once the judge got a question of the scoring."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert scoring.poll() is None, "the scoring ended before the judge was asked"
        found = [pid for node in cluster.nodes for pid in node.processes_titled(title)]
        if len(server.requests) > before and found:
            os.kill(found[0], signal.SIGKILL)
            return
        time.sleep(0.02)
    pytest.fail(f"no {title} process while the judge was asked, within 300 s")
