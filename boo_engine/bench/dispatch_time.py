"""The dispatches' device time per call, beside the wall time the harness measures (`BenchOutcome.device_us`): IREE's
own HAL profiler where the runtime's driver implements it (bench/ireeprof.py; the CPU drivers do, 3.13's CUDA
driver does not), else CUPTI through torch.profiler (bench/gpu_timing.py, GPUs only). Runs in the worker process.
"""
from __future__ import annotations

import os
import statistics
import tempfile
from collections.abc import Callable

from ..errors import BooError, one_line
from ..results import IREE, CacheMode
from ..targets import runtime_driver
from .messages import BenchSpec, DispatchTiming

#: device timing of an IREE kernel: its profiled calls take about this long at most (`_profiled_calls`)
PROFILE_BUDGET_S = 2.0


def dispatch_time(spec: BenchSpec, device: str, samples_us: list[float],
                   cupti: Callable[[], DispatchTiming]) -> DispatchTiming:
    """The dispatches' time per call, for `BenchOutcome.device_us`: an IREE kernel's from IREE's own profiler
    (`ireeprof`: its reproducer command run under the HAL profiler, where the driver implements it: the CPU
    drivers do, 3.13's CUDA driver does not), else, and for torch, from CUPTI (`cupti`, GPU only). Why IREE's
    profiler was not used is kept as "iree_profile_error"."""
    why = None
    if spec.backend == IREE:
        if spec.cache_mode == CacheMode.COLD:
            # iree-benchmark-module runs its calls back to back: it cannot flush the caches between them
            why = "cold caches: iree-benchmark-module cannot flush between calls"
        else:
            got = iree_profile(spec, samples_us)
            if "error" not in got:
                return got
            why = got["error"]
    out: DispatchTiming = cupti() if device != "cpu" else {
        "error": f"no other dispatch profiler on the CPU (iree-profile: {why})"}
    if why:
        out["iree_profile_error"] = why
    return out


def iree_profile(spec: BenchSpec, samples_us: list[float]) -> DispatchTiming:
    """The kernel's reproducer command (inputs of the job's seed or splat, written beside the artifact, or in a
    temporary folder when that is read-only) run under IREE's profiler. The .ireeprof bundle goes to that
    temporary folder and is deleted: only its summary is kept (a bundle is per measurement, while the artifact's
    folder is the kernel cache's, keyed by content and possibly shared or read-only)."""
    from . import ireeprof
    from .reproducer import write_reproducer

    assert spec.vmfb_path is not None
    why = ireeprof.refusal(runtime_driver(spec.driver, spec.threads))
    if why is not None:   # (CUDA in IREE 3.13: every job would write its inputs only to hear it again)
        return {"error": f"{why} (refused earlier in this process: not tried again)", "source": ireeprof.SOURCE}
    try:
        with tempfile.TemporaryDirectory(prefix="boo-ireeprof-") as tmp:
            cmd = write_reproducer(os.path.dirname(os.path.abspath(spec.vmfb_path)), spec.sig, spec.seed,
                                   spec.driver, spec.threads, spec.function, vmfb_path=spec.vmfb_path,
                                   splat_value=spec.splat_value, scratch_dir=tmp)
            return ireeprof.profile(cmd, tmp, calls=_profiled_calls(samples_us))
    except (BooError, OSError) as e:
        return {"error": one_line(e), "source": ireeprof.SOURCE}


def _profiled_calls(samples_us: list[float]) -> int:
    """ireeprof's PROFILED_CALLS, fewer for a slow kernel: about PROFILE_BUDGET_S of calls, never below 3."""
    from .ireeprof import PROFILED_CALLS

    if not samples_us:
        return PROFILED_CALLS
    return max(3, min(PROFILED_CALLS, int(PROFILE_BUDGET_S * 1e6 / max(statistics.median(samples_us), 1.0))))
