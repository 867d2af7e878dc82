"""What the tuner searches, per kernel: global choices (compiler flags, the kernel's formulation), then the root
op's tile sizes under the best of them.

Level 1, `global_choices`: a handful of ways to build the whole kernel, enumerated (each one a candidate):
im2col on/off, data-tiling on/off (with and without microkernels), and every formulation the op offers (e.g. a
backward conv written as a forward conv). Flags are written out in full (`=true` / `=false`), so a choice means
the same whatever the per-op defaults were.

Level 2, `TileSpace`: the lowering config of the root op (`dispatch.RootOp`, read from the build the search
starts from), as a few categorical parameters derived from its loop sizes and the target's vector width:
the two vector dimensions' tiles (the contiguous one in multiples of the SIMD lanes), the innermost reduction
tile, and each parallel dimension's distribution tile as a multiple of its vector tile. A candidate that cannot
compile is pruned by trying (its compiler error is kept), never guessed away.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NotRequired, Protocol, TypedDict

from ..cpu_defaults.machine import per_op_default_flags
from ..cpu_defaults.rules import DATA_TILING, IM2COL
from ..ops.base import OpSignature
from ..targets import Target
from ..variants.root_op import RootOp
from ..variants.tile_spec import cpu_compilation_info

if TYPE_CHECKING:
    import optuna

UKERNELS = "--iree-llvmcpu-enable-ukernels"
AGGRESSIVE_FUSION = "--iree-dispatch-creation-enable-aggressive-fusion"
SPLIT_REDUCTION = "--iree-dispatch-creation-enable-split-reduction"

_BYTES = {"f64": 8, "f32": 4, "i32": 4, "f16": 2, "bf16": 2, "i16": 2, "i8": 1, "i64": 8}
#: distribution tile = vector tile x factor; 0 = the whole loop
DIST_FACTORS = (1, 2, 4, 8, 16, 32, 0)
OUTER_VECTOR = (1, 2, 4, 6, 8, 16)
REDUCTION_TILES = (1, 2, 4, 8, 16, 32, 64)

#: one categorical parameter's choice: a tile or a factor (int), or "2x4", "64/2", an intrinsic's name (str)
Choice = int | str
#: one entry of what a candidate configures: a tile list (cpu), or a GPU configuration's field (GpuChoice.summary)
TileValue = int | str | tuple[int, ...] | list[int]


class CandidateRoot(TypedDict):
    """The root op a candidate configures, as its params record it (what its spec's matcher needs)."""

    dispatch: str
    op: str
    kind: str
    maps: list[str]
    iterators: list[str]
    bounds: list[int]
    types: list[str]


#: a candidate's configuration as stored with it (JSON): its global choice, and the tiles it sets on which root
#: op (`global` is a keyword: the functional form)
CandidateParams = TypedDict("CandidateParams", {
    "global": str, "flags": list[str], "formulation": str | None,
    "tiles": NotRequired[dict[str, int | str | list[int]]], "root": NotRequired[CandidateRoot]})


@dataclass(frozen=True)
class GlobalChoice:
    """One way to build the whole kernel: compiler flags and a formulation."""

    name: str                           # short, for reports: "im2col+dt", "fwdconv" ...
    flags: tuple[str, ...] = ()
    formulation: str | None = None

    def params(self) -> CandidateParams:
        return {"global": self.name, "flags": list(self.flags), "formulation": self.formulation}


@dataclass(frozen=True)
class Candidate:
    """A configuration to try on one kernel: a global choice, plus a configuration of the root op (tile lists
    on the CPU, a GPU lowering config's fields) and the `compilation_info` attribute a spec sets for it."""

    func_name: str
    choice: GlobalChoice
    root: RootOp | None = None
    tiles: Mapping[str, TileValue] | None = field(default=None, hash=False)   # what the config sets
    info: str | None = None                                          # the #iree_codegen.compilation_info<...>

    @property
    def params(self) -> CandidateParams:
        p = self.choice.params()
        if self.tiles is not None:
            p["tiles"] = {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in sorted(self.tiles.items())}
            if self.root is not None:
                r = self.root
                p["root"] = {"dispatch": r.dispatch, "op": r.op_name, "kind": r.kind, "maps": list(r.maps),
                             "iterators": list(r.iterators), "bounds": list(r.bounds), "types": list(r.elem_types)}
        return p

    @property
    def key(self) -> str:
        blob = json.dumps({"func": self.func_name, **self.params}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def describe(self) -> str:
        """One line: what this candidate changes."""
        parts = [self.choice.name] if self.choice.name != "default" or self.tiles is None else []
        if self.tiles is not None:
            shown: list[str] = [k for k in ("distribution", "vector_common_parallel", "vector_reduction")
                                if k in self.tiles]
            parts.append(" ".join(f"{k}={_show(self.tiles[k])}" for k in shown or sorted(self.tiles)))
        return "; ".join(parts) or "compiler default"


def _show(v: TileValue) -> str:
    return str(list(v)) if isinstance(v, (list, tuple)) else str(v)


# ---- level 1 -----------------------------------------------------------------------------------------------

def global_choices(sig: OpSignature, target: Target, formulations: Sequence[str] = ()) -> list[GlobalChoice]:
    """The whole-kernel choices worth trying for this kernel on this target (the per-op defaults' own choice
    excluded: that is the baseline). Only cpu has global flag choices today; every target gets formulations."""
    out: list[GlobalChoice] = []
    forms: list[str | None] = [None] + [f for f in formulations if f and f != "default"]
    defaults = set(per_op_default_flags(sig, target))
    if target.kind == "cpu":
        if sig.op == "conv":
            for form in forms:
                for im2col in (False, True):
                    # another formulation is tried with and without im2col only: data-tiling rarely helped
                    # the default one, and each extra choice costs budget on every kernel
                    for dt in ((False, True) if form is None else (False,)):
                        name = "+".join(([form] if form else []) + [("im2col" if im2col else "direct")]
                                        + (["dt"] if dt else []))
                        flags = (f"{IM2COL}={_b(im2col)}", f"{DATA_TILING}={_b(dt)}")
                        out.append(GlobalChoice(name, flags, form))
                        if dt:
                            out.append(GlobalChoice(name + "+uk", flags + (f"{UKERNELS}=all",), form))
        elif sig.op == "gemm":
            out += [GlobalChoice("dt", (f"{DATA_TILING}=true",)),
                    GlobalChoice("dt+uk", (f"{DATA_TILING}=true", f"{UKERNELS}=all"))]
        else:   # reductions and elementwise kernels: fusion and reduction splitting
            out += [GlobalChoice("fusion", (f"{AGGRESSIVE_FUSION}=true",)),
                    GlobalChoice("split-reduction", (f"{SPLIT_REDUCTION}=true",)),
                    GlobalChoice("fusion+split", (f"{AGGRESSIVE_FUSION}=true", f"{SPLIT_REDUCTION}=true"))]
    else:
        out += [GlobalChoice(form, (), form) for form in forms if form]
    baseline = _state(list(defaults))
    return [c for c in out if not (c.formulation is None and _state(c.flags) == baseline)]


def _b(v: bool) -> str:
    return "true" if v else "false"


def _state(flags: Sequence[str]) -> dict[str, str]:
    """What a flag list sets, with bare flags read as `=true` and missing im2col / data-tiling as false."""
    st = {IM2COL: "false", DATA_TILING: "false"}
    for f in flags:
        k, _, v = f.partition("=")
        st[k] = v or "true"
    return st


# ---- level 2 -----------------------------------------------------------------------------------------------

class SearchSpace(Protocol):
    """What the tile search needs of a space (cpu: TileSpace; GPUs: gpu_space): the root op, its categorical
    parameters, and the candidate (or why not) for one choice of them."""

    @property
    def root(self) -> RootOp: ...

    @property
    def choices(self) -> Mapping[str, tuple[Choice, ...]]: ...

    def candidate(self, func_name: str, choice: GlobalChoice, params: Mapping[str, Choice]) -> Candidate | str: ...
    # (`params`: one of its `choices` per parameter, as `suggest` has optuna pick them)


@dataclass(frozen=True)
class TileSpace:
    """The tile parameters of one root op: name -> ordered choices (optuna categorical)."""

    root: RootOp
    choices: dict[str, tuple[int, ...]]
    inner: int                  # the contiguous vector dim
    outer: int | None           # the second vector dim (register blocking), if any
    red: int | None             # the innermost reduction dim
    lanes: int

    def candidate(self, func_name: str, choice: GlobalChoice, params: Mapping[str, Choice]) -> Candidate | str:
        """The candidate for one choice of every parameter (a string: why that choice is not a configuration)."""
        tiles = self.tiles({name: int(value) for name, value in params.items()})   # (its choices are all ints)
        return Candidate(func_name, choice, self.root, tiles, cpu_compilation_info(self.root, tiles))

    def tiles(self, params: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
        """The lowering config's tile lists for one choice of every parameter."""
        root = self.root
        n = root.rank
        base = root.tiles
        par = set(root.parallel_dims())
        vec = [0] * n
        for d in par:
            vec[d] = 1
        base_vec = base.get("vector_common_parallel")
        if base_vec and len(base_vec) == n:   # dims the search leaves alone keep the compiler's choice
            vec = [int(base_vec[d]) if d in par else 0 for d in range(n)]
        vec[self.inner] = params["vec_inner"]
        if self.outer is not None:
            vec[self.outer] = params["vec_outer"]
        dist = [0] * n
        for d in sorted(par):
            f = params.get(f"dist_d{d}")
            if f is None:
                b = base.get("distribution")
                dist[d] = int(b[d]) if b and len(b) == n else root.bounds[d]
            else:
                dist[d] = root.bounds[d] if f == 0 else min(root.bounds[d], max(1, vec[d]) * f)
            if dist[d] and vec[d] > dist[d]:
                vec[d] = dist[d]
        red = [0] * n
        base_red = base.get("vector_reduction")
        for d in root.reduction_dims():
            red[d] = int(base_red[d]) if base_red and len(base_red) == n else 1
        if self.red is not None:
            red[self.red] = params["vec_red"]
        out = {"distribution": tuple(dist), "vector_common_parallel": tuple(vec), "vector_reduction": tuple(red)}
        if "cache_parallel" in base:
            out["cache_parallel"] = tuple(dist)
        return out


def tile_space(root: RootOp) -> TileSpace:
    """The tile parameters worth searching for `root` (cpu)."""
    n = root.rank
    par = root.parallel_dims()
    out_dims = [d for d in root.operand_dims()[2] if d is not None]
    lanes = max(1, (root.vector_bytes or 32) // _BYTES.get(root.elem_types[2], 4))
    base_vec = root.tiles.get("vector_common_parallel") or ()
    # the contiguous dim: the output's last parallel dim with room for a vector
    contiguous = [d for d in out_dims if d in par and root.bounds[d] > 1]
    inner = contiguous[-1] if contiguous else par[-1]
    rest = [d for d in par if d != inner and root.bounds[d] > 1]
    if len(base_vec) == n:
        rest.sort(key=lambda d: (-int(base_vec[d]), -out_dims.index(d) if d in out_dims else 0))
    else:
        rest.sort(key=lambda d: -(out_dims.index(d) if d in out_dims else -1))
    outer = rest[0] if rest else None
    choices: dict[str, tuple[int, ...]] = {
        "vec_inner": _capped((lanes, 2 * lanes, 4 * lanes), root.bounds[inner]),
    }
    if outer is not None:
        choices["vec_outer"] = _capped(OUTER_VECTOR, root.bounds[outer])
    reds = root.reduction_dims()
    base_red = root.tiles.get("vector_reduction") or ()
    red = None
    if reds:
        red = max(reds, key=lambda d: (int(base_red[d]) if len(base_red) == n else 0, d))
        choices["vec_red"] = _capped(REDUCTION_TILES, root.bounds[red])
    for d in par:
        if root.bounds[d] > 1:
            choices[f"dist_d{d}"] = DIST_FACTORS
    return TileSpace(root=root, choices=choices, inner=inner, outer=outer, red=red, lanes=lanes)


def _capped(values: Sequence[int], bound: int) -> tuple[int, ...]:
    return tuple(sorted({min(v, bound) for v in values}))


def new_study(seed: int, budget: int) -> optuna.Study:
    """The optuna study every tile search uses, live or offline: TPE, seeded, its start-up trials (seeded random
    proposals) a third of the budget within [2, 10], so an offline tune proposes the start-up candidates a live
    one will."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=min(10, max(2, budget // 3)), multivariate=True)
    return optuna.create_study(direction="minimize", sampler=sampler)


def suggest(trial: optuna.trial.Trial, choices: Mapping[str, tuple[Choice, ...]]) -> dict[str, Choice]:
    """The trial's pick of one of `choices` for every parameter (a space's `choices`), in their order. (optuna
    types a categorical suggestion as any categorical value, None and float included: it is one of those offered.)"""
    picked: dict[str, Choice] = {}
    for name, values in choices.items():
        value = trial.suggest_categorical(name, list(values))
        assert isinstance(value, (int, str)), (name, value)
        picked[name] = value
    return picked
