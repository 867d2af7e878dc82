"""The per-op-class defaults that apply on THIS machine: its own table (`tune --defaults`, table.py) where it covers
a class, else the rules (rules.py), keyed on the host CPU as the compiler resolves it."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import locations
from ..hostcpu import HostCpu, resolve_host_cpu
from ..targets import Target
from .rules import op_class, rule_flags, rule_reduction_flags
from .table import TableState, machine_key, read_state

if TYPE_CHECKING:  # pragma: no cover
    from ..ops.base import OpSignature


# ---- the host CPU as the compiler resolves it --------------------------------------------------------------

def host_cpu() -> HostCpu:
    """The host CPU as `--iree-llvmcpu-target-cpu=host` resolves it (LLVM's name, e.g. znver3, and its features):
    asked of iree-compile once per machine and compiler build, then read from a small file (hostcpu.py)."""
    return resolve_host_cpu(Target("cpu").compile_flags())


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
    table.py), else the feature-keyed `rule_flags`; either way with the reduction rule's flag where they say nothing
    of it (`rule_reduction_flags`). Only the cpu target gets any, and none when the
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
    table = defaults_state().classes.get(str(cls))
    flags = list(table) if table is not None else rule_flags(cls, host_cpu().features)
    # the reduction rule's cause is the compiler's, not the CPU's: a table (measured before it, or without it) keeps
    # it unless the table names the flag itself
    named = {f.split("=", 1)[0] for f in flags}
    return flags + [f for f in rule_reduction_flags(cls) if f.split("=", 1)[0] not in named]


