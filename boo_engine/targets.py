"""Compile targets: where a kernel runs, which iree-compile flags build it, which runtime driver loads it.

This is the ONE place target flags live. `Target.identity()` is part of every cache key: a `cpu` artifact is
built for the resolved host CPU (`--iree-llvmcpu-target-cpu=host`), so it only fits machines with the same CPU;
a GPU artifact fits any machine with that arch.

The per-op-class CPU flags a `cpu` target adds for THIS machine (`per_op_default_flags`) live in the cpu_defaults
package: the rules, the per-machine table `tune --defaults` measures, and which of them applies here.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .errors import TargetError
from .hostcpu import host_cpu_identity

Kind = Literal["cpu", "hip", "cuda"]

_HIP_ARCH = re.compile(r"^gfx[0-9]{2,3}[0-9a-z]$")  # gfx90a, gfx942, gfx1100, gfx1151
_CUDA_ARCH = re.compile(r"^sm_[0-9]{2,3}a?$")
#: archs IREE 3.13 cannot compile for: its known-target table has no Hopper or Blackwell entry, so every spelling
#: fails ("missing GPU target in #hal.executable.target" for sm_90 / sm_90a / sm_100 / sm_100a, "Unknown CUDA
#: target" for h100 / hopper). IREE's CUDA executables carry PTX, which the driver JIT-compiles for the GPU it
#: loads on, so these GPUs run an sm_80 build (verified on an H100: numerics pass, 4096^3 f16 matmul 1.26 ms as
#: sm_80 PTX, 1.23 ms as sm_86, 1.33 ms as sm_89): a request for them builds `CUDA_FALLBACK_ARCH` and says so.
_CUDA_UNSUPPORTED = {"sm_90", "sm_90a", "sm_100", "sm_100a", "sm_101", "sm_101a", "sm_103", "sm_103a"}
CUDA_FALLBACK_ARCH = "sm_80"


CPU_DRIVERS = ("local-sync", "local-task")

#: how a kernel is built (`Target.build`, `Variant.base`): BOO's own build (iree-turbine's export of the op, BOO's
#: compile flags: `boo_flags`), or ours (our export, the target's flags and this machine's per-op defaults)
BOO_BUILD = "boo"
OUR_BUILD = "ours"
BUILDS = (BOO_BUILD, OUR_BUILD)


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
    #: cpu: compile with this machine's per-op-class default flags (`per_op_default_flags`); False gives IREE's
    #: plain defaults (what `tune --defaults` measures the candidates against). In the flags, hence the cache key.
    per_op_defaults: bool = True
    #: cuda: the GPU arch the user asked for or the device has, when IREE cannot build for it and `arch` is the
    #: PTX fallback the driver JIT-compiles on load (e.g. "sm_90" on an H100); None otherwise. Not in the
    #: identity: the artifact is the `arch` build.
    runs_on: str | None = None
    #: how a variant that names no `base` builds its kernels, the baseline included: OUR_BUILD (the engine's
    #: default: tune, tune --defaults and the torch backends build this way) or BOO_BUILD (a run's `boo` column,
    #: what the front ends ask for). In the flags and the MLIR, hence the cache key; not in the identity.
    build: str = OUR_BUILD

    def __post_init__(self) -> None:
        checks: dict[str, Callable[[str], object]] = {
            "cpu": lambda a: a == "host", "hip": _HIP_ARCH.match, "cuda": _CUDA_ARCH.match}
        ok = checks.get(self.kind)
        if ok is None or not ok(self.arch):
            raise TargetError(f"invalid target kind={self.kind!r} arch={self.arch!r}: use parse_target('cpu' | "
                              "'hip:gfx942' | 'cuda:sm_80')")
        if self.threads < 1:
            raise TargetError(f"target threads must be >= 1, got {self.threads}")
        if self.build not in BUILDS:
            raise TargetError(f"target build {self.build!r}: expected one of {', '.join(BUILDS)}")

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

    def boo_flags(self) -> list[str]:
        """The flags iree-turbine's BOO compiles a kernel for this target with (3.9.0: runtime/device.py's
        DEVICE_TARGET_COMPILE_FLAGS and the arch flag its devices add, then kernel/boo/runtime/launch.py's
        `default_compiler_flags_callback`), in that order. Two spellings are IREE 3.13's instead of BOO's, which
        this compiler refuses ("Unknown command line argument"): the arch as `--iree-rocm-target` (BOO:
        `--iree-hip-target`) and `--iree-cuda-target` (BOO: `--iree-hal-cuda-llvm-target-arch`). The tuning spec
        BOO adds on HIP from $BOO_TUNING_SPEC_PATH is a variant here (variants/parsing.py), built on top of these."""
        if self.kind == "cpu":
            return ["--iree-hal-target-backends=llvm-cpu", "--iree-llvmcpu-target-cpu-features=host",
                    "--iree-opt-level=O1"]
        if self.kind == "hip":
            return ["--iree-hal-target-backends=rocm", f"--iree-rocm-target={self.arch}", "--iree-opt-level=O3",
                    "--iree-dispatch-creation-enable-fuse-padding-into-linalg-consumer-ops",
                    "--iree-dispatch-creation-enable-split-reduction",
                    "--iree-preprocessing-pass-pipeline=builtin.module("
                    "iree-preprocessing-convert-conv-filter-to-channels-last)"]
        return ["--iree-hal-target-backends=cuda", f"--iree-cuda-target={self.arch}", "--iree-opt-level=O1"]

    @property
    def notice(self) -> str | None:
        """One line for the front ends when the build differs from the GPU asked for (None otherwise)."""
        if self.runs_on is None:
            return None
        return (f"cuda:{self.runs_on}: IREE 3.13 cannot compile for {self.runs_on} (no entry in its GPU target "
                f"table); building {self.arch} PTX, which the CUDA driver JIT-compiles for {self.runs_on} "
                "when each kernel loads")

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
        archs = detect_gpu_archs(self.kind)
        if self.kind == "cuda":   # PTX runs on any GPU of the same or a newer compute capability
            return any(_sm_number(a) >= _sm_number(self.arch) for a in archs)
        return self.arch in archs


def _sm_number(arch: str) -> int:
    """sm_80 -> 80, sm_90a -> 90, sm_120 -> 120."""
    return int(re.sub(r"[^0-9]", "", arch) or 0)


def cuda_target(arch: str) -> Target:
    """The cuda Target for a GPU arch: itself where IREE can build for it, else the PTX fallback (`runs_on`)."""
    if arch in _CUDA_UNSUPPORTED:
        return Target("cuda", CUDA_FALLBACK_ARCH, runs_on=arch)
    return Target("cuda", arch)


#: the names of every flag `Target.compile_flags` gives, whatever the kind (what "the target's own flags" are)
_TARGET_FLAG_NAMES = {f.split("=", 1)[0] for t in (Target("cpu"), Target("hip", "gfx942"), Target("cuda", "sm_80"))
                      for f in t.compile_flags() + t.boo_flags()[:2]}


def is_target_flag(flag: str) -> bool:
    """True for a flag that names the compile target (device, backend, CPU or GPU arch), not a choice of ours."""
    return flag.split("=", 1)[0] in _TARGET_FLAG_NAMES


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
        return cuda_target(arch)
    raise TargetError(f"unknown target {raw!r}: expected cpu, hip:<gfx arch> or cuda:<sm arch>")


def default_target() -> Target:
    """The first detected GPU (hip before cuda), else the cpu. Never raises. An H100 (sm_90) gives cuda:sm_80 with
    `runs_on="sm_90"` (see `_CUDA_UNSUPPORTED`)."""
    for kind in ("hip", "cuda"):
        archs = detect_gpu_archs(kind)
        if archs:
            return cuda_target(archs[0]) if kind == "cuda" else Target(kind, archs[0])
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
