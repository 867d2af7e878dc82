"""`boo-tui capture`: the kernels a model runs, as a commands file (MIOpenDriver lines where the grammar can say
the call, BOO's `aten::` lines otherwise), from a live model or from a torch-profiler chrome trace.

    model_commands("net.py:make", [parse_input("8x3x224x224")], backward=True)  -> the file's text
    trace_commands("trace.json")                                                 -> the file's text

Modules: trace.py (chrome trace -> outermost compute calls), classify.py (what is compute), miopen.py (a call ->
its MIOpenDriver line), lines.py (aten lines, merging, the file's text), live.py (loading and running a model,
recording it). Errors are CaptureError, one line each.
"""
from __future__ import annotations

from collections.abc import Sequence

from .calls import OpCall
from .classify import NON_COMPUTE
from .errors import CaptureError
from .lines import Captured, aten_line, command_for, compute_total, merge, render
from .live import InputSpec, capture_model, load_factory, parse_input
from .miopen import miopen_line
from .trace import TraceCalls, load_trace, outermost_calls

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
    "compute_total",
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


#: what the `# boo-tui:` items mean, in every captured file's header
SHARE_DEFINITION = ("share = a command's part of the compute total (all its calls), self = the same of its self "
                    "time, us = its profiled time in microseconds (all its calls; small ops read high: the profiler "
                    "adds a few us to every op it records inside a call)")


def model_commands(model_spec: str, inputs: Sequence[InputSpec], *, backward: bool = False,
                   layout: str | None = None, eval_mode: bool = False, threads: int = 1) -> str:
    """The commands file of a captured model (see model.capture_model)."""
    cap = capture_model(model_spec, inputs, backward=backward, layout=layout, eval_mode=eval_mode, threads=threads)
    commands = merge(cap.trace.calls, cap.trace.steps)
    total = compute_total(commands)
    calls = sum(c.calls for c in commands)
    header = [f"boo-tui capture of {cap.facts['model']}",
              f"inputs: {cap.facts['inputs']}",
              f"pass: {cap.facts['pass']}; layout: {cap.facts['layout']}; mode: {cap.facts['mode']}",
              f"torch {cap.facts['torch']}; threads: {cap.facts['threads']} (measure with the same: boo-tui FILE "
              f"--threads {cap.facts['threads']}{'; 1 is its default' if cap.facts['threads'] == '1' else ''})",
              f"compute total: {total / 1e3:.3f} ms a pass = the profiled time of its {calls} compute calls, each "
              f"the least over {cap.trace.steps} recorded passes (losing the core only adds time)",
              SHARE_DEFINITION,
              cap.facts["allocator"],
              f"calls = per pass; eager pass: {cap.eager_us / 1e3:.3f} ms median, {cap.eager_min_us / 1e3:.3f} ms "
              f"fastest of {cap.eager_runs} (profiler off; the compute total is "
              f"{100 * total / cap.eager_min_us if cap.eager_min_us > 0 else 0:.0f}% of the fastest); a recorded pass: "
              f"{cap.profiled_us / 1e3:.3f} ms (median of {cap.trace.steps}, profiler on)",
              _summary(commands, cap.trace, True), ""]
    return render(header, commands)


def trace_commands(path: str) -> str:
    """The commands file of a torch-profiler chrome trace (record_shapes=True)."""
    trace = outermost_calls(load_trace(path), path)
    commands = merge(trace.calls)
    header = [f"boo-tui capture of the trace {path}",
              f"compute total: {compute_total(commands) / 1e3:.3f} ms = the profiled time of its {len(trace.calls)} "
              "compute calls",
              SHARE_DEFINITION,
              f"calls = how many times the trace recorded it (every profiled step counts); the trace's time: "
              f"{trace.total_us / 1e3:.3f} ms = {trace.span_what}",
              _summary(commands, trace, False)]
    if trace.device_events:
        header.append(f"times are the CPU-side op events' (launch time on a GPU); the trace's {trace.device_events} "
                      "GPU kernel/copy events are not attributed to them")
    header.append("")
    return render(header, commands)
