"""Where a compiled model's pass spends its time: per kernel of ours, and the rest.

Passes run with `nn.record_calls()`, which times each of our kernel calls from the moment torch hands the tensors
over to the moment the results are torch tensors again (the kernel plus our ~12 us of hand-over). What is left of
the pass is "other": the ops the nested backend runs, the graph's glue, autograd and Python.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from ..nn.backend import BooBackend


class KernelShare(TypedDict):
    """One kernel of ours in a breakdown: its calls and time per pass, and that time's share of the pass (%)."""

    kernel: str
    variant: str
    op: str
    label: str
    calls_per_pass: float
    us_per_pass: float
    share: float | None


def measure_breakdown(run_pass: Callable[[], object], *, passes: int = 20, min_time_s: float = 0.3,
                      backend: BooBackend | None = None) -> dict[str, Any]:
    """Run at least `passes` passes (and `min_time_s`) recording our kernels' calls; the JSON-able breakdown."""
    from ..nn import record_calls

    run_pass()   # one unrecorded pass: nothing of a first call in the figures
    pass_ns: list[int] = []
    with record_calls() as log:
        t_end = time.perf_counter() + min_time_s
        while len(pass_ns) < passes or time.perf_counter() < t_end:
            t0 = time.perf_counter_ns()
            run_pass()
            pass_ns.append(time.perf_counter_ns() - t0)
            if len(pass_ns) >= 10 * passes:
                break
    n = len(pass_ns)
    pass_us = sorted(pass_ns)[n // 2] / 1e3
    mean_pass_us = sum(pass_ns) / n / 1e3
    kernels: list[KernelShare] = []
    for (func_name, variant), t in log.tallies.items():
        us = t.total_ns / n / 1e3
        kernels.append({"kernel": func_name, "variant": variant, "op": t.sig.op,
                        "label": getattr(t.sig, "shape_label", func_name), "calls_per_pass": t.calls / n,
                        "us_per_pass": us, "share": us / mean_pass_us * 100 if mean_pass_us else None})
    kernels.sort(key=lambda k: -k["us_per_pass"])
    ours = sum(k["us_per_pass"] for k in kernels)
    out: dict[str, Any] = {
        "passes": n, "pass_us_median": pass_us, "pass_us_mean": mean_pass_us, "kernels": kernels,
        "ours_us": ours, "other_us": max(0.0, mean_pass_us - ours),
        "other_share": max(0.0, mean_pass_us - ours) / mean_pass_us * 100 if mean_pass_us else None,
    }
    if backend is not None:
        out["fallbacks"] = [str(f) for f in getattr(backend, "fallbacks", []) or []]
        out["kernels_compiled_s"] = getattr(backend, "compile_s", None)
        out["fused_ops"] = len(getattr(backend, "kernels", []) or [])
    return out


def breakdown_lines(b: dict[str, Any], limit: int = 12) -> list[str]:
    """Plain-text lines: one per kernel (largest first), then the rest and the fallbacks."""
    lines = [f"pass {b['pass_us_mean']:.1f} us (mean of {b['passes']}): our kernels {b['ours_us']:.1f} us, "
             f"other {b['other_us']:.1f} us ({(b.get('other_share') or 0):.0f}%)"]
    ks: Sequence[dict[str, Any]] = b.get("kernels") or []
    for k in ks[:limit]:
        lines.append(f"  {k['us_per_pass']:9.1f} us  {(k.get('share') or 0):5.1f}%  x{k['calls_per_pass']:g}  "
                     f"{k['op']} {k['label']}  [{k['kernel']}]")
    if len(ks) > limit:
        lines.append(f"  ... {len(ks) - limit} more kernels")
    fb = b.get("fallbacks") or []
    if fb:
        lines.append(f"left to the nested backend: {', '.join(fb[:8])}" + (" ..." if len(fb) > 8 else ""))
    return lines
