"""Per-dispatch time from IREE's own HAL profiler: the reproducer command, run under `--device_profiling_mode`,
read back with `iree-profile`.

Why: the harness's samples are the wall time of a whole call (launch, the dispatches, the wait for completion),
which for a small kernel is mostly launch and synchronisation. The CUPTI path (`gpu_timing.profile_dispatches`)
only sees NVIDIA GPUs, through torch's profiler. IREE 3.13's runtime records the dispatches itself, on every
driver that implements it, into a `.ireeprof` bundle: device-timestamped `dispatch_event`s where the GPU driver
has them (`--device_profiling_mode=dispatch-events`), host-timed `host_dispatch_event`s on the CPU drivers (there
`dispatch-events` is refused: "UNIMPLEMENTED; unsupported local profiling data families 0x8", and
`queue-events,host-execution` gives each dispatch's start and end on the host). The 3.13 wheel's CUDA driver
implements none of it (seen on an H100: "UNIMPLEMENTED; CUDA HAL-native profiling is not implemented", in every
mode), so on CUDA the caller falls back to CUPTI; HIP is untried here. A refusal (UNIMPLEMENTED) is a property of
the runtime build, not of the kernel: `profile` remembers it per device and mode for the rest of the process
instead of paying a process start and a device init (~0.35 s on the H100) per kernel. The reproducer command
(`reproducer.write_reproducer`: the same artifact, the same inputs, the same device and allocator) is what runs
under the profiler, in its own process, after the timed loop: the worker's measurement is untouched. On this
2-core CPU host a capture of 21 calls of a 128^3 f32 gemm and its reading cost ~12 ms (a 22 KB bundle).

How the events become the result (`summarize`, same shape as `profile_dispatches`): a call of the kernel is one
queue submission, so the dispatches of one call share a `submission_id`; per call, the sum of its dispatches'
`duration_ns`; reported: the median over calls, the number of dispatches per call and each dispatch's median.
The first call is dropped (it pays for the module's first use: page faults, lazy executable loading, JIT on some
drivers). Events marked `"valid": false` are skipped. Which event type and timing source the figure came from is
part of the result, so a host-timed CPU figure is never mistaken for a device timestamp.

The tools are the iree-base-runtime wheel's (`iree_tools.find_runtime_tool`), else PATH's. Every failure (a
tool missing, a refused mode, a timeout, a profile without events) is one line, never a traceback: `profile`
returns it as {"error": why}, the lower functions raise `IreeProfileError`.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import statistics
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import BooError, elide
from ..iree_tools import find_runtime_tool
from .messages import DispatchTiming

#: one JSON record of `iree-profile dispatch --format=jsonl`, as parsed: its fields vary with the event type and
#: the IREE version, so each value is checked (isinstance) where it is read
ProfileEvent = dict[str, object]

SOURCE = "iree-profile"
BENCH_TOOL = "iree-benchmark-module"
PROFILE_TOOL = "iree-profile"
#: device-timestamped dispatches, asked of the GPU drivers (the CPU drivers refuse it; 3.13's CUDA every mode)
DEVICE_MODE = "dispatch-events"
#: the CPU drivers (local-sync, local-task): dispatches timed on the host as they execute
HOST_MODE = "queue-events,host-execution"
#: calls profiled after the dropped first one
PROFILED_CALLS = 20
#: calls dropped from the start of a capture (the module's first use)
DROPPED_CALLS = 1
#: process start, module load (a GPU's context: seconds) and the calls
CAPTURE_TIMEOUT_S = 60.0
READ_TIMEOUT_S = 30.0
#: flags of the reproducer command that the capture replaces with its own
_REPLACED = ("--benchmark_repetitions", "--benchmark_min_time", "--benchmark_format", "--benchmark_out",
             "--device_profiling_mode", "--device_profiling_output")
#: an IREE status in a tool's error output: "c/runtime/src/...profile.c:240: UNIMPLEMENTED; unsupported ..."
_STATUS = re.compile(r"\b([A-Z][A-Z_]{3,});\s")


#: (device, mode) -> the one-line refusal of an earlier capture in this process (see `profile`)
_refused: dict[tuple[str, str], str] = {}


class IreeProfileError(BooError):
    """A profile could not be captured or read (tool missing, mode refused, timeout, no events)."""


@dataclass(frozen=True)
class Capture:
    """A `.ireeprof` bundle written by one run of the reproducer command."""

    path: str
    mode: str                 # the --device_profiling_mode it ran with
    calls: int                # calls of the function it made (the first included)
    wall_us: float | None     # iree-benchmark-module's real time per call while profiling (None: not reported)
    seconds: float            # what the capture cost: process start, module load, the calls


def profiling_mode(driver: str) -> str:
    """The profiling mode that gives dispatch times on `driver` (hip, cuda, local-sync, local-task, or a device
    URI such as hip://0): host execution events on the CPU drivers, device timestamps elsewhere."""
    name = driver.split(":", 1)[0].strip().lower()
    return HOST_MODE if name.startswith("local") else DEVICE_MODE


def profile_argv(reproducer: str | Sequence[str], output: str, calls: int, mode: str | None = None,
                 tool: str | None = None) -> list[str]:
    """The reproducer command (the string `write_reproducer` returns, or its argv) made to run `calls` calls once,
    with the profiler writing to `output`. Its own repetition, time and format flags are replaced; a bare tool
    name becomes `tool` (the wheel's iree-benchmark-module). `mode` None: `profiling_mode` of its --device."""
    argv = shlex.split(reproducer) if isinstance(reproducer, str) else [str(a) for a in reproducer]
    if not argv:
        raise IreeProfileError("empty reproducer command")
    if calls < 1:
        raise IreeProfileError(f"calls must be >= 1, got {calls}")
    head, rest = argv[0], argv[1:]
    if tool and head == BENCH_TOOL:
        head = tool
    kept = [a for a in rest if a.split("=", 1)[0] not in _REPLACED]
    if mode is None:
        mode = profiling_mode(command_driver(kept))
    return [head, *kept, "--benchmark_repetitions=1", f"--benchmark_min_time={calls}x", "--benchmark_format=json",
            f"--device_profiling_mode={mode}", f"--device_profiling_output={output}"]


def command_driver(argv: Sequence[str]) -> str:
    """The driver of a command's --device flag ("local-sync" when it has none: iree-benchmark-module's default
    device is the CPU)."""
    for a in argv:
        if a.startswith("--device="):
            return a.split("=", 1)[1]
    return "local-sync"


def capture(reproducer: str | Sequence[str], folder: str, *, calls: int = PROFILED_CALLS + DROPPED_CALLS,
            mode: str | None = None, timeout_s: float = CAPTURE_TIMEOUT_S, name: str = "dispatches.ireeprof"
            ) -> Capture:
    """Run the reproducer command for `calls` calls with the profiler on, into `folder`/`name`. Raises
    IreeProfileError with one line: the tool's own status ("UNIMPLEMENTED; ...") when it fails, or the timeout."""
    tool = find_runtime_tool(BENCH_TOOL)
    if not tool:
        raise IreeProfileError(f"{BENCH_TOOL} not found: install iree-base-runtime")
    output = os.path.join(os.path.abspath(folder), name)
    argv = profile_argv(reproducer, output, calls, mode, tool)
    used = next(a.split("=", 1)[1] for a in argv if a.startswith("--device_profiling_mode="))
    t0 = time.monotonic()
    proc = _run(argv, timeout_s, BENCH_TOOL, f"profiling {calls} calls")
    seconds = time.monotonic() - t0
    if proc.returncode != 0:
        how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
        raise IreeProfileError(f"{BENCH_TOOL} failed ({how}) with --device_profiling_mode={used}: "
                               f"{tool_error(proc.stderr, proc.stdout)}")
    if not os.path.isfile(output):
        raise IreeProfileError(f"{BENCH_TOOL} wrote no profile (--device_profiling_mode={used})")
    return Capture(path=output, mode=used, calls=calls, wall_us=benchmark_wall_us(proc.stdout), seconds=seconds)


def _run(argv: list[str], timeout_s: float, name: str, doing: str) -> subprocess.CompletedProcess[str]:
    """Run one of the runtime's tools; a timeout or a failed start is IreeProfileError in one line."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise IreeProfileError(f"{name} timed out after {timeout_s:g} s {doing}") from None
    except OSError as e:
        raise IreeProfileError(f"{name} could not start: {e.strerror or e}") from None


def tool_error(stderr: str, stdout: str = "") -> str:
    """One line of a failed IREE tool's output: its IREE status ("UNIMPLEMENTED; unsupported local profiling data
    families 0x8", the source location dropped), else its last line of stderr, else of stdout."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        m = _STATUS.search(ln)
        if m:
            return elide(ln[m.start(1):])
    rest = lines or [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    return elide(rest[-1]) if rest else "no output"


def benchmark_wall_us(stdout: str) -> float | None:
    """The real time per call in iree-benchmark-module's JSON report (--benchmark_format=json), else None."""
    start = stdout.find("{")
    if start < 0:
        return None
    try:
        report = json.loads(stdout[start:])
        run = next(b for b in report.get("benchmarks", []) if b.get("run_type", "iteration") == "iteration")
        unit = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[run.get("time_unit", "ns")]
        return float(run["real_time"]) * unit
    except (ValueError, TypeError, KeyError, AttributeError, StopIteration):
        return None


def read_events(path: str, *, timeout_s: float = READ_TIMEOUT_S) -> list[ProfileEvent]:
    """Every dispatch event of a `.ireeprof` bundle: `iree-profile dispatch --format=jsonl --dispatch_events`,
    parsed by `parse_events`."""
    tool = find_runtime_tool(PROFILE_TOOL)
    if not tool:
        raise IreeProfileError(f"{PROFILE_TOOL} not found: install iree-base-runtime")
    proc = _run([tool, "dispatch", "--format=jsonl", "--dispatch_events", path], timeout_s, PROFILE_TOOL,
                f"on {path}")
    if proc.returncode != 0:
        raise IreeProfileError(f"{PROFILE_TOOL} failed (exit {proc.returncode}) on {os.path.basename(path)}: "
                               f"{tool_error(proc.stderr, proc.stdout)}")
    return parse_events(proc.stdout.splitlines())


def parse_events(lines: Iterable[str]) -> list[ProfileEvent]:
    """The JSON objects among `lines` whose "type" ends in "dispatch_event" (dispatch_event on a GPU,
    host_dispatch_event on the CPU); summaries, other record types and lines that are not JSON are skipped."""
    events = []
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and str(row.get("type", "")).endswith("dispatch_event"):
            events.append(row)
    return events


def summarize(events: Sequence[ProfileEvent], *, dropped_calls: int = DROPPED_CALLS) -> DispatchTiming:
    """Per-call dispatch time from dispatch events: {"device_us": median per call, "dispatches": per call,
    "per_dispatch_us": {name: median}, "calls": n, "source": "iree-profile", "event_type", "timing_source",
    "dropped_calls", "invalid_events"}, or {"error": why} when no call is left to count.

    A call is a `submission_id`, in submission order; the first `dropped_calls` are left out. When the profile
    holds device-timestamped `dispatch_event`s, only those count (host-timed ones beside them are ignored)."""
    usable = [(ev, s, d) for ev in events if ev.get("valid", True) is not False
              and (d := _duration_ns(ev)) is not None and (s := _submission(ev)) is not None]
    invalid = len(events) - len(usable)
    if not usable:
        why = "no valid dispatch events" if events else "no dispatch events"
        return {"error": f"the profile has {why}", "source": SOURCE}
    device = [u for u in usable if u[0].get("type") == "dispatch_event"]
    host_ignored = len(usable) - len(device) if device else 0
    if host_ignored:
        usable = device
    calls: dict[int, list[tuple[str, float]]] = {}
    for ev, sub, d in usable:
        calls.setdefault(sub, []).append((_name(ev), d))
    order = sorted(calls)
    kept = order[dropped_calls:]
    if not kept:
        return {"error": f"the profile has {len(order)} call(s), none left once the first {dropped_calls} "
                         f"(warm-up) are dropped", "source": SOURCE}
    per_call = [sum(d for _, d in calls[s]) / 1e3 for s in kept]
    counts = [len(calls[s]) for s in kept]
    by_name: dict[str, list[float]] = {}
    for s in kept:
        for name, d in calls[s]:
            by_name.setdefault(name, []).append(d / 1e3)
    chosen = [ev for ev, _, _ in usable]
    return {
        "device_us": statistics.median(per_call),
        "dispatches": statistics.median(counts),
        "per_dispatch_us": {k: statistics.median(v) for k, v in sorted(by_name.items())},
        "calls": len(kept),
        "source": SOURCE,
        "event_type": _joined(ev.get("type") for ev in chosen),
        "timing_source": _joined(ev.get("timing_source") or ev.get("type") for ev in chosen),
        "dropped_calls": min(dropped_calls, len(order)),
        "invalid_events": invalid,
        "host_events_ignored": host_ignored,
    }


def refusal(device: str, mode: str | None = None) -> str | None:
    """Why the runtime refused to profile `device` (a --device value) in `mode` earlier in this process, or None:
    asked before a reproducer's inputs are written, which on a GPU are tens of MB a job."""
    return _refused.get((device, mode or profiling_mode(device)))


def profile(reproducer: str | Sequence[str], folder: str, *, calls: int = PROFILED_CALLS,
            timeout_s: float = CAPTURE_TIMEOUT_S, mode: str | None = None) -> DispatchTiming:
    """Capture `calls` profiled calls (plus the dropped first) of the reproducer command into `folder`, read and
    summarize them. Never raises: {"error": one line} when any step fails. Beside `summarize`'s keys: the mode,
    iree-benchmark-module's wall time per call while profiling ("wall_us") and the capture's cost in seconds.
    A device and mode the runtime refused (UNIMPLEMENTED) once in this process are not tried again."""
    argv = shlex.split(reproducer) if isinstance(reproducer, str) else [str(a) for a in reproducer]
    device = command_driver(argv)
    key = (device, mode or profiling_mode(device))
    if (why := refusal(device, mode)) is not None:
        return {"error": f"{why} (refused earlier in this process: not tried again)", "source": SOURCE}
    try:
        cap = capture(argv, folder, calls=calls + DROPPED_CALLS, mode=mode, timeout_s=timeout_s)
        out = summarize(read_events(cap.path))
    except IreeProfileError as e:
        if "UNIMPLEMENTED;" in str(e):
            _refused[key] = str(e)
        return {"error": str(e), "source": SOURCE}
    out.update({"mode": cap.mode, "wall_us": cap.wall_us, "capture_s": round(cap.seconds, 3)})
    return out


def _duration_ns(ev: ProfileEvent) -> float | None:
    """`duration_ns` when the event has it; else end - start of a `start_<x>_ns` / `end_<x>_ns` pair."""
    d = ev.get("duration_ns")
    if isinstance(d, (int, float)) and not isinstance(d, bool):
        return float(d) if d >= 0 else None
    for key, start in ev.items():
        if key.startswith("start_") and key.endswith("_ns"):
            end = ev.get("end_" + key[len("start_"):])
            if isinstance(start, (int, float)) and isinstance(end, (int, float)) and end >= start:
                return float(end - start)
    return None


def _submission(ev: ProfileEvent) -> int | None:
    s = ev.get("submission_id")
    return s if isinstance(s, int) and not isinstance(s, bool) else None


def _name(ev: ProfileEvent) -> str:
    key = ev.get("key")
    if isinstance(key, str) and key:
        return key if len(key) <= 120 else key[:117] + "..."
    return f"executable{ev.get('executable_id', '?')}:{ev.get('function_ordinal', '?')}"


def _joined(values: Iterable[object]) -> str:
    return ",".join(sorted({str(v) for v in values if v}))
