"""`boo-tui capture`: the kernels a model runs, as a commands file (MIOpenDriver lines where the grammar can say
the call, BOO's `aten::` lines otherwise), from a live model or from a torch-profiler chrome trace.

    model_commands("net.py:make", [parse_input("8x3x224x224")], backward=True)  -> the file's text
    trace_commands("trace.json")                                                 -> the file's text

Modules: trace.py (chrome trace -> outermost compute calls), classify.py (what is compute), miopen.py (a call ->
its MIOpenDriver line), lines.py (aten lines, merging, the file's text), model.py (loading and running a model,
recording it). Errors are CaptureError, one line each.
"""
from __future__ import annotations

from collections.abc import Sequence

from .classify import NON_COMPUTE
from .errors import CaptureError
from .lines import Captured, aten_line, command_for, merge, render
from .miopen import miopen_line
from .model import InputSpec, capture_model, load_factory, parse_input
from .trace import OpCall, TraceCalls, load_trace, outermost_calls

__all__ = [
    "NON_COMPUTE",
    "CaptureError",
    "Captured",
    "InputSpec",
    "OpCall",
    "TraceCalls",
    "aten_line",
    "capture_model",
    "command_for",
    "load_factory",
    "load_trace",
    "merge",
    "miopen_line",
    "model_commands",
    "outermost_calls",
    "parse_input",
    "render",
    "trace_commands",
]


def _summary(commands: Sequence[Captured], trace: TraceCalls, per_pass: bool) -> str:
    miopen = sum(1 for c in commands if not c.command.startswith("aten::"))
    calls, dropped = len(trace.calls), trace.dropped
    if per_pass:
        calls, dropped = calls // trace.steps, dropped // trace.steps
    return (f"{len(commands)} commands ({miopen} MIOpenDriver, {len(commands) - miopen} aten) from {calls} calls"
            f"{' a pass' if per_pass else ''}; {dropped} non-compute ops left out (views, copies, allocations, "
            "0-d bookkeeping)")


def model_commands(model_spec: str, inputs: Sequence[InputSpec], *, backward: bool = False,
                   layout: str | None = None, eval_mode: bool = False, threads: int | None = None) -> str:
    """The commands file of a captured model (see model.capture_model)."""
    cap = capture_model(model_spec, inputs, backward=backward, layout=layout, eval_mode=eval_mode, threads=threads)
    commands = merge(cap.trace.calls, cap.trace.steps)
    header = [f"boo-tui capture of {cap.facts['model']}",
              f"inputs: {cap.facts['inputs']}",
              f"pass: {cap.facts['pass']}; layout: {cap.facts['layout']}; mode: {cap.facts['mode']}",
              f"torch {cap.facts['torch']}",
              f"eager time: {cap.eager_us / 1e3:.3f} ms (median of {cap.eager_runs} passes, profiler off); "
              f"a recorded pass: {cap.profiled_us / 1e3:.3f} ms (median of {cap.trace.steps}, profiler on)",
              "calls = per pass; share = a command's summed time in a recorded pass (median over the passes) / the "
              "eager time (profiler overhead makes small ops look bigger); self = the same of its self time",
              _summary(commands, cap.trace, True), ""]
    return render(header, commands, cap.eager_us)


def trace_commands(path: str) -> str:
    """The commands file of a torch-profiler chrome trace (record_shapes=True)."""
    trace = outermost_calls(load_trace(path), path)
    commands = merge(trace.calls)
    header = [f"boo-tui capture of the trace {path}",
              f"total: {trace.total_us / 1e3:.3f} ms = {trace.span_what}",
              "share = a command's summed time in the trace / that total; self = the same of its self time",
              "calls = how many times the trace recorded it (every profiled step counts)",
              _summary(commands, trace, False)]
    if trace.device_events:
        header.append(f"times are the CPU-side op events' (launch time on a GPU); the trace's {trace.device_events} "
                      "GPU kernel/copy events are not attributed to them")
    header.append("")
    return render(header, commands, trace.total_us)
