"""Judge scorers on Ray: every task's judge questions answered by one pool of async actors.

A run of `--engine ray` whose scorers include judges starts, before any task, a pool of judge
actors (`JudgeWorker`, named `evaltrace-judge-0`, `-1`, ... in the run's own Ray namespace, so
runs sharing a cluster never meet). Each actor holds one judge session, as a local run does:
the HTTP client with its retries and timeouts, the concurrency bound (the actor's
`max_concurrency` and the client's semaphore are both the judge's `concurrency` setting: that
many requests in flight per actor), the verdict cache in the cache folder (the driver's folder,
made absolute: on a cluster of several machines it must be a shared filesystem), the in-flight
sharing of identical questions, and the counters. The tasks score their traces as locally, under
asyncio, with a `PoolSession` as the current judge session: its `classify` sends the rendered
question to the actor chosen by the question's content, so an identical question always meets
the same actor, which asks it once and serves the repeats from its cache or from the request in
flight: the report's judge counters (requests, cache hits and misses, errors) add up to the
local run's. A judge failure travels back as its class and message and is raised again in the
task, so the error results read exactly as locally.

The request budget (`max_requests`) is counted once for the cluster, by one small actor
(`ray_ledger.RunLedger`) the judge actors take a token from before each request, retries included;
past it the request fails with the local run's budget error. Which questions are judged before
the budget runs out depends on the order requests are sent, on either engine.

A judge actor whose process dies (the OOM killer, a kill) is restarted by Ray, up to
`EVALTRACE_RAY_MAX_RESTARTS` times, and the questions it had in flight are sent again to the restarted
actor: it asks them anew, or finds them in the verdict cache on disk, so the verdicts are those
of a local run. A restart loses the actor's memory: the in-flight sharing (a question in flight
is asked once more), its HTTP client, and its counters, which is why each actor sends its
counters to the ledger as they change; the report sums the live actors' counters with the last
ones of the dead (every request sent counts; the questions in flight at the death count their
cache hit or miss twice). Past the restarts, the actor's questions are error results. The ledger
is never restarted (it would start a fresh budget): when it dies, every later request of a run
with a budget fails with a budget error, and the dead actors' counters are no longer counted.

Keys. An API key goes to the judge from the actors' own environment (`EVALTRACE_JUDGE_API_KEY`,
or `OPENAI_API_KEY` under the local rules, set on the driver's Ray node, where they live, or in the
job's `runtime_env` `env_vars`). The driver never ships its key: not in actor constructor arguments or task
arguments (kept by Ray's control store and object store, and shown in its logs and dashboard),
not in the settings the actors get. When the driver has a key and the actors have none, the run
stops at once with one line saying where to set it; so does `--judge-api-key`, which would
otherwise be silently replaced by the actors' key.

Pool size: `EVALTRACE_RAY_JUDGE_ACTORS`, else one actor per `CPUS_PER_JUDGE_ACTOR` CPUs of the
cluster, at least 1 and at most `MAX_DEFAULT_JUDGE_ACTORS`. The actors take no CPU (they wait
on the network) and live on the driver's Ray node (the node `ray.init` attached it to; with
`ray://`, the head): a worker node that dies takes no judge, no counter and no budget with it. Ray re-runs the
dead node's tasks, and their questions, already answered, come back from the verdict cache or the
request in flight: the verdicts and reasons are those of a local run, and the re-asked questions
count as cache hits.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evaltrace.collector.errors import InputError
from evaltrace.collector.settings import RaySettings
from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.engine._loop import Router, score_stream, score_stream_now
from evaltrace.evaluators.engine.ray_ledger import (
    LEDGER_NAME,
    LedgeredSession,
    RemoteBudget,
    RunLedger,
    dead_incarnations,
    find_ledger,
)
from evaltrace.evaluators.engine.sample import RunStats, is_async_scorer
from evaltrace.evaluators.scoring.judge import verdict as verdicts
from evaltrace.evaluators.scoring.judge.prompts import RenderedPrompt
from evaltrace.evaluators.scoring.judge.session import JudgeOutcome, JudgeSession, JudgeStats, serving
from evaltrace.evaluators.scoring.judge.settings import JudgeSettings, JudgeSetupError

if TYPE_CHECKING:
    from evaltrace.evaluators.engine._routers import SampleSpill
    from evaltrace.evaluators.engine.scoring import ScoreOptions

CPUS_PER_JUDGE_ACTOR = 2
MAX_DEFAULT_JUDGE_ACTORS = 8
_ACTOR_NAME = "evaltrace-judge-{index}"
_ERRORS: dict[str, type[verdicts.JudgeError]] = {
    cls.__name__: cls
    for cls in (
        verdicts.JudgeError,
        verdicts.JudgeConfigError,
        verdicts.JudgeUnavailableError,
        verdicts.JudgeRefusedError,
        verdicts.JudgeReplyError,
        verdicts.JudgeBudgetError,
    )
}
"""The judge failures an actor hands back by name, raised again in the asking task."""
_NOT_SHIPPED = (
    "the judge actors of --engine ray read the key from their own environment (set EVALTRACE_JUDGE_API_KEY "
    "on the driver's Ray node, or in the job's runtime_env env_vars); it is never sent from this process"
)


@dataclass(frozen=True)
class Failure:
    """A judge question that failed in an actor: the error's class name and its (key-free) message."""

    kind: str
    message: str


def shipped_fields(settings: JudgeSettings) -> dict[str, Any]:
    """The settings the actors and tasks get: all but the key, the cache folder absolute."""
    fields = settings.model_dump(exclude={"api_key"})
    fields["cache_dir"] = settings.resolved_cache_dir().resolve()
    return fields


def actor_settings(fields: dict[str, Any]) -> JudgeSettings:
    """The driver's settings with the key of this process's environment, under the local rules.

    Raises:
        InputError: this process's environment holds a malformed judge setting.
    """
    return JudgeSettings.from_env(**fields).model_copy(update=fields)


def route(prompt: RenderedPrompt, actors: int) -> int:
    """The actor that answers `prompt`: the same for the same question, whichever task asks."""
    material = "\0".join((prompt.template, str(prompt.version), prompt.system, prompt.user))
    return int.from_bytes(hashlib.sha256(material.encode()).digest()[:8], "big") % actors


class JudgeWorker:
    """One judge actor: a judge session of its own, its key from its own environment.

    Ray restarts it when its process dies (`RaySettings.max_restarts`): `__init__` runs again, with the
    same arguments, and reads the key from the environment again.
    """

    def __init__(self, fields: dict[str, Any], actors: int) -> None:
        self.fields, self.actors = fields, actors
        ledger = find_ledger()
        self.problem: str | None = None
        try:
            settings = actor_settings(fields)
        except InputError as exc:
            settings, self.problem = JudgeSettings.model_validate(fields), str(exc)
        self.problem = self.problem or settings.missing()
        self.has_key = settings.api_key is not None
        limit = settings.max_requests
        budget = RemoteBudget(ledger, limit) if limit is not None else None
        self.session = LedgeredSession(settings, ledger, budget)

    async def check(self) -> tuple[str | None, bool]:
        """Why this actor cannot judge (`None`: it can), and whether it holds a key."""
        return self.problem, self.has_key

    async def pool(self) -> tuple[int, dict[str, Any]]:
        """The pool's size and its key-free settings, for the tasks that look the pool up."""
        return self.actors, self.fields

    async def classify(self, prompt: RenderedPrompt, samples: int | None) -> JudgeOutcome | Failure:
        """`JudgeSession.classify`, a failure returned as a `Failure`."""
        try:
            return await self.session.classify(prompt, samples)
        except verdicts.JudgeError as exc:
            return Failure(type(exc).__name__, str(exc))

    async def finish(self) -> tuple[str, JudgeStats, str | None]:
        """This incarnation, its counters and its setup error (a refused first contact); closes its client."""
        await self.session.aclose()
        error = self.session.setup_error
        return self.session.incarnation, self.session.final_stats(), str(error) if error is not None else None


class PoolSession(JudgeSession):
    """The current judge session of a task (or of the driver): questions answered by the pool."""

    def __init__(self, settings: JudgeSettings, actors: Sequence[Any | None]) -> None:
        super().__init__(settings)
        self.actors = list(actors)  # by index; `None`: an actor Ray could not restart

    async def classify(self, prompt: RenderedPrompt, samples: int | None = None) -> JudgeOutcome:
        """Ask the question's actor; its failure is raised here as the same judge error."""
        from ray.exceptions import RayActorError

        index = route(prompt, len(self.actors))
        actor = self.actors[index]
        try:
            if actor is None:
                raise RayActorError()
            answer = await actor.classify.remote(prompt, samples)
        except RayActorError:
            raise verdicts.JudgeUnavailableError(_gone(index)) from None
        if isinstance(answer, Failure):
            raise _ERRORS.get(answer.kind, verdicts.JudgeError)(answer.message)
        outcome: JudgeOutcome = answer
        return outcome

    def absorb(self, stats: JudgeStats) -> None:
        """Add an actor's counters to this session's, for the run's `judge` section."""
        self._counters.requests += stats.requests
        self._counters.retries += stats.retries
        self._counters.prompt_tokens += stats.prompt_tokens
        self._counters.completion_tokens += stats.completion_tokens
        self._counters.budget_exhausted |= stats.budget_exhausted
        self._errors += stats.errors
        self._hits += stats.cache_hits
        self._misses += stats.cache_misses


def score_in_task(
    traces: Iterable[Trace], router: Router, stats: RunStats, spill: SampleSpill, options: ScoreOptions
) -> None:
    """A Ray task's scoring: `score_stream_now`, or with async scorers `score_stream`, judges asked of the pool."""
    if not any(is_async_scorer(scorer) for scorer in router.scorers()):
        score_stream_now(traces, router, stats, spill, options)
        return
    with pool_judges(router):
        asyncio.run(score_stream(traces, router, stats, spill, options))


def pool_judges(router: Router) -> AbstractContextManager[object]:
    """The run's pool as the task's judge session, when `router` has judge scorers (else nothing)."""
    judged = any(scorer.uses_judge for scorer in router.scorers())
    return serving(_task_session()) if judged else nullcontext()


def _task_session() -> PoolSession:
    """The run's pool, found by name in the run's namespace (the driver started it)."""
    count, fields = _pool_facts()
    return PoolSession(JudgeSettings.model_validate(fields), [_named(index) for index in range(count)])


def _pool_facts() -> tuple[int, dict[str, Any]]:
    """The pool's size and settings, from the ledger (never restarted), else from the first actor."""
    import ray
    from ray.exceptions import RayActorError

    try:
        facts: tuple[int, dict[str, Any]] = ray.get(ray.get_actor(LEDGER_NAME).pool.remote())
    except (ValueError, RayActorError):
        facts = ray.get(ray.get_actor(_ACTOR_NAME.format(index=0)).pool.remote())
    return facts


def _named(index: int) -> Any | None:
    """Judge actor `index`; `None` once Ray could not restart it (its questions become error results)."""
    import ray

    try:
        return ray.get_actor(_ACTOR_NAME.format(index=index))
    except ValueError:
        return None


class JudgePool:
    """The driver's handle on the pool: started, checked, finished, stopped."""

    def __init__(self, ray: Any, settings: JudgeSettings, count: int, restarts: int) -> None:
        self.ray, self.count = ray, count
        fields = shipped_fields(settings)
        self.session = PoolSession(JudgeSettings.model_validate(fields), [])
        here = _driver_node(ray)
        # Never restarted: a fresh budget would let the run exceed --judge-max-requests.
        ledger = ray.remote(RunLedger).options(name=LEDGER_NAME, num_cpus=0, scheduling_strategy=here, max_restarts=0)
        self.ledger = ledger.remote(settings.max_requests, (count, fields))
        worker = ray.remote(JudgeWorker)
        self.actors = [
            worker.options(
                name=_ACTOR_NAME.format(index=index),
                max_concurrency=settings.concurrency,
                num_cpus=0,
                scheduling_strategy=here,
                max_restarts=restarts,
                max_task_retries=restarts,  # a question in flight when it died is asked again
            ).remote(fields, count)
            for index in range(count)
        ]
        self.session.actors = list(self.actors)

    def check(self, driver_has_key: bool) -> None:
        """Stop the run before any task when an actor cannot judge.

        Raises:
            JudgeSetupError: an actor's settings cannot work, or it lacks the key this process has.
        """
        for problem, has_key in self.ray.get([actor.check.remote() for actor in self.actors]):
            if problem is not None:
                raise JudgeSetupError(f"judge setup: {problem}")
            if driver_has_key and not has_key:
                raise JudgeSetupError(
                    f"judge setup: the judge API key is set here but not on the Ray cluster: {_NOT_SHIPPED}"
                )

    def finish(self) -> dict[str, Any]:
        """The run's judge counters: the live actors' final ones, plus the last ones of those that died.

        Raises:
            JudgeSetupError: an actor's first contact with the judge was refused, as locally.
        """
        finished: set[str] = set()
        for incarnation, stats, error in self._finished():
            if error is not None:
                raise JudgeSetupError(error)
            finished.add(incarnation)
            self.session.absorb(stats)
        for stats in dead_incarnations(self._recorded(), finished):
            self.session.absorb(stats)
        found: dict[str, Any] = self.session.stats().model_dump(mode="json")
        return found

    def _finished(self) -> list[tuple[str, JudgeStats, str | None]]:
        """Each actor's `finish`; none for an actor dead for good (its counters are in the ledger)."""
        from ray.exceptions import RayActorError

        done = []
        for call in [actor.finish.remote() for actor in self.actors]:
            try:
                done.append(self.ray.get(call))
            except RayActorError:
                continue
        return done

    def _recorded(self) -> dict[str, JudgeStats]:
        """The ledger's counters by incarnation (none if the ledger died: then only the live actors count)."""
        from ray.exceptions import RayActorError

        try:
            recorded: dict[str, JudgeStats] = self.ray.get(self.ledger.recorded.remote())
        except RayActorError:
            return {}
        return recorded

    def stop(self) -> None:
        """End the actors, for good (their names are free again for the next run of this driver)."""
        for actor in [*self.actors, self.ledger]:
            self.ray.kill(actor, no_restart=True)


def _gone(index: int) -> str:
    name = _ACTOR_NAME.format(index=index)
    return (
        f"judge actor {name} cannot answer: its process died and Ray could not restart it "
        "(EVALTRACE_RAY_MAX_RESTARTS); this entry was not judged"
    )


def _driver_node(ray: Any) -> Any:
    """Placement on the driver's Ray node, hard: a soft affinity lets Ray move zero-CPU actors elsewhere."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)


@contextmanager
def judges_on_ray(
    router: Router, overrides: dict[str, Any], connect: Callable[[], Any]
) -> Iterator[Callable[[], dict[str, Any] | None]]:
    """Start the judge pool when a judge is among the scorers; yields the getter of the run's judge counters.

    Inside, the driver's own judge questions (held conversations) go to the pool too.

    Raises:
        InputError: the judge settings are malformed or cannot work (`JudgeSetupError`), here or on the actors.
    """
    if not any(scorer.uses_judge for scorer in router.scorers()):
        yield lambda: None
        return
    if overrides.get("api_key") is not None:
        raise JudgeSetupError(f"judge setup: --judge-api-key is not used by --engine ray: {_NOT_SHIPPED}")
    settings = JudgeSettings.from_env(**overrides)
    settings.model_copy(update={"api_key": None}).require_usable()  # the key is the actors' to check
    ray_settings = RaySettings.from_env()
    ray = connect()
    pool = JudgePool(ray, settings, pool_size(ray, ray_settings.judge_actors), ray_settings.max_restarts)
    try:
        pool.check(driver_has_key=settings.api_key is not None)
        with serving(pool.session):
            yield pool.finish
    finally:
        pool.stop()


def pool_size(ray: Any, given: int | None) -> int:
    """`given` (`EVALTRACE_RAY_JUDGE_ACTORS`), else one actor per `CPUS_PER_JUDGE_ACTOR` cluster CPUs (1 to 8)."""
    if given is not None:
        return given
    cpus = int(ray.cluster_resources().get("CPU", 1))
    return max(1, min(MAX_DEFAULT_JUDGE_ACTORS, cpus // CPUS_PER_JUDGE_ACTOR))
