"""Small test-only scorers shared by the engine tests (registered once: names are global)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any, ClassVar

from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.registry import register


@register
class OutputHas(Scorer):
    """Test scorer: passes when the output contains `text`."""

    name: ClassVar[str] = "t_engine_output_has"
    text: str

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        ok = self.text in (trace.output or "")
        return self.result(ok, 1.0 if ok else 0.0, f"output {'has' if ok else 'lacks'} {self.text!r}")


@register
class Boom(Scorer):
    """Test scorer that always raises."""

    name: ClassVar[str] = "t_engine_boom"

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        raise RuntimeError("kaboom")


@register
class NotApplicable(Scorer):
    """Test scorer that never applies."""

    name: ClassVar[str] = "t_engine_na"

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        return self.result(None, reason="does not apply")


@register
class SeesCase(Scorer):
    """Test scorer: passes when the case handed to it has the trace's input (turns get their own)."""

    name: ClassVar[str] = "t_engine_sees_case"

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        return self.result(case is not None and case.input == trace.input, reason=f"case input {case.input!r}")


@register
class KillsWorker(Scorer):
    """Test scorer that kills its process with SIGKILL when the trace's output has `text`."""

    name: ClassVar[str] = "t_engine_kill"
    text: str

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        if self.text in (trace.output or ""):
            os.kill(os.getpid(), signal.SIGKILL)
        return self.result(True, 1.0, "alive")


@register
class Sleeps(Scorer):
    """Test scorer that sleeps `seconds` on every trace (to interrupt a run mid-way).

    With `started` (a folder), it first creates a file there named by its process id: a test waits for
    those rather than guessing how long start-up takes.
    """

    name: ClassVar[str] = "t_engine_sleep"
    seconds: float
    started: str = ""

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        if self.started:
            (Path(self.started) / str(os.getpid())).touch()
        time.sleep(self.seconds)
        return self.result(True, 1.0, "slept")


@register
class PromptsSeen(Scorer):
    """Test scorer that reads the prompts (the default): passes when every iteration has one."""

    name: ClassVar[str] = "t_engine_prompts_seen"

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        seen = [it.input_messages is not None for it in trace.iterations]
        return self.result(all(seen), reason=f"prompts {seen}")


@register
class PromptsUnread(PromptsSeen):
    """The same check, declared as not reading prompts: it sees none unless another scorer reads them."""

    name: ClassVar[str] = "t_engine_prompts_unread"
    reads_histories: ClassVar[bool] = False
