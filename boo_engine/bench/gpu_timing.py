"""GPU-only measurements beside the wall time per call: the device time of the dispatches, and the GPU's state.

**Dispatch time** (`profile_dispatches`): iree-boo-driver reports the GPU time of a kernel's dispatches, read
from a profiler; the harness's samples are the wall time of a whole call (launch, the dispatches, IREE's or
torch's wait for completion), which for a small kernel is mostly launch and synchronisation. After the timed
loop, a few more calls run under `torch.profiler` (CUPTI, which records every kernel of the process, IREE's
included, since both run in the same CUDA context); each call is bracketed by a `record_function` range, and
the GPU activities whose start falls inside a call's range are that call's dispatches. Per call: the sum of
their device durations; reported: the median over calls, the number of dispatches per call, and each dispatch's
median. The headline stays the wall time per call (what the statistics, the verdicts and the reproducer
command measure: iree-benchmark-module's real time is a wall time too); the dispatch time is shown beside it.

**GPU state** (`GpuMonitor`): clocks, temperature, power and the active clock-throttle reasons, polled through
NVML (nvidia-ml-py) every 50 ms while measuring, else read with `nvidia-smi` before and after. A measurement
during which a throttle reason other than "idle" / "application clocks" / "display clocks" was active is flagged
(`throttled`): its samples came from a slowed GPU. Samples are kept, not dropped (NVBench drops them): the flag
and the share of the measurement it covered are recorded with the result and make it noisy.
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import threading
import time
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Literal

from .messages import DispatchTiming, GpuState

#: NVML clock-event reasons that mean the GPU slowed itself (power cap, thermal, HW slowdown, power brake)
THROTTLE_BITS = {0x4: "sw power cap", 0x8: "hw slowdown", 0x20: "sw thermal", 0x40: "hw thermal",
                 0x80: "hw power brake"}
_MARK = "boo_tui_call"
#: unprofiled calls first (clocks back up), then at least `calls` profiled calls and MIN_PROFILED_S seconds
WARM_S = 0.2
MIN_PROFILED_S = 0.1
MAX_PROFILED_CALLS = 200


#: the GpuState figures a merge takes the extreme of
_Extreme = Literal["sm_mhz_min", "sm_mhz_max", "temp_c_max", "power_w_max"]


def _run_for(call: Callable[[], object], finish: Callable[[], object], flush: Callable[[], object] | None,
             seconds: float, min_calls: int) -> None:
    end = time.monotonic() + seconds
    n = 0
    while n < min_calls or time.monotonic() < end:
        if flush is not None:
            flush()
        call()
        finish()
        n += 1


def profile_dispatches(call: Callable[[], object], sync: Callable[[], object] | None,
                       flush: Callable[[], object] | None, calls: int = 20) -> DispatchTiming:
    """Run `calls` calls under the torch profiler; {"device_us": median per call, "dispatches": per call,
    "per_dispatch_us": {name: median}, "calls": n} or {"error": why} when the profiler saw no GPU work."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    finish = sync if sync is not None else torch.cuda.synchronize
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # "Profiler clears events at the end of each cycle"
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                # The profiler's start leaves the GPU idle long enough for its clocks to drop (an H100 idles at
                # 345 MHz): calls outside any range first bring them back up, and are not counted.
                _run_for(call, finish, flush, WARM_S, 3)
                end = time.monotonic() + MIN_PROFILED_S
                n = 0
                while n < calls or (time.monotonic() < end and n < MAX_PROFILED_CALLS):
                    if flush is not None:
                        flush()
                    with record_function(_MARK):
                        call()
                        finish()
                    n += 1
        events = list(prof.events())
    except Exception as e:  # noqa: BLE001 - a profiler failure loses the dispatch time, not the result
        return {"error": f"profiler failed: {(str(e).splitlines() or [''])[0][:200]}"}
    ranges = [(ev.time_range.start, ev.time_range.end) for ev in events
              if ev.name == _MARK and ev.device_type == DeviceType.CPU]
    activities = [(ev.name, ev.time_range.start, ev.time_range.end) for ev in events
                  if ev.device_type == DeviceType.CUDA]
    return summarize_dispatches(ranges, activities)


def summarize_dispatches(ranges: list[tuple[float, float]],
                         activities: list[tuple[str, float, float]]) -> DispatchTiming:
    """Per-call dispatch time from the profiler's records: `ranges` are the calls' (start, end) on the host,
    `activities` the GPU's (name, start, end); an activity belongs to the call whose range holds its start (an
    IREE call is synchronous, a profiled torch call is synchronised inside its range). Our own range is left
    out: Kineto also puts it on the GPU timeline ("gpu user annotation") for calls whose kernels it correlates
    with a torch op, and counted it doubled torch's time (seen on an H100: a cuBLAS gemm read 410 us = the
    200 us kernel + the 208 us annotation). Same result shape as `profile_dispatches`."""
    ranges = sorted(ranges)
    per_call: list[float] = [0.0] * len(ranges)
    counts = [0] * len(ranges)
    by_name: dict[str, list[float]] = {}
    for name, start, end in activities:
        if name == _MARK:
            continue
        i = _range_of(ranges, start)
        if i is None:
            continue
        dur = float(end - start)
        per_call[i] += dur
        counts[i] += 1
        by_name.setdefault(_short(name), []).append(dur)
    seen = [(t, c) for t, c in zip(per_call, counts) if c]
    if not seen:
        return {"error": "the profiler recorded no GPU activity inside the calls"}
    return {
        "device_us": statistics.median(t for t, _ in seen),
        "dispatches": statistics.median(c for _, c in seen),
        "per_dispatch_us": {k: statistics.median(v) for k, v in sorted(by_name.items())},
        "calls": len(seen),
        "source": "torch.profiler (CUPTI)",
    }


def _range_of(ranges: list[tuple[float, float]], t: float) -> int | None:
    lo, hi = 0, len(ranges) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        start, end = ranges[mid]
        if t < start:
            hi = mid - 1
        elif t > end:
            lo = mid + 1
        else:
            return mid
    return None


def _short(name: str) -> str:
    return name if len(name) <= 120 else name[:117] + "..."


# ---- GPU state ----------------------------------------------------------------------------------------------

class GpuMonitor:
    """Polls the visible GPU's clocks, temperature, power and throttle reasons while a measurement runs.

    `with GpuMonitor() as m: ...` then `m.summary()`. Never raises: without NVML or nvidia-smi it records nothing
    (summary None)."""

    def __init__(self, interval_s: float = 0.05) -> None:
        self._interval = interval_s
        self._polls: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: ModuleType | None = None   # pynvml, once initialised
        self._handle: object = None            # NVML's handle of the device: only handed back to NVML
        self.before: dict[str, float] | None = None
        self.after: dict[str, float] | None = None

    def __enter__(self) -> GpuMonitor:
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(_physical_index())
        except Exception:  # noqa: BLE001 - no NVML: nvidia-smi before and after
            self._nvml = None
        self.before = self._read()
        if self._nvml is not None:
            self._thread = threading.Thread(target=self._poll, name="boo-gpu-monitor", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        self.after = self._read()

    def _poll(self) -> None:
        while not self._stop.wait(self._interval):
            state = self._read()
            if state is not None:
                self._polls.append(state)

    def _read(self) -> dict[str, float] | None:
        try:
            if self._nvml is not None:
                n, h = self._nvml, self._handle
                return {"sm_mhz": float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
                        "mem_mhz": float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)),
                        "temp_c": float(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
                        "power_w": n.nvmlDeviceGetPowerUsage(h) / 1000.0,
                        "reasons": float(n.nvmlDeviceGetCurrentClocksEventReasons(h)),
                        "t": time.monotonic()}
            return _smi_read()
        except Exception:  # noqa: BLE001
            return None

    def summary(self) -> GpuState | None:
        states = [s for s in [self.before, *self._polls, self.after] if s]
        if not states:
            return None
        throttled = [s for s in states if int(s.get("reasons", 0)) & sum(THROTTLE_BITS)]
        reasons = sorted({name for s in throttled for bit, name in THROTTLE_BITS.items() if int(s["reasons"]) & bit})
        sm = [s["sm_mhz"] for s in states if "sm_mhz" in s]
        return {
            "before": self.before, "after": self.after, "polls": len(self._polls),
            "sm_mhz_min": min(sm) if sm else None, "sm_mhz_max": max(sm) if sm else None,
            "temp_c_max": max((s.get("temp_c", 0.0) for s in states), default=None),
            "power_w_max": max((s.get("power_w", 0.0) for s in states), default=None),
            "throttled_share": len(throttled) / len(states), "throttle_reasons": reasons,
            "source": "nvml" if self._nvml is not None else "nvidia-smi",
        }


def merge_gpu_state(a: GpuState | None, b: GpuState | None) -> GpuState | None:
    """Two `GpuMonitor.summary()`s of one job (its rounds) as one: the first round's `before`, the last's `after`,
    the extremes of clocks, temperature and power, every throttle reason seen, and the throttled share over all
    the states read. A job is flagged when ANY round was throttled, so its state must say so too (the last
    round's alone once read "GPU throttled during 0% of the measurement" on an H200)."""
    if not a or not b:
        return b or a

    def states(s: GpuState) -> int:
        return int(s.get("polls") or 0) + (s.get("before") is not None) + (s.get("after") is not None)

    def pick(key: _Extreme, f: Callable[[list[float]], float]) -> float | None:
        vals = [v for s in (a, b) if (v := s.get(key)) is not None]
        return f(vals) if vals else None

    na, nb = states(a), states(b)
    share = ((a.get("throttled_share") or 0.0) * na + (b.get("throttled_share") or 0.0) * nb) / max(1, na + nb)
    return {
        "before": a.get("before"), "after": b.get("after"),
        "polls": int(a.get("polls") or 0) + int(b.get("polls") or 0),
        "sm_mhz_min": pick("sm_mhz_min", min), "sm_mhz_max": pick("sm_mhz_max", max),
        "temp_c_max": pick("temp_c_max", max), "power_w_max": pick("power_w_max", max),
        "throttled_share": share,
        "throttle_reasons": sorted(set(a.get("throttle_reasons") or []) | set(b.get("throttle_reasons") or [])),
        "source": b.get("source") or a.get("source"),
    }


def _physical_index() -> int:
    """NVML counts every GPU; CUDA_VISIBLE_DEVICES renumbers them for CUDA. The first visible one's index."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(visible) if visible.isdigit() else 0


def _smi_read() -> dict[str, float] | None:
    tool = shutil.which("nvidia-smi")
    if not tool:
        return None
    out = subprocess.run(
        [tool, f"--id={_physical_index()}", "--query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw,"
         "clocks_throttle_reasons.active", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, timeout=10).stdout.strip()
    parts = [p.strip() for p in out.split(",")]
    if len(parts) < 5:
        return None
    return {"sm_mhz": float(parts[0]), "mem_mhz": float(parts[1]), "temp_c": float(parts[2]),
            "power_w": float(parts[3]), "reasons": float(int(parts[4], 16)), "t": time.monotonic()}
