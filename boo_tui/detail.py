"""The detail pane's content for one job: everything needed to understand and reproduce its number."""
from __future__ import annotations

import shlex
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from boo_engine.api import (
    TORCH,
    Comparison,
    JobResult,
    breakdown_lines,
    build_label,
    chosen_flags,
    format_us,
    verdict_legend,
)

from .cells import ci_text, verdict_text
from .run_model import JobView, describe_command, shape_label


def _kv_table() -> Table:
    t = Table.grid(padding=(0, 1))
    t.add_column(style="bold cyan", no_wrap=True)
    t.add_column(overflow="fold")
    return t


def _fmt(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_fmt(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, dict) for v in value):
        return "\n".join(_fmt(v) for v in value)
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, (list, tuple)) for v in value):
            return ", ".join("x".join(str(d) for d in v) for v in value)
        return "x".join(str(v) for v in value) if all(isinstance(v, int) for v in value) else str(list(value))
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def render_detail(view: JobView, comparison: Comparison | None = None,
                  min_effect: float | None = None) -> RenderableType:
    """Everything about one job; `comparison`: the engine's verdict on it against the baseline (with the run's
    `min_effect`, which the legend states). One section per part of the answer, each left out when it has
    nothing to say."""
    r = view.result
    parts: list[RenderableType] = [_job(view)]
    if r.breakdown:   # a model (`boo-tui model`): where a pass's time goes, per kernel of ours
        parts += [Text("\nwhere the time goes (one pass)", style="bold"), Text("\n".join(breakdown_lines(r.breakdown)))]
    parts += _signature(r.command) if r.op != "model" else []
    if r.stats is not None:
        parts += [Text("\nlatency (us per call)", style="bold"), _latency(r)]
    elif view.samples_us:
        parts.append(Text(f"\n{len(view.samples_us)} samples so far", style="bold"))
    if comparison is not None:
        parts += [Text("\nvs baseline", style="bold"), _versus(r, comparison, min_effect)]
    if r.numerics is not None:
        t = _kv_table()
        t.add_row("verdict", Text(r.numerics.verdict, style="bold red" if r.numerics.failed else "green"))
        for k, v in r.numerics.stats.items():
            t.add_row(str(k), _fmt(v))
        parts += [Text("\nnumerics", style="bold"), t]
    if r.compile is not None:
        parts += [Text("\ncompile", style="bold"), _compiled(r)]
        if r.compile.error:
            parts += [Text("\ncompiler output", style="bold red"), Text(r.compile.error[-4000:])]
    if view.log:
        parts += [Text("\nlog", style="bold"), Text("\n".join(view.log[-20:]))]
    return Group(*parts)


def _job(view: JobView) -> Table:
    """What the job is: its command, shape, kernel, column and status, where it ran, its error."""
    r = view.result
    head = _kv_table()
    head.add_row("command", r.command)
    if shape_label(r.command):
        head.add_row("shape", shape_label(r.command))
    head.add_row("kernel", r.func_name)
    head.add_row("job", f"{r.variant} / {r.backend} on {r.target}   [{view.status}]"
                 + (f"  {view.detail}" if view.detail else ""))
    for key, value in (("device", r.device),    # where it was measured (--devices: one of several)
                       ("node", r.node),        # --ray: the cluster node whose actor measured it
                       ("source", r.source)):
        if value:
            head.add_row(key, value)
    if r.error:
        head.add_row("error", Text(r.error, style="bold red"))
    return head


_SIGNATURE_FIRST = ("op", "mode", "dtype", "input_shapes", "output_shapes")


def _signature(command: str) -> list[RenderableType]:
    """The kernel's signature (the main facts first), or why the command has none."""
    sig = describe_command(command)
    if sig is None:
        return []
    if isinstance(sig, str):
        return [Text("\nsignature", style="bold"), Text(sig, style="red")]
    t = _kv_table()
    for key in [k for k in _SIGNATURE_FIRST if k in sig] + [k for k in sig if k not in _SIGNATURE_FIRST]:
        t.add_row(key, _fmt(sig[key]))
    return [Text("\nsignature", style="bold"), t]


def _latency(r: JobResult) -> Table:
    """The latency statistics, against the roofline, and how it was timed."""
    st = r.stats
    assert st is not None
    t = _kv_table()
    t.add_row("median", f"{format_us(st.median_us)}   (p10 {format_us(st.p10_us)}, p90 {format_us(st.p90_us)}, "
                        f"IQR {format_us(st.iqr_us)})")
    t.add_row("min/mean/max", f"{format_us(st.min_us)} / {format_us(st.mean_us)} / {format_us(st.max_us)}  "
                              f"sd {format_us(st.stddev_us)}  n={st.n}")
    if st.gflops is not None:
        t.add_row("throughput", f"{st.gflops:.2f} GFLOP/s" + (f", {st.gbps:.2f} GB/s" if st.gbps else ""))
    if r.pct_roofline is not None:
        above = (r.device_detail or {}).get("roofline")
        t.add_row("roofline", Text(f"{r.pct_roofline:.1f}% of the least time its FLOPs and bytes allow on "
                                   f"this machine's measured peaks" + (f": {above}" if above else ""),
                                   style="yellow" if above else ""))
    if r.device_us is not None:   # GPU: the dispatches' own device time (profiler), beside the wall time
        t.add_row("dispatch", f"{format_us(r.device_us)} device time of the dispatches per call (profiler); "
                              "the median above is the wall time per call")
    t.add_row("timing", f"block k={r.block_k}, {r.warmup_calls} warm-up calls discarded, {r.cache_mode} caches"
              + (f", host load {r.host_load:.2f}" if r.host_load is not None else ""))
    gpu = (r.device_detail or {}).get("gpu_state")
    if gpu:
        t.add_row("GPU", f"SM {gpu.get('sm_mhz_min'):.0f}-{gpu.get('sm_mhz_max'):.0f} MHz, "
                         f"{gpu.get('temp_c_max'):.0f} C, {gpu.get('power_w_max'):.0f} W max"
                  + (f", throttled ({', '.join(gpu.get('throttle_reasons') or [])})" if r.throttled else ""))
    if r.noisy:
        t.add_row("noisy", Text(r.noise_reason or "yes", style="yellow"))
    return t


def _versus(r: JobResult, comparison: Comparison, min_effect: float | None) -> Table:
    """The engine's verdict against the baseline: the ratio with its interval, the test, what it means."""
    t = _kv_table()
    reference = r.backend == TORCH
    t.add_row("ratio", Text(ci_text(comparison, reference=reference),
                            style=verdict_text(comparison, reference=reference).style))
    t.add_row("test", f"Mann-Whitney p={comparison.p_value:.3g}, n {comparison.n_baseline} baseline / "
                      f"{comparison.n_variant} this job")
    if min_effect is not None:
        t.add_row("meaning", Text(verdict_legend(min_effect), style="dim"))
    return t


def _compiled(r: JobResult) -> Table:
    """How the kernel was built: cache hit or seconds, the build, the artifact, the flags and the command."""
    c = r.compile
    assert c is not None
    t = _kv_table()
    t.add_row("how", "cache hit" if c.cache_hit else f"{c.seconds:.2f} s")
    if build_label(r):   # BOO's build (the baseline) or ours, and for best what chose its configuration
        t.add_row("build", str(build_label(r)))
    for key, value in (("artifact", c.artifact), ("cache key", c.key),
                       ("dispatches", None if c.num_dispatches is None else str(c.num_dispatches)),
                       # ops IREE's torch input could not lower, decomposed by torch first
                       ("decomposed", ", ".join(c.decompositions or ()))):
        if value:
            t.add_row(key, value)
    if c.spec_applied is not None:
        t.add_row("spec applied", Text(str(c.spec_applied), style="green" if c.spec_applied else "yellow"))
    if c.compiler_version:
        t.add_row("compiler", c.compiler_version)
    if c.command:  # what this kernel was built with beyond the target: per-op defaults, the variant's own
        t.add_row("flags", " ".join(chosen_flags(c.command)) or "none beyond the target's (IREE's defaults)")
        t.add_row("command", shlex.join(c.command))
    return t


def reproducer_text(view: JobView | None) -> str:
    if view is None:
        return ""
    return view.result.reproducer or ""
