"""The GPU search space of a root op (hip: gfx942, gfx950, gfx1100 ...; cuda: sm_80 ...): IREE's TileAndFuse
configurations of a contraction, or of the implicit GEMM (igemm) IREE 3.13 turns a convolution into, as a few
optuna categorical parameters, and the constraints that make one choice of them a configuration (checked by
`GpuSpace.candidate`, which says which one a choice breaks).

The parameters, in units that keep most choices valid (the compiler's own choice is one of them, see
`GpuSpace.baseline_params`):
- `mma`: the MMA intrinsic, among the target's that compute the op's element types exactly;
- `m` = "SxT": S subgroups along the innermost M dim, T intrinsic tiles each (workgroup tile S x T x intrinsic
  M); `n` the same for the innermost N dim. One parameter each, because S and T only fit the problem together;
- `tile_d<i>` = "T/S": the workgroup tile T of an outer M / N dim (a conv's batch, output rows, filter taps),
  spread over S subgroups (IREE spreads subgroups along outer dims too);
- `k_tiles` x intrinsic K = the reduction step of the innermost K dim, `k_d<i>` that of an outer K dim (a conv's
  input channels when its filter taps form their own K dim);
- `prefetch`: shared-memory prefetch stages (0 = none; AMD only: IREE 3.13 pipelines only on ROCDL).
The subgroup size is the intrinsic's (the baseline's): on gfx1100 a wave64 WMMA configuration crashes IREE
3.13's backend (SIGABRT), so wave32 / wave64 is not a choice of an MMA configuration. promote_operands and the
other entries of the compiler's lowering_config (e.g. cuda's convert_acc_gemm) are kept as IREE set them;
`padding` is written (workgroup tiles, reduction steps) when IREE pads the op (convolutions), and then tiles
need not divide the problem.

Constraints (a broken one is the string `candidate` returns): tiles divide the problem (or, padded, do not exceed
it rounded up to the intrinsic); workgroup size = subgroups x subgroup size <= the arch's maximum; the operand
tiles staged in shared memory (promote_operands) fit the arch's limit; a subgroup computes at most 16 intrinsic
tiles (IREE's own heuristic's largest) and at most 1024 tile x K elements per reduction step (bigger steps can
compile for minutes), and its accumulators fit its registers. What the constraints let through
is proven by compiling (tests/test_tune_gpu_space.py).

A candidate's `info` is the compilation_info a tuning spec sets (spec.spec_module). IREE 3.13's cuda backend
ignores tuning specs (--iree-codegen-tuning-spec-path never reaches its pipeline: a spec silently matches
nothing), so on cuda a candidate is built from `gpu_dispatch.configured_source` instead: the dispatch's dumped
configuration reconfigured, substituted as the executable's source.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..variants.root_op import RootOp
from ..variants.tile_spec import gpu_compilation_info
from .gpu_dispatch import (
    BYTES,
    GemmView,
    GpuConfig,
    GpuTarget,
    Intrinsic,
    gemm_view,
    parse_gpu_config,
    parse_gpu_target,
)
from .space import Candidate, Choice, GlobalChoice

SUBGROUPS = (1, 2, 4)            # along the innermost M, N dims and each outer one
TILES = (1, 2, 4, 8)             # intrinsic tiles per subgroup along the innermost M / N dim
K_TILES = (1, 2, 4, 8, 16)       # intrinsic-K steps per reduction iteration
OUTER_TILES = (1, 2, 4, 8)
OUTER_K = (1, 2, 4, 8, 16, 32)
PREFETCH = (0, 2, 3)
#: registers per thread where the target does not say (NVIDIA: 255 per thread)
DEFAULT_REGISTERS = 255
#: intrinsic tiles (M x N, outer dims included) one subgroup computes at most: IREE's own heuristic seeds a
#: large gemm with 16; more only unrolls further (minutes of compile time, spilled accumulators)
MAX_SUBGROUP_TILES = 16
#: a subgroup's work per reduction step at most: its M x N intrinsic tiles x the step's K elements. IREE's own
#: choices stay at or under 1024 (a 256x512x512 f16 gemm on gfx942: 8 tiles x 128). A pruning of compile time,
#: not a limit of the compiler: the random candidates still compiling after 3.5 to 5 minutes were all at 2048 or
#: more (gfx1100 with 3 prefetch stages, sm_80 at 4096); at or under 1024 they compiled in 4 to 50 s
MAX_STEP_WORK = 1024


@dataclass(frozen=True)
class GpuChoice:
    """One configuration of the root op: what the lowering_config and translation_info set."""

    mma: Intrinsic
    workgroup: tuple[int, ...]
    subgroup: tuple[int, ...]
    reduction: tuple[int, ...]
    padding: tuple[int, ...] | None
    workgroup_size: int
    subgroup_size: int
    prefetch: int | None

    def summary(self) -> dict[str, int | str | list[int]]:
        """JSON-able: what a candidate's `tiles` records."""
        out: dict[str, int | str | list[int]] = {"mma": self.mma.name, "workgroup": list(self.workgroup),
                               "subgroup": list(self.subgroup), "reduction": list(self.reduction),
                               "workgroup_size": self.workgroup_size, "subgroup_size": self.subgroup_size}
        if self.prefetch is not None:
            out["prefetch"] = self.prefetch
        return out


@dataclass(frozen=True)
class GpuSpace:
    """The configurations of one GPU root op: name -> ordered choices (optuna categorical), and the rules."""

    root: RootOp
    choices: dict[str, tuple[Choice, ...]]
    target: GpuTarget
    base: GpuConfig
    view: GemmView
    intrinsics: dict[str, Intrinsic]
    padded: bool                      # IREE pads the op to the tiles (tiles need not divide it)

    # ---- a choice -> a candidate ----------------------------------------------------------------------------
    def candidate(self, func_name: str, choice: GlobalChoice, params: Mapping[str, Choice]) -> Candidate | str:
        """The candidate for one choice of every parameter, or why that choice is not a configuration."""
        cfg = self.configuration(params)
        if isinstance(cfg, str):
            return cfg
        return Candidate(func_name, choice, self.root, cfg.summary(), self.compilation_info(cfg))

    def configuration(self, params: Mapping[str, Choice]) -> GpuChoice | str:
        """The configuration one choice of every parameter sets, or the first constraint it breaks."""
        v = self.view
        mma = self.intrinsics.get(str(params.get("mma")))
        if mma is None:
            return (f"mma intrinsic {params.get('mma')!r} does not compute {'x'.join(self.root.elem_types)} on "
                    f"{self.target.arch}")
        tiles = self._tiles(mma, params)
        if isinstance(tiles, str):
            return tiles
        wg, sg, red, subgroups = tiles
        why = self._breaks(mma, wg, sg, red, subgroups)
        if why:
            return why
        sg_size = self._subgroup_size()
        padding = None
        if self.padded:
            padding = tuple(red[d] * (mma.k if d == v.k[-1] else 1) if d in v.k else wg[d] for d in range(len(wg)))
        prefetch = int(params["prefetch"]) if "prefetch" in params else None
        return GpuChoice(mma, tuple(wg), tuple(sg), tuple(red), padding, subgroups * sg_size, sg_size, prefetch)

    def _tiles(self, mma: Intrinsic, params: Mapping[str, Choice]) -> tuple[list[int], list[int], list[int], int] | str:
        """The workgroup, subgroup and reduction tiles the parameters give, and the subgroups, or why not."""
        v = self.view
        rank = len(v.bounds)
        wg, sg, red = [0] * rank, [0] * rank, [0] * rank
        for d in v.batch:
            wg[d] = sg[d] = 1
        subgroups = 1
        for dim, name, size in ((v.m[-1], "m", mma.m), (v.n[-1], "n", mma.n)):
            count, tiles = _pair(params[name], "x")
            sg[dim], wg[dim] = tiles, count * tiles * size
            subgroups *= count
        for d in v.m[:-1] + v.n[:-1]:
            tile, split = _pair(params.get(f"tile_d{d}", 1), "/")
            if tile % split:
                return f"tile_d{d} {tile} cannot be spread over {split} subgroups"
            wg[d], sg[d] = tile, tile // split
            subgroups *= split
        red[v.k[-1]] = int(params["k_tiles"])
        for d in v.k[:-1]:
            red[d] = int(params.get(f"k_d{d}", 1))
        return wg, sg, red, subgroups

    def _subgroup_size(self) -> int:
        """The subgroup size of every configuration: the baseline's (the intrinsic's), else the arch's smallest."""
        return self.base.subgroup_size or min(self.target.subgroup_sizes)

    def _breaks(self, mma: Intrinsic, wg: list[int], sg: list[int], red: list[int], subgroups: int) -> str | None:
        """The first constraint the tiles break (problem, workgroup size, shared memory, subgroup), or None."""
        t = self.target
        why = self._fits(mma, wg, red)
        if why:
            return why
        sg_size = self._subgroup_size()
        threads = subgroups * sg_size
        limit = min(t.max_threads, t.max_workgroup_sizes[0] if t.max_workgroup_sizes else t.max_threads)
        if threads > limit:
            return (f"workgroup size {threads} ({subgroups} subgroups x {sg_size}) exceeds the {t.arch} maximum "
                    f"of {limit}")
        need, detail = self.shared_memory(mma, wg, red)
        if need > t.shared_memory_bytes:
            return (f"shared memory: the staged operand tiles need {need} bytes ({detail}), over the {t.arch} "
                    f"limit of {t.shared_memory_bytes} bytes")
        return self._subgroup_breaks(mma, sg, red, sg_size)

    def _subgroup_breaks(self, mma: Intrinsic, sg: list[int], red: list[int], sg_size: int) -> str | None:
        """Why one subgroup's work is too much (tiles, tiles x K per step, accumulator registers), or None."""
        v, t = self.view, self.target
        per_subgroup = math.prod(sg[d] for d in v.m + v.n)
        if per_subgroup > MAX_SUBGROUP_TILES:
            return (f"subgroup tile: {per_subgroup} intrinsic tiles per subgroup, over {MAX_SUBGROUP_TILES} (the "
                    "most IREE's own heuristic gives)")
        k_elems = math.prod(red[d] * (mma.k if d == v.k[-1] else 1) for d in v.k)
        if per_subgroup * k_elems > MAX_STEP_WORK:
            return (f"reduction step: {per_subgroup} intrinsic tiles x {k_elems} K elements per subgroup per step, "
                    f"over {MAX_STEP_WORK}")
        regs = self._accumulator_registers(mma, sg, sg_size)
        reg_limit = t.vgpr_bits // 32 if t.vgpr_bits else DEFAULT_REGISTERS
        if regs > reg_limit:
            return (f"registers: a subgroup's accumulators need {regs} registers per thread, over the {reg_limit} "
                    f"of {t.arch}")
        return None

    def _fits(self, mma: Intrinsic, wg: list[int], red: list[int]) -> str | None:
        """Why the tiles do not fit the problem (divide it, or when padded, not exceed it), or None."""
        v = self.view
        checks = [(v.m[-1], wg[v.m[-1]], mma.m, "M"), (v.n[-1], wg[v.n[-1]], mma.n, "N"),
                  (v.k[-1], red[v.k[-1]] * mma.k, mma.k, "K")]
        for d, tile, unit, what in checks:
            bound = v.bounds[d]
            if self.padded:
                if tile > _round_up(bound, unit):
                    return (f"the {what} tile {tile} exceeds {what} (d{d} = {bound}) rounded up to the intrinsic "
                            f"{mma.name} ({_round_up(bound, unit)})")
            elif bound % tile:
                return f"the {what} tile {tile} does not divide {what} (d{d} = {bound})"
        return None

    def shared_memory(self, mma: Intrinsic, wg: list[int], red: list[int]) -> tuple[int, str]:
        """Bytes of the operand tiles the configuration stages in shared memory (its promote_operands), and
        which: lhs 64x128 f16 ..."""
        v = self.view
        tile = [red[d] * (mma.k if d == v.k[-1] else 1) if d in v.k else wg[d] for d in range(len(v.bounds))]
        promoted = self.base.ints("promote_operands")
        total, parts = 0, []
        for i in (promoted if promoted is not None else (0, 1)):
            if not 0 <= i < 3:
                continue
            shape = [tile[d] for d in v.operands[i]]
            elem = self.root.elem_types[i]
            total += math.prod(shape) * BYTES.get(elem, 4)
            parts.append(f"{('lhs', 'rhs', 'out')[i]} {'x'.join(map(str, shape))} {elem}")
        return total, ", ".join(parts)

    def _accumulator_registers(self, mma: Intrinsic, sg: list[int], sg_size: int) -> int:
        v = self.view
        elems = math.prod(sg[d] * (mma.m if d == v.m[-1] else mma.n if d == v.n[-1] else 1)
                          for d in v.m + v.n)
        return math.ceil(elems * BYTES.get(mma.acc, 4) / 4 / sg_size)

    def compilation_info(self, cfg: GpuChoice) -> str:
        """The `#iree_codegen.compilation_info<...>` that sets `cfg`: the compiler's lowering_config entries
        with the tiles replaced, and its translation_info with the workgroup, subgroup and prefetch changed."""
        fields = dict(self.base.fields)
        fields.pop("thread", None)
        fields.pop("padding_conv", None)   # in the conv's own loops: would contradict the new tiles
        fields["mma_kind"] = f"#iree_gpu.mma_layout<{cfg.mma.name}>"
        fields["workgroup"] = _list(cfg.workgroup)
        fields["subgroup"] = _list(cfg.subgroup)
        fields["reduction"] = _list(cfg.reduction)
        fields.setdefault("promote_operands", "[0, 1]")
        if cfg.padding is not None:
            fields["padding"] = _list(cfg.padding)
        t = self.base.translation
        t = re.sub(r"workgroup_size = \[[0-9,\s]*\]", f"workgroup_size = [{cfg.workgroup_size}, 1, 1]", t)
        t = re.sub(r"subgroup_size = \d+", f"subgroup_size = {cfg.subgroup_size}", t)
        if cfg.prefetch is not None:
            if "prefetch_num_stages" in t:
                t = re.sub(r"prefetch_num_stages = \d+", f"prefetch_num_stages = {cfg.prefetch}", t)
            else:
                t = t.replace("#iree_gpu.pipeline_options<", f"#iree_gpu.pipeline_options<prefetch_num_stages = "
                                                             f"{cfg.prefetch}, ", 1)
        return gpu_compilation_info(fields, t)

    # ---- the compiler's own choice ----------------------------------------------------------------------------
    def baseline_params(self) -> dict[str, Choice] | None:
        """The parameters that give back the compiler's own configuration, or None when it is not a point of
        the space (e.g. tiles the space's choices do not list)."""
        b, v = self.base, self.view
        mma = self.intrinsics.get(b.mma_kind or "")
        wg, sg, red = b.ints("workgroup"), b.ints("subgroup"), b.ints("reduction")
        rank = len(v.bounds)
        if mma is None or not wg or not sg or not red or not len(wg) == len(sg) == len(red) == rank:
            return None
        p: dict[str, Choice] = {"mma": mma.name}
        if not (self._baseline_tiles(p, mma, wg, sg) and self._baseline_steps(p, red)):
            return None
        if "prefetch" in self.choices:
            p["prefetch"] = int(b.options.get("prefetch_num_stages", "0") or 0)
        if any(self.choices.get(k) is None or val not in self.choices[k] for k, val in p.items()):
            return None
        return p if set(p) == set(self.choices) else None

    def _baseline_tiles(self, p: dict[str, Choice], mma: Intrinsic, wg: tuple[int, ...], sg: tuple[int, ...]) -> bool:
        """Add the M / N tile parameters of the compiler's tiles to `p`; False when they are not expressible."""
        v = self.view
        for dim, name, size in ((v.m[-1], "m", mma.m), (v.n[-1], "n", mma.n)):
            if not sg[dim] or wg[dim] % (sg[dim] * size):
                return False
            p[name] = f"{wg[dim] // (sg[dim] * size)}x{sg[dim]}"
        for d in v.m[:-1] + v.n[:-1]:
            if not sg[d] or wg[d] % sg[d]:
                return False
            if f"tile_d{d}" in self.choices:
                p[f"tile_d{d}"] = f"{wg[d]}/{wg[d] // sg[d]}"
            elif wg[d] != 1:
                return False
        return True

    def _baseline_steps(self, p: dict[str, Choice], red: tuple[int, ...]) -> bool:
        """Add the reduction step parameters of the compiler's tiles to `p`; False when they are not expressible."""
        v = self.view
        p["k_tiles"] = red[v.k[-1]]
        for d in v.k[:-1]:
            if f"k_d{d}" in self.choices:
                p[f"k_d{d}"] = red[d]
            elif red[d] != 1:
                return False
        return True


def gpu_space(root: RootOp) -> GpuSpace | None:
    """The TileAndFuse MMA configurations of a GPU root op, or None: not a GPU kernel, not configured with
    TileAndFuse by IREE, no intrinsic for its element types on the arch (an f32 matmul on gfx1100 or sm_80),
    or a convolution IREE does not lower as an igemm."""
    target = parse_gpu_target(root.gpu_target)
    base = parse_gpu_config(root)
    if target is None or base is None or root.pipeline != "TileAndFuse":
        return None
    mmas = target.mma_for(*root.elem_types)
    if not mmas:
        return None
    if root.kind == "convolution" and "use_igemm_convolution = true" not in base.translation:
        return None
    view = gemm_view(root)
    if view is None or not view.m or not view.n or not view.k:
        return None
    padded = "padding" in base.fields
    base_mma = base.mma_kind
    mmas.sort(key=lambda i: i.name != base_mma)   # the compiler's own first, then the target's order
    smallest = (min(i.m for i in mmas), min(i.n for i in mmas), min(i.k for i in mmas))
    bm, bn, bk = (view.bounds[ds[-1]] for ds in (view.m, view.n, view.k))

    def fits(value: int, unit: int, bound: int) -> bool:
        # with the smallest intrinsic: within the (rounded-up) problem, dividing it unless the op is padded
        tile = value * unit
        return tile <= _round_up(bound, unit) and (padded or bound % tile == 0)

    choices: dict[str, tuple[Choice, ...]] = {
        "mma": tuple(i.name for i in mmas),
        "m": tuple(f"{s}x{t}" for s in SUBGROUPS for t in TILES if fits(s * t, smallest[0], bm)) or ("1x1",),
        "n": tuple(f"{s}x{t}" for s in SUBGROUPS for t in TILES if fits(s * t, smallest[1], bn)) or ("1x1",),
        "k_tiles": tuple(s for s in K_TILES if fits(s, smallest[2], bk)) or (1,),
    }
    outer = [d for d in view.m[:-1] + view.n[:-1] if view.bounds[d] > 1]
    for d in outer:
        tiles = _outer(OUTER_TILES, view.bounds[d], padded)
        choices[f"tile_d{d}"] = tuple(f"{t}/{s}" for t in tiles for s in SUBGROUPS if t % s == 0)
    for d in view.k[:-1]:
        if view.bounds[d] > 1:
            choices[f"k_d{d}"] = _outer(OUTER_K, view.bounds[d], padded)
    if target.vendor == "amd":
        choices["prefetch"] = PREFETCH
    return GpuSpace(root=root, choices=choices, target=target, base=base, view=view,
                    intrinsics={i.name: i for i in mmas}, padded=padded)


def _pair(value: Choice, sep: str) -> tuple[int, int]:
    """"2x4" -> (2, 4), "4/2" -> (4, 2), 4 -> (4, 1)."""
    a, _, b = str(value).partition(sep)
    return int(a), int(b or 1)


def _outer(values: tuple[int, ...], bound: int, padded: bool) -> tuple[int, ...]:
    return tuple(v for v in values if v <= bound and (padded or bound % v == 0)) or (1,)


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _list(values: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(int(x)) for x in values) + "]"
