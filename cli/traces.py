"""`evaltrace traces` and `evaltrace show`: list and inspect the traces rebuilt from span files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any

import typer

from evaltrace.cli import _options as opt
from evaltrace.collector.errors import InputError
from evaltrace.collector.terminal import inline, json_text, plural
from evaltrace.collector.traces.records import Iteration, ToolCall, Trace

if TYPE_CHECKING:
    from evaltrace.collector.otlp.files.inputs import RunFiles
    from evaltrace.collector.traces.explain import SpanReading

PathsArg = Annotated[list[str], typer.Argument(metavar="PATH", help=opt.PATHS_HELP)]
_WIDTH = 48


def traces_command(
    paths: PathsArg,
    json_lines: Annotated[bool, typer.Option("--json", metavar="", help="One JSON object per line per trace.")] = False,
    explain: Annotated[
        str | None,
        typer.Option(
            "--explain",
            metavar="TRACE_ID",
            help="Say which span became the input, each iteration, each tool call and the answer, and why the others"
            " were set aside (a trace id or a unique prefix).",
        ),
    ] = None,
) -> None:
    """List the traces rebuilt from span files (a table, or JSON lines with --json)."""
    from evaltrace.collector.otlp.files.inputs import resolve_paths  # deferred: pyarrow only when reading
    from evaltrace.collector.traces.rebuild import read_traces

    # Paths are checked before the header is printed: a wrong path is one `Error:` line alone.
    files = resolve_paths(paths)
    if explain is not None:
        _explain(explain, paths, files, json_lines)
        return
    found = read_traces(files)
    if json_lines:
        for trace in found:
            typer.echo(json_text(trace.to_contract_json()))
        return
    typer.echo(_row(["TRACE", "CASE", "STATUS", "ITER", "TOOLS", "TOKENS IN/OUT", "INPUT", "OUTPUT"]))
    count = 0
    for trace in found:
        count += 1
        typer.echo(_row(_summary(trace)))
    typer.echo(plural(count, "trace"))


def _summary(trace: Trace) -> list[str]:
    usage = trace.usage
    return [
        trace.trace_id[:16],
        _clip(trace.case_id or "-", 20),
        _status(trace),
        str(len(trace.iterations)),
        str(len(trace.tool_calls)),
        f"{_num(usage.input_tokens)}/{_num(usage.output_tokens)}",
        _clip(trace.input, _WIDTH),
        _clip(trace.output if trace.error is None else f"ERROR {trace.error}", _WIDTH),
    ]


def _status(trace: Trace) -> str:
    """How the run ended, as the `outcome` scorer classifies it (one function, so they agree)."""
    from evaltrace.evaluators.scoring.scorers.outcome import (
        trace_outcome,  # deferred: only commands listing traces need it
    )

    return trace_outcome(trace)[0]


def _row(cells: list[str]) -> str:
    widths = [16, 20, 7, 4, 5, 13, _WIDTH, 0]
    # Every cell is recorded content: control characters are shown as escapes, not sent to the terminal.
    cells = [inline(cell) for cell in cells]
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)


def _clip(text: Any, width: int) -> str:
    if text is None:
        return "-"
    # Escaped before measuring, so the cut counts the characters the terminal will show.
    flat = inline(" ".join(str(text).split()))
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def show_command(
    trace_id: Annotated[str, typer.Argument(metavar="TRACE_ID", help="A trace id, or a unique prefix of one.")],
    paths: PathsArg,
    as_json: Annotated[
        bool, typer.Option("--json", metavar="", help="The trace as one JSON object, as a line of `traces --json`.")
    ] = False,
) -> None:
    """Show one trace as a tree: iterations, tool calls with arguments and results, output, usage."""
    from evaltrace.collector.otlp.files.inputs import resolve_paths
    from evaltrace.collector.traces.rebuild import read_traces

    files = resolve_paths(paths)
    for trace in read_traces(files, trace_ids=[_one_trace_id(trace_id, paths, files)]):
        if as_json:
            typer.echo(json_text(trace.to_contract_json()))
            continue
        for line in render_trace(trace):
            typer.echo(inline(line))


def _one_trace_id(trace_id: str, paths: list[str], files: RunFiles) -> str:
    """The one recorded trace id `trace_id` names (whole or a unique prefix) in `files` (`paths` resolved)."""
    from evaltrace.collector.runfiles.reader import find_trace_ids

    # The id is resolved on the trace-id column alone, then only that trace's rows are decoded:
    # one trace of a large run shows in about the time it takes to decompress the files.
    ids = find_trace_ids(files, trace_id.strip().lower())
    if not ids:
        raise InputError(f"no trace with id {trace_id!r} in {', '.join(paths)}; list them with `evaltrace traces`")
    if len(ids) > 1:
        shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
        raise InputError(f"trace id prefix {trace_id!r} is ambiguous ({len(ids)} traces: {shown}); give more digits")
    return ids[0]


def _explain(trace_id: str, paths: list[str], files: RunFiles, as_json: bool) -> None:
    from evaltrace.collector.runfiles.reader import iter_traces
    from evaltrace.collector.traces.explain import explain_trace
    from evaltrace.collector.traces.rebuild import convert_trace

    wanted = _one_trace_id(trace_id, paths, files)
    for spans in iter_traces(files, trace_ids=[wanted]):
        for trace in convert_trace(spans):
            if not as_json:
                typer.echo(inline(f"trace {trace.trace_id}: {plural(len(spans), 'span')}, read as follows"))
            for reading in explain_trace(spans, trace):
                typer.echo(json_text(asdict(reading)) if as_json else inline(_reading_line(reading)))


def _reading_line(reading: SpanReading) -> str:
    head = f"{'  ' * reading.depth}{reading.name}  [{reading.role}, {reading.convention}]"
    if reading.became:
        return f"{head}  -> {'; '.join(reading.became)}"
    return f"{head}  set aside: {reading.set_aside}"


def render_trace(trace: Trace, indent: str = "") -> Iterator[str]:
    """The lines of `evaltrace show` for one trace (child traces indented under their tool call).

    Lines hold recorded content as it is: pass each through `inline` before it reaches a terminal.
    """
    head = f"{indent}trace {trace.trace_id}  {trace.agent_name or trace.name or ''}  [{_status(trace)}]"
    yield head.rstrip() + (f"  {trace.duration_seconds:.3f}s" if trace.duration_seconds is not None else "")
    for label, value in (("case", trace.case_id), ("conversation", trace.conversation_id), ("input", trace.input)):
        if value is not None:
            yield f"{indent}  {label}: {_clip(value, 200)}"
    for iteration in trace.iterations:
        yield from _render_iteration(iteration, indent + "  ")
    loose = [c for c in trace.tool_calls if c.iteration is None]
    if loose:
        yield f"{indent}  tool calls not requested by a recorded model reply:"
        for call in loose:
            yield from _render_call(call, indent + "    ")
    yield f"{indent}  output: {_clip(trace.output, 400)}"
    if trace.error is not None:
        yield f"{indent}  error: {_clip(trace.error, 400)}"
    usage = trace.usage
    out = "- tokens" if usage.output_tokens is None else plural(usage.output_tokens, "token")
    yield f"{indent}  usage: input {_num(usage.input_tokens)}, output {out}"
    for warning in trace.warnings:
        yield f"{indent}  warning: {warning}"


def _render_iteration(iteration: Iteration, indent: str) -> Iterator[str]:
    usage = iteration.usage
    parts = [
        f"iteration {iteration.index}",
        iteration.model or "(model unknown)",
        f"in={_num(usage.input_tokens)} out={_num(usage.output_tokens)}",
    ]
    if iteration.finish_reasons:
        parts.append("finish=" + ",".join(iteration.finish_reasons))
    if iteration.duration_seconds is not None:
        parts.append(f"{iteration.duration_seconds:.3f}s")
    yield indent + "  ".join(parts)
    if iteration.output_text is not None:
        yield f"{indent}  says: {_clip(iteration.output_text, 200)}"
    if iteration.error is not None:
        yield f"{indent}  error: {_clip(iteration.error, 200)}"
    for call in iteration.tool_calls:
        yield from _render_call(call, indent + "  ")


def _render_call(call: ToolCall, indent: str) -> Iterator[str]:
    arguments = json.dumps(call.arguments, ensure_ascii=False) if call.arguments is not None else "(not captured)"
    yield f"{indent}-> {call.name} [{call.call_id or 'no id'}] {_clip(arguments, 200)}"
    if call.error is not None:
        yield f"{indent}   error: {_clip(call.error, 200)}"
    if call.result is not None:
        result = call.result if isinstance(call.result, str) else json.dumps(call.result, ensure_ascii=False)
        yield f"{indent}   result: {_clip(result, 200)}"
    if call.handoff:
        # The handed-off agent's calls already follow in this trace; its child repeats them.
        yield f"{indent}   handed off to {call.child.agent_name if call.child else call.result}"
    elif call.child is not None:
        yield from render_trace(call.child, indent + "   ")
