"""Compile targets: where a kernel runs, which iree-compile flags build it, which runtime driver loads it.

This is the ONE place target flags live. `Target.identity()` is part of every cache key: a `cpu` artifact is
built for the resolved host CPU (`--iree-llvmcpu-target-cpu=host`), so it only fits machines with the same CPU;
a GPU artifact fits any machine with that arch.

`per_op_default_flags()` holds the per-op-class CPU flags chosen by measurement (benchmarks/bench_cpu_flags.py):
IREE 3.13's defaults are several times slower than they need to be for some conv layouts.
"""
from __future__ import annotations

import functools
import hashlib
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .errors import TargetError

if TYPE_CHECKING:  # pragma: no cover
    from .ops.base import OpSignature

Kind = Literal["cpu", "hip", "cuda"]

_HIP_ARCH = re.compile(r"^gfx[0-9]{2,3}[0-9a-z]$")  # gfx90a, gfx942, gfx1100, gfx1151
_CUDA_ARCH = re.compile(r"^sm_[0-9]{2,3}a?$")
#: archs IREE 3.13 accepts by pattern but cannot compile for ("missing GPU target in #hal.executable.target"):
#: refused up front so the user gets one clear line instead of a compiler error per kernel.
_CUDA_UNSUPPORTED = {"sm_90", "sm_90a", "sm_100", "sm_100a"}


CPU_DRIVERS = ("local-sync", "local-task")


def cpu_driver(threads: int) -> str:
    """THE CPU driver rule: one thread runs on `local-sync` (inline, the most stable measurement, and what the
    reproducer uses); more run on `local-task` with that many workers."""
    return "local-sync" if threads <= 1 else "local-task"


def runtime_driver(driver_or_kind: str, threads: int = 1) -> str:
    """The IREE driver that runs a kernel: for the CPU (`cpu`, `local-sync`, `local-task`) the `cpu_driver` rule
    for `threads`, otherwise the GPU driver as given (`hip`, `cuda`)."""
    if driver_or_kind == "cpu" or driver_or_kind in CPU_DRIVERS:
        return cpu_driver(threads)
    return driver_or_kind


@dataclass(frozen=True)
class Target:
    """A compile target. `kind` is cpu / hip / cuda; `arch` is "host" for cpu, gfxNNN for hip, sm_NN for cuda.

    `threads` only matters for the cpu runtime: 1 (the default, the most stable measurement) loads kernels on
    `local-sync`; more loads them on `local-task` with that many workers. It is not part of the compiled
    artifact, so it is not in `identity()`.
    """

    kind: Kind
    arch: str = "host"
    threads: int = 1

    def __post_init__(self) -> None:
        checks: dict[str, Callable[[str], object]] = {
            "cpu": lambda a: a == "host", "hip": _HIP_ARCH.match, "cuda": _CUDA_ARCH.match}
        ok = checks.get(self.kind)
        if ok is None or not ok(self.arch):
            raise TargetError(f"invalid target kind={self.kind!r} arch={self.arch!r}: use parse_target('cpu' | "
                              "'hip:gfx942' | 'cuda:sm_80')")
        if self.threads < 1:
            raise TargetError(f"target threads must be >= 1, got {self.threads}")

    @property
    def name(self) -> str:
        return "cpu" if self.kind == "cpu" else f"{self.kind}:{self.arch}"

    def __str__(self) -> str:
        return self.name

    def compile_flags(self) -> list[str]:
        if self.kind == "cpu":
            return [
                "--iree-hal-target-device=local",
                "--iree-hal-local-target-device-backends=llvm-cpu",
                "--iree-llvmcpu-target-cpu=host",
            ]
        if self.kind == "hip":
            return ["--iree-hal-target-device=hip", f"--iree-rocm-target={self.arch}"]
        return ["--iree-hal-target-device=cuda", f"--iree-cuda-target={self.arch}"]

    @property
    def driver(self) -> str:
        """IREE runtime driver that loads this target's artifacts."""
        return runtime_driver(self.kind, self.threads)

    def identity(self) -> str:
        """What the compiled code depends on, for the cache key: the host CPU (model + feature flags) for cpu,
        the arch for GPUs."""
        if self.kind == "cpu":
            return f"cpu:{host_cpu_identity()}"
        return self.name

    def can_run(self) -> bool:
        """Is a device for this target present on this machine?"""
        if self.kind == "cpu":
            return True
        return self.arch in detect_gpu_archs(self.kind)


def parse_target(text: str) -> Target:
    """`cpu`, `hip:gfx942`, `cuda:sm_80` -> Target; TargetError with one line otherwise."""
    raw = (text or "").strip()
    kind, _, arch = raw.partition(":")
    kind = kind.lower()
    if kind in ("cpu", "llvm-cpu", "host"):
        if arch and arch != "host":
            raise TargetError(f"target {raw!r}: the cpu target takes no arch (it builds for this host's CPU)")
        return Target("cpu")
    if kind in ("hip", "rocm", "amdgpu"):
        if not arch:
            raise TargetError(f"target {raw!r}: hip needs an arch, e.g. hip:gfx942")
        if not _HIP_ARCH.match(arch):
            raise TargetError(f"target {raw!r}: {arch!r} is not a gfx arch (expected e.g. gfx942, gfx90a, gfx1100)")
        return Target("hip", arch)
    if kind in ("cuda", "nvidia"):
        if not arch:
            raise TargetError(f"target {raw!r}: cuda needs an arch, e.g. cuda:sm_80")
        if not _CUDA_ARCH.match(arch):
            raise TargetError(f"target {raw!r}: {arch!r} is not an sm arch (expected sm_NN, e.g. sm_80)")
        if arch in _CUDA_UNSUPPORTED:
            raise TargetError(
                f"target {raw!r}: IREE 3.13 cannot compile for {arch} (missing GPU target in its table); "
                "use sm_80/sm_86/sm_89/sm_120")
        return Target("cuda", arch)
    raise TargetError(f"unknown target {raw!r}: expected cpu, hip:<gfx arch> or cuda:<sm arch>")


def default_target() -> Target:
    """The first detected GPU (hip before cuda), else the cpu. Never raises."""
    for kind in ("hip", "cuda"):
        archs = detect_gpu_archs(kind)
        if archs:
            return Target(kind, archs[0])
    return Target("cpu")


# ---- detection ---------------------------------------------------------------------------------------------

@functools.cache
def detect_gpu_archs(kind: str) -> tuple[str, ...]:
    """Archs of the `kind` GPUs on this machine; () when none or when anything goes wrong.

    Asks the IREE runtime first (creating the driver fails cheaply when the vendor library is absent), and only
    then asks the system for the arch, which the HAL device list does not carry."""
    try:
        import iree.runtime as rt

        if kind not in rt.query_available_drivers():
            return ()
        if not rt.get_driver(kind).query_available_devices():
            return ()
    except Exception:  # noqa: BLE001 - detection must never crash the caller
        return ()
    try:
        return _hip_archs() if kind == "hip" else _cuda_archs()
    except Exception:  # noqa: BLE001
        return ()


def gpu_device_count(kind: str) -> int:
    """How many `kind` ("hip", "cuda") devices the IREE runtime sees here (after *_VISIBLE_DEVICES); 0 when none
    or when anything goes wrong."""
    try:
        import iree.runtime as rt

        if kind not in rt.query_available_drivers():
            return 0
        return len(rt.get_driver(kind).query_available_devices())
    except Exception:  # noqa: BLE001 - detection must never crash the caller
        return 0


def _hip_archs() -> tuple[str, ...]:
    archs: list[str] = []
    tool = shutil.which("amdgpu-arch") or shutil.which("rocm_agent_enumerator")
    if tool:
        out = subprocess.run([tool], capture_output=True, text=True, timeout=10).stdout
        archs = [a.strip() for a in out.split() if _HIP_ARCH.match(a.strip()) and a.strip() != "gfx000"]
    if not archs:  # kfd topology: gfx_target_version 90402 -> gfx942
        nodes = "/sys/class/kfd/kfd/topology/nodes"
        for node in sorted(os.listdir(nodes)) if os.path.isdir(nodes) else []:
            try:
                props = open(os.path.join(nodes, node, "properties")).read()
            except OSError:
                continue
            m = re.search(r"gfx_target_version\s+(\d+)", props)
            if m and int(m.group(1)):
                v = int(m.group(1))
                archs.append(f"gfx{v // 10000}{(v // 100) % 100:x}{v % 100:x}")
    return tuple(dict.fromkeys(archs))


def _cuda_archs() -> tuple[str, ...]:
    tool = shutil.which("nvidia-smi")
    if not tool:
        return ()
    out = subprocess.run([tool, "--query-gpu=compute_cap", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=10).stdout
    archs = ["sm_" + line.strip().replace(".", "") for line in out.splitlines() if line.strip()]
    return tuple(dict.fromkeys(archs))


@functools.cache
def host_cpu_identity() -> str:
    """A stable name for the host CPU as LLVM's `host` resolution sees it: vendor, family, model, stepping and a
    digest of the feature flags (cpuid decides both the CPU name and the features LLVM targets)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor is enough: all cores of a machine are the same model
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    flags = " ".join(sorted((fields.get("flags") or fields.get("Features") or "").split()))
    parts = [platform.machine(), fields.get("vendor_id", ""), fields.get("cpu family", ""),
             fields.get("model", ""), fields.get("stepping", ""), fields.get("model name", platform.processor())]
    digest = hashlib.sha256(flags.encode()).hexdigest()[:12]
    return "/".join(p.replace("/", "_") for p in parts) + f"/features-{digest}"


# ---- per-op-class CPU defaults -----------------------------------------------------------------------------

def per_op_default_flags(sig: OpSignature, target: Target) -> list[str]:
    """Extra iree-compile flags for this kind of kernel on this target, chosen by measurement.

    Only cpu convolutions in forward mode get any. Measured with benchmarks/bench_cpu_flags.py (IREE 3.13, one
    thread, local-sync, 2-core Zen 5; us per call, min over 5-9 interleaved rounds of the round median):

    | class (forward)          | IREE default | im2col | data-tiling | rule        |
    |--------------------------|--------------|--------|-------------|-------------|
    | f32 NCHW 3x3 n2 c64 28^2 | 1287         | 1102   | 1292        | im2col      |
    | f32 NCHW 3x3 s2 + bias   | 771          | 196    | 778         | im2col      |
    | f32 NCHW 3x3 g4          | 1313         | 1307   | 1257        | im2col (tie)|
    | f32 NCHW 1x1 c35         | 491          | 78     | 530         | im2col      |
    | f32 NCHW 1x1 c64         | 545          | 101    | 558         | im2col      |
    | f32 NHWC 3x3 c64         | 21306        | 2568   | 21496       | im2col      |
    | f32 NHWC 1x1 c128->384   | 4868..5378   | 19594+ | 4461..10141 | none (see below) |
    | f32 NHWC 1x1 c64         | 75           | 283    | 79          | none (tie)  |
    | bf16 NHWC 1x1 c35        | 439          | FAIL   | 105         | data-tiling |
    | fp16 NHWC 1x1 c35        | 376          | FAIL   | 187         | data-tiling |
    | bf16/fp16 NCHW 1x1, 3x3  | ~ties (527 vs 535, 1774 vs 1738, 7223 vs 7230) | FAIL | | none |

    Not chosen: im2col for fp16/bf16 (fails to compile: "'arith.addf' op requires the same type for all
    operands and results"); anything for backward convs (repeat runs disagreed by 2-5x on this shared machine:
    no rule without evidence); data-tiling for f32 NHWC 1x1 convs and f32 gemms (8-10% and 1.15-1.35x faster in
    5 of 6 runs, but the conv was 2x SLOWER in one, and iree-facts.md records that data-tiling breaks tuning specs
    on matmul-like kernels, which variants must be able to use; fp16/bf16 NHWC 1x1 gain 2-4x, so they get it).
    A variant's own flags come later on the command line and win (e.g. `--iree-global-opt-use-im2col-for-convs=false`).
    """
    if target.kind != "cpu" or sig.op != "conv":
        return []
    return _cpu_conv_flags(sig)


IM2COL = "--iree-global-opt-use-im2col-for-convs"
DATA_TILING = "--iree-opt-data-tiling"


def _cpu_conv_flags(sig: OpSignature) -> list[str]:
    d = sig.describe()
    if d.get("mode", sig.mode) != "forward" or d.get("transposed"):
        return []
    layout = str(d.get("in_layout") or "").upper()
    channels_last = len(layout) >= 3 and layout.endswith("C")
    fil = d.get("filter_spatial") or _filter_spatial(d, sig)
    pointwise = bool(fil) and all(int(k) == 1 for k in fil)
    if sig.dtype_name == "float32":
        return [] if channels_last and pointwise else [IM2COL]  # im2col slows NHWC 1x1 down 4x
    # fp16 / bf16: im2col does not compile; data-tiling is 2-4x faster on NHWC 1x1 and neutral elsewhere
    return [DATA_TILING] if channels_last and pointwise else []


def _filter_spatial(d: dict, sig: OpSignature) -> tuple[int, ...]:
    """Filter spatial sizes from the filter shape and layout, when describe() has no filter_spatial."""
    fl = str(d.get("fil_layout") or "").upper()
    shapes = sig.input_shapes()
    if fl and len(shapes) >= 2 and len(shapes[1]) == len(fl):
        return tuple(int(s) for s, c in zip(shapes[1], fl) if c not in "NCKF")
    return ()
