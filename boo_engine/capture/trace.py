"""A torch-profiler chrome trace -> the outermost compute op of every call chain (`OpCall`s).

Pure Python (json only): `boo-tui capture --trace` never imports torch, and `capture_model` records its pass with
the profiler, exports the same chrome trace and reads it here, so a live capture and a trace import share one
converter and write the same lines for the same calls.

Nesting is by time interval on each (pid, tid): an event is inside the nearest open event that started before it
and has not ended. Walking down from the roots, the first `aten::` op that is compute (`classify.is_compute`) is
recorded and its subtree skipped (aten::conv2d, not the convolution / _convolution / mkldnn_convolution inside);
everything else (autograd nodes such as `autograd::engine::evaluate_function: AddmmBackward0`, record_function
labels, non-compute aten ops such as aten::t) is looked through.
"""
from __future__ import annotations

import bisect
import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .calls import OpCall
from .classify import is_compute
from .errors import CaptureError

#: a chrome trace's pid or tid: a number, or a label (absent: None)
_ThreadId = int | str | None
#: the trace's clock is in microseconds; a child's end may exceed its parent's by the rounding of `dur`
_SLACK_US = 0.002


@dataclass(frozen=True)
class TraceCalls:
    """What a trace holds: the outermost compute calls in time order, the total time shares are taken of, and what
    that total is (`span_what`)."""

    calls: list[OpCall]
    total_us: float
    span_what: str
    dropped: int
    """aten ops looked at and left out as non-compute (views, copies, allocations, 0-d bookkeeping)."""
    steps: int = 1
    """the trace's `ProfilerStep#` spans (1 when it has none)"""
    device_events: int = 0
    """GPU kernels / copies in the trace: their time is not attributed to the ops (the times here are CPU-side)"""


@dataclass
class _Node:
    ev: dict[str, Any]
    start: float
    end: float
    children: list[_Node]


def load_trace(path: str | Path) -> dict[str, Any]:
    """The trace's JSON object (`.json` or `.json.gz`). CaptureError when it cannot be read or is not a chrome
    trace."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise CaptureError(f"cannot read trace {path}: {e.strerror or e}") from None
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        data = json.loads(raw)
    except (ValueError, OSError, EOFError) as e:
        raise CaptureError(f"{path} is not a JSON chrome trace ({str(e).splitlines()[0] if str(e) else e})") \
            from None
    if isinstance(data, list):  # the bare-array form of the chrome trace format
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise CaptureError(f"{path} is not a chrome trace (no traceEvents list): export one with "
                           "prof.export_chrome_trace(PATH)")
    return data


def _forest(events: list[dict[str, Any]]) -> list[_Node]:
    """Per (pid, tid), the events nested by time interval; the roots of every thread, in time order."""
    by_thread: dict[tuple[_ThreadId, _ThreadId], list[_Node]] = {}
    for ev in events:
        start, dur = float(ev["ts"]), float(ev["dur"])
        by_thread.setdefault((ev.get("pid"), ev.get("tid")), []).append(_Node(ev, start, start + dur, []))
    roots: list[_Node] = []
    for nodes in by_thread.values():
        nodes.sort(key=lambda n: (n.start, -(n.end - n.start)))
        stack: list[_Node] = []
        for node in nodes:
            # the top ended before this starts (a sibling's turn), or this outlasts it (overlapping, not nested)
            while stack and (stack[-1].end <= node.start or node.end > stack[-1].end + _SLACK_US):
                stack.pop()
            (stack[-1].children if stack else roots).append(node)
            stack.append(node)
    roots.sort(key=lambda n: n.start)
    return roots


def _is_x(ev: object) -> bool:
    """A trace event (unchecked JSON) is a complete event ('X') with a name, a start and a duration."""
    return isinstance(ev, dict) and ev.get("ph") == "X" and isinstance(ev.get("ts"), int | float) \
        and isinstance(ev.get("dur"), int | float) and isinstance(ev.get("name"), str)


def outermost_calls(data: dict[str, Any], source: str = "trace") -> TraceCalls:
    """The outermost compute calls of a loaded chrome trace. CaptureError when the trace has no aten op, or
    recorded no shapes."""
    xs = [ev for ev in data["traceEvents"] if _is_x(ev)]
    ops = [ev for ev in xs if ev["name"].startswith("aten::")]
    if not ops:
        raise CaptureError(f"{source} has no aten:: op events (a torch.profiler chrome trace of CPU activity?)")
    if not any(isinstance(ev.get("args"), dict) and "Input Dims" in ev["args"] for ev in ops):
        raise CaptureError(f"{source} recorded no input shapes: profile with "
                           "torch.profiler.profile(record_shapes=True)")
    markers = [ev for ev in xs if ev.get("cat") == "Trace"]  # "PyTorch Profiler (0)": the profiled region
    tree = [ev for ev in xs if ev.get("cat") != "Trace"]
    steps = sorted((float(ev["ts"]), float(ev["ts"]) + float(ev["dur"])) for ev in tree
                   if ev["name"].startswith("ProfilerStep#"))
    step_starts = [start for start, _ in steps]
    calls: list[OpCall] = []
    dropped = 0

    def visit(node: _Node) -> None:
        nonlocal dropped
        name = node.ev["name"]
        if name.startswith("aten::"):
            step = max(bisect.bisect_right(step_starts, node.start) - 1, 0)
            call = _call(node, step)
            if call is not None and is_compute(call):
                calls.append(call)
                return
            dropped += 1
        for child in node.children:
            visit(child)

    roots = _forest(tree)
    for root in roots:
        visit(root)
    if steps:
        # a schedule's warm-up steps run inside the profiled region but are not recorded: the steps are the total
        total = sum(end - start for start, end in steps)
        what = f"the trace's {len(steps)} ProfilerStep# spans"
    elif markers:
        total = max(float(ev["dur"]) for ev in markers)
        what = "the profiled region (the trace's 'PyTorch Profiler' span)"
    else:
        top = [n for n in roots if n.ev.get("cat") in (None, "cpu_op", "user_annotation", "python_function")]
        top = top or roots
        total = max(n.end for n in top) - min(n.start for n in top)
        what = "the span of the top-level CPU events (first start to last end)"
    device = sum(1 for ev in xs if ev.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    return TraceCalls(calls, total, what, dropped, max(len(steps), 1), device)


def _call(node: _Node, step: int) -> OpCall | None:
    args = node.ev.get("args")
    if not isinstance(args, dict) or "Input Dims" not in args:
        return None
    dims = args.get("Input Dims")
    types = args.get("Input type")
    if not isinstance(dims, list):
        return None
    n = len(dims)
    strides = args.get("Input Strides", [[] for _ in range(n)])
    concrete = args.get("Concrete Inputs", ["" for _ in range(n)])
    if not (isinstance(types, list) and isinstance(strides, list) and isinstance(concrete, list)
            and n == len(types) == len(strides) == len(concrete)):
        return None
    dur = node.end - node.start
    self_us = max(dur - sum(c.end - c.start for c in node.children), 0.0)
    return OpCall(node.ev["name"], dims, [str(t) for t in types], strides, [str(c) for c in concrete], dur, self_us,
                  step)
