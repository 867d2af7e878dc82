"""What the datasheets and the CPU's features say a machine can do: the theoretical peaks beside the measured ones.

CPU: flops per cycle per core from the SIMD features (AVX-512: 2 FMA pipes x 16 f32 lanes x 2 flops, except Zen 4,
which double-pumps 512-bit ops: the AVX2 rate; AVX2 + FMA: 2 x 8 x 2 = 32), times the clock, times the threads.
f16 / bf16 run at the f32 rate unless the CPU has avx512fp16 / avx512bf16 (then twice it: a dot product of pairs).
The clock is cpuinfo_max_freq when the kernel exposes it, else /proc/cpuinfo's "cpu MHz", which in a VM is the
nominal clock, not the boost: a measurement can beat such a figure, and the label says which it is.
Memory bandwidth on a CPU: unknown (it depends on the DIMMs and channels populated, which a VM does not show).

GPU: the vendor's datasheet figures by product name (dense, no sparsity), labelled as such.

Pure Python, no torch: the CLI reads these without importing it.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..hostcpu import last_level_cache_bytes

DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class Theory:
    """Theoretical peaks: GFLOP/s per dtype (None: unknown), GB/s (None: unknown), and how they were derived."""

    compute: dict[str, float | None] = field(default_factory=dict)
    bandwidth: float | None = None
    basis: str = "unknown"


#: datasheet figures (dense): name pattern -> (fp32 TFLOP/s, fp16/bf16 tensor TFLOP/s, memory GB/s, label).
#: First match wins, so the more specific names come first.
GPU_TABLE: tuple[tuple[str, float, float, float, str], ...] = (
    (r"H100.*PCI", 51.2, 756.0, 2000.0, "NVIDIA H100 PCIe datasheet"),
    (r"H100|GH100", 66.9, 989.4, 3350.0, "NVIDIA H100 SXM5 datasheet"),
    (r"H200", 66.9, 989.4, 4800.0, "NVIDIA H200 SXM datasheet"),
    (r"A100.*PCI.*40|A100.*40.*PCI", 19.5, 312.0, 1555.0, "NVIDIA A100 PCIe 40GB datasheet"),
    (r"A100.*PCI", 19.5, 312.0, 1935.0, "NVIDIA A100 PCIe 80GB datasheet"),
    (r"A100.*40", 19.5, 312.0, 1555.0, "NVIDIA A100 SXM 40GB datasheet"),
    (r"A100", 19.5, 312.0, 2039.0, "NVIDIA A100 SXM 80GB datasheet"),
    (r"L40S", 91.6, 362.05, 864.0, "NVIDIA L40S datasheet"),
    (r"MI355|gfx950", 157.3, 2500.0, 8000.0, "AMD Instinct MI355X datasheet"),
    (r"MI325", 163.4, 1307.4, 6000.0, "AMD Instinct MI325X datasheet"),
    (r"MI300X|gfx942", 163.4, 1307.4, 5300.0, "AMD Instinct MI300X datasheet"),
    (r"MI250X|gfx90a", 95.7, 383.0, 3277.0, "AMD Instinct MI250X datasheet"),
)


def gpu_theory(name: str | None, arch: str | None = None) -> Theory:
    """The datasheet peaks of a GPU by its product name (or arch); unknown when the table has no such GPU.
    The name is tried first: one arch (gfx942) covers products with different memory (MI300X, MI325X)."""
    for text in (name, arch):
        if not text:
            continue
        for pattern, f32, tensor, bw, label in GPU_TABLE:
            if re.search(pattern, text, re.IGNORECASE):
                return Theory(compute={"float32": f32 * 1e3, "float16": tensor * 1e3, "bfloat16": tensor * 1e3},
                              bandwidth=bw, basis=label)
    return Theory(compute=dict.fromkeys(DTYPES), basis=f"unknown GPU {name or arch!r}: no datasheet figures")


def f32_flops_per_cycle(cpu_name: str | None, features: frozenset[str] | set[str]) -> int | None:
    """f32 flops per cycle per core from the SIMD units; None when the features say nothing we know."""
    if "avx512f" in features:
        return 32 if (cpu_name or "").startswith("znver4") else 64   # Zen 4 double-pumps 512-bit FMAs
    if "fma" in features and "avx2" in features:
        return 32
    if "avx" in features:
        return 16
    return None


def cpu_clock_ghz() -> tuple[float | None, str]:
    """The core clock and where it came from: cpuinfo_max_freq (the boost clock) or /proc/cpuinfo (in a VM: the
    nominal clock); (None, "unknown")."""
    try:
        khz = int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text().strip())
        return khz / 1e6, "cpuinfo_max_freq"
    except (OSError, ValueError):
        pass
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("cpu mhz"):
                    return float(line.split(":", 1)[1]) / 1e3, "/proc/cpuinfo cpu MHz (nominal; boost unknown)"
    except (OSError, ValueError):
        pass
    return None, "unknown"


def cpu_theory(cpu_name: str | None, features: frozenset[str] | set[str], threads: int) -> Theory:
    """The CPU's theoretical GFLOP/s per dtype for `threads` cores (features x clock x threads); bandwidth unknown."""
    per_cycle = f32_flops_per_cycle(cpu_name, features)
    ghz, clock_src = cpu_clock_ghz()
    if per_cycle is None or ghz is None:
        why = "SIMD features unknown" if per_cycle is None else "clock unknown"
        return Theory(compute=dict.fromkeys(DTYPES), basis=f"unknown ({why})")
    f32 = per_cycle * ghz * threads
    compute: dict[str, float | None] = {
        "float32": f32,
        "float16": f32 * 2 if "avx512fp16" in features else f32,
        "bfloat16": f32 * 2 if "avx512bf16" in features else f32,
    }
    basis = (f"{per_cycle} f32 flops/cycle/core ({cpu_name or 'cpu'}) x {ghz:.2f} GHz ({clock_src}) "
             f"x {threads} thread{'s' if threads != 1 else ''}; bandwidth unknown")
    return Theory(compute=compute, bandwidth=None, basis=basis)


def cpu_stream_bytes() -> int:
    """The streaming kernels' buffer size on a CPU: 8x the last-level cache, at least 256 MiB (the cache then holds
    under an eighth of it, so what is measured is memory)."""
    llc = last_level_cache_bytes() or 0
    return max(256 << 20, 8 * llc)


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
