"""Compile targets: where a kernel runs, which iree-compile flags build it, which runtime driver loads it.

This is the ONE place target flags live. `Target.identity()` is part of every cache key: a `cpu` artifact is
built for the resolved host CPU (`--iree-llvmcpu-target-cpu=host`), so it only fits machines with the same CPU;
a GPU artifact fits any machine with that arch.

`per_op_default_flags()` gives the per-op-class CPU flags for THIS machine: the table `tune --defaults` measured
here (defaults_table.py), else rules keyed on the resolved CPU's features (`host_cpu()`, hostcpu.py). IREE 3.13's
defaults are several times slower than they need to be for some conv layouts, and the best flags differ by CPU.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from . import locations
from .defaults_table import TableState, machine_key, read_state
from .errors import TargetError
from .hostcpu import HostCpu, host_cpu_identity, resolve_host_cpu

if TYPE_CHECKING:  # pragma: no cover
    from .ops.base import OpSignature

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


# ---- the host CPU as the compiler resolves it --------------------------------------------------------------

def host_cpu() -> HostCpu:
    """The host CPU as `--iree-llvmcpu-target-cpu=host` resolves it (LLVM's name, e.g. znver3, and its features):
    asked of iree-compile once per machine and compiler build, then read from a small file (hostcpu.py)."""
    return resolve_host_cpu(Target("cpu").compile_flags())


# ---- per-op-class CPU defaults -----------------------------------------------------------------------------

IM2COL = "--iree-global-opt-use-im2col-for-convs"
DATA_TILING = "--iree-opt-data-tiling"


@dataclass(frozen=True)
class OpClass:
    """The class of a kernel that per-op defaults are chosen for: op, dtype, layout (channels-last or not),
    filter (pointwise 1x1 or not), mode (forward / backward) and, for convs, what decides how to write the
    kernel (`detail`: the gradient a backward conv computes, `data`, `data-strided`, `weight`, `bias` or `all`,
    `strided` for a forward conv, and `grouped`). `str()` is its key in the defaults table, e.g.
    `conv:bfloat16:nhwc:1x1:forward` or `conv:float32:nchw:kxk:backward:data-strided`; layout and filter are `-`
    for ops without them."""

    op: str             # conv, conv-transposed, gemm, layernorm, bnorm
    dtype: str          # float32, float16, bfloat16
    layout: str = "-"   # nhwc (channels-last) / nchw, convs only
    filter: str = "-"   # 1x1 / kxk, convs only
    mode: str = "forward"
    detail: str = ""    # convs: the gradient kind, "grouped" (dash-joined); "" for a plain forward conv

    def __str__(self) -> str:
        base = f"{self.op}:{self.dtype}:{self.layout}:{self.filter}:{self.mode}"
        return f"{base}:{self.detail}" if self.detail else base

    @property
    def is_conv(self) -> bool:
        return self.op.startswith("conv")

    @property
    def channels_last(self) -> bool:
        return self.layout == "nhwc"

    @property
    def pointwise(self) -> bool:
        return self.filter == "1x1"


_GRADIENT = {"input_backward": "data", "weight_backward": "weight", "bias_backward": "bias"}


def op_class(sig: OpSignature) -> OpClass:
    """The class `sig`'s kernel belongs to (no torch import: describe() is plain data)."""
    d = sig.describe()
    word = str(d.get("mode", sig.mode))
    mode = "forward" if word.startswith("forward") else "backward"
    if sig.op != "conv":
        return OpClass(sig.op, sig.dtype_name, mode=mode)
    layout = str(d.get("in_layout") or "").upper()
    fil = d.get("filter_spatial") or _filter_spatial(d, sig)
    parts = []
    strided = any(int(s) > 1 for s in d.get("stride") or ())
    if mode == "backward":
        kind = _GRADIENT.get(word, "all")
        parts.append(f"{kind}-strided" if kind == "data" and strided else kind)
    elif strided:
        parts.append("strided")
    if int(d.get("groups") or 1) > 1:
        parts.append("grouped")
    return OpClass("conv-transposed" if d.get("transposed") else "conv", sig.dtype_name,
                   "nhwc" if len(layout) >= 3 and layout.endswith("C") else "nchw",
                   "1x1" if fil and all(int(k) == 1 for k in fil) else "kxk", mode, "-".join(parts))


def rule_flags(cls: OpClass, features: Collection[str]) -> list[str]:
    """The built-in per-op-class CPU flags, for classes the machine's table (`tune --defaults`) does not cover.
    Rules only where the cause is known, keyed on the resolved CPU `features` (LLVM's names):

    - f32 forward convs (not transposed): im2col, except channels-last 1x1 (already a matmul; im2col slows it
      2-4x). It turns a convolution into one matmul that IREE tiles well: 1.1-8x on a Zen 5 and 2-5x on a
      Zen 3 (docs/performance.md).
    - bf16 channels-last 1x1 forward convs: data-tiling only with native bf16 dot products (avx512bf16 or
      amx-bf16): IREE's x86 data tiles for bf16 are sized for VDPBF16PS. Without them bf16 tiles fall back to
      unpacking every element: 4.3x faster on a Zen 5 (avx512bf16), 28x SLOWER on a Zen 3 (19.4 vs 0.69 ms).
    - fp16 channels-last 1x1 forward convs: data-tiling only with avx512f: f16 takes the f32 tile sizes, 16x16
      zmm tiles with AVX-512 (2x faster on a Zen 5) but 8x8 ymm tiles on AVX2, where it was shape-dependent on
      a Zen 3 (1.25x slower on n4 c35 48x32, 1.16x faster on n8 c128->384 24x48): no rule without a cause.
    - nothing else: im2col does not compile for fp16/bf16 in IREE 3.13 ("'arith.addf' op requires the same
      type"), backward and grouped convs had no consistent winner, and data-tiling breaks tuning specs on
      matmuls (the tune --defaults table may still choose it per machine for convs).
    """
    if not cls.is_conv or cls.op != "conv" or cls.mode != "forward":
        return []
    if cls.dtype == "float32":
        return [] if cls.channels_last and cls.pointwise else [IM2COL]
    if cls.channels_last and cls.pointwise:
        if cls.dtype == "bfloat16" and ("avx512bf16" in features or "amx-bf16" in features):
            return [DATA_TILING]
        if cls.dtype == "float16" and "avx512f" in features:
            return [DATA_TILING]
    return []


#: formulations (ops/conv_forms.py) the rules choose for the `best` column
MATMUL, FWDCONV = "matmul", "fwdconv"


def rule_formulation(cls: OpClass) -> str | None:
    """The built-in formulation of a class for the `best` column (None: the op's default export), where the cause
    is known. IREE 3.13 lowers `aten.convolution_backward` to generic ops no im2col applies to, and a grouped
    forward conv to a grouped linalg conv IREE has no im2col for either: written as an explicit im2col and a
    matmul (`matmul`), they are tiled as matmuls. Measured on a 2-core Zen 3, one thread (docs/performance.md,
    "Kernel formulations"): backward-weight 3x3 36.8 -> 2.7 ms, backward-data 9.2 -> 0.61 ms, grouped g4 2.1 ->
    0.22 ms, bf16 gradients 29.5 / 19.2 -> 1.36 / 1.48 ms, NHWC gradients 91 / 121 -> 7.2 / 10.8 ms, all three
    gradients 45.7 -> 4.3 ms. A STRIDED data gradient is the exception: im2col and matmul multiply the zeros the
    stride inserts (7.9 ms), where the gradient as a forward conv of the dilated dLdy (`fwdconv`) takes 1.9 ms
    (default 48.2 ms). A channels-last kxk forward conv: IREE 3.13's im2col of it is ~2.3x slower than of the
    same conv channels-first (Zen 5: 2.53 vs 1.10 ms), our explicit im2col + matmul is not: 4.0 -> 2.1 ms on a
    2-core Zen 4 (n2 c64 28x28 3x3; BOO's build 21 ms), and the Zen 3's tune chose it too. Transposed convs
    (written as ordinary convs already) and everything else: none. A kernel that lacks the formulation (a bias
    gradient alone has no conv to rewrite) keeps its default."""
    if cls.op != "conv":
        return None
    details = cls.detail.split("-") if cls.detail else []
    if cls.mode == "backward":
        return FWDCONV if "strided" in details else MATMUL
    if "grouped" in details or (cls.channels_last and not cls.pointwise):
        return MATMUL
    return None


def rule_build(cls: OpClass) -> str | None:
    """The build the `best` column takes for a class by rule, where BOO's own beats ours for a known cause (None:
    ours). A layer norm forward: BOO exports it with `force_single_dispatch`, ONE dispatch, where our export is four
    (statistics, normalization), each re-reading the input: 1.76 vs 3.41 ms for 16x128x768 f32 on a 2-core Zen 4."""
    return BOO_BUILD if cls.op == "layernorm" and cls.mode == "forward" else None


def defaults_state() -> TableState:
    """The machine's stored defaults table (tune --defaults) as it applies to this host CPU and compiler."""
    cpu = host_cpu()
    return read_state(machine_key(cpu.machine_key, cpu.compiler_version), locations.defaults_table())


def defaults_in_use(target: Target) -> dict[str, Any]:
    """Where the per-op default flags of `target`'s baselines come from, JSON-able, for the run's record:
    {"source": "table", "path", "digest", "classes"} (the table's classes; rules for the rest), {"source": "rules"},
    {"source": "off"} (IREE's plain defaults, as tune --defaults measures) or {"source": "none"} (GPU targets).
    Never raises."""
    if target.kind != "cpu":
        return {"source": "none"}
    if not target.per_op_defaults:
        return {"source": "off"}
    try:
        return defaults_state().describe()
    except Exception as e:  # noqa: BLE001 - a record, best effort
        return {"source": "rules", "warning": f"defaults table not read: {e}"}


def per_op_default_flags(sig: OpSignature, target: Target) -> list[str]:
    """Extra iree-compile flags for this class of kernel on this machine.

    Per machine: first the table `tune --defaults` measured on THIS machine (resolved CPU + compiler version,
    defaults_table.py), else the feature-keyed `rule_flags`. Only the cpu target gets any, and none when the
    target says `per_op_defaults=False` (IREE's plain defaults: what tune --defaults measures against). A
    variant's own flags come later on the command line and win (e.g. `--iree-opt-data-tiling=false`).

    The figures behind the rules (benchmarks/bench_cpu_flags.py; IREE 3.13, one thread, local-sync; us per
    call). Zen 5 = a 2-core EPYC with AVX-512 and avx512bf16; Zen 3 = a 2-core EPYC (znver3) with AVX2 only:

    | class (forward)          | CPU   | IREE default | im2col | data-tiling | rule |
    |--------------------------|-------|--------------|--------|-------------|------|
    | f32 NCHW 3x3 n2 c64 28^2 | Zen 5 | 1287         | 1102   | 1292        | im2col |
    | f32 NCHW 3x3 s2 + bias   | Zen 5 | 771          | 196    | 778         | im2col |
    | f32 NCHW 1x1 c35         | Zen 5 | 491          | 78     | 530         | im2col |
    | f32 NHWC 3x3 c64         | Zen 5 | 21306        | 2568   | 21496       | im2col |
    | f32 NHWC 1x1 c128->384   | Zen 5 | 4868..5378   | 19594+ | 4461..10141 | none |
    | f32 NHWC 1x1 c128->384   | Zen 3 | 53774*       | 1.84x  | 0.78x       | none (Zen 3's table: data-tiling) |
    | f32 NCHW kxk, 3 shapes   | Zen 3 | 6755* geomean| 0.39x  | same kernel | im2col |
    | bf16 NHWC 1x1 c35        | Zen 5 | 439          | FAIL   | 105         | data-tiling with avx512bf16 |
    | bf16 NHWC 1x1 c35        | Zen 3 | 690          | FAIL   | 19400       | (no avx512bf16: none) |
    | fp16 NHWC 1x1 c35        | Zen 5 | 376          | FAIL   | 187         | data-tiling with avx512f |
    | fp16 NHWC 1x1 c35        | Zen 3 | 629          | FAIL   | 786         | (AVX2 only: none) |
    | fp16 NHWC 1x1 c128->384  | Zen 3 | 36927        | FAIL   | 31874       | (AVX2 only: none) |

    * measured by tune --defaults on a loaded machine (ratios interleaved, times inflated): docs/performance.md
    has every class and what the Zen 3's table holds. A rule's figures come from the CPU named beside them; what
    this machine gets beyond the rules comes from its own table.
    """
    if target.kind != "cpu" or not target.per_op_defaults:
        return []
    cls = op_class(sig)
    flags = defaults_state().classes.get(str(cls))
    return list(flags) if flags is not None else rule_flags(cls, host_cpu().features)


def _filter_spatial(d: dict, sig: OpSignature) -> tuple[int, ...]:
    """Filter spatial sizes from the filter shape and layout, when describe() has no filter_spatial."""
    fl = str(d.get("fil_layout") or "").upper()
    shapes = sig.input_shapes()
    if fl and len(shapes) >= 2 and len(shapes[1]) == len(fl):
        return tuple(int(s) for s, c in zip(shapes[1], fl) if c not in "NCKF")
    return ()
