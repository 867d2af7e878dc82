"""The op a tuning spec configures, read from a compiled kernel's dumped executable configurations.

Every kernel in the cache carries `configs/` (`--iree-hal-dump-executable-configurations-to`): one MLIR file per
dispatch, each op with the `lowering_config` the compiler chose and the function's `translation_info`. The
tuner reads the ROOT op from there (the contraction or convolution doing the most arithmetic), because that is
exactly what a spec's matcher sees: im2col, data-tiling and our formulations all change which op it is, so the
root is read from the build that the candidate starts from, never guessed from the command.

Nothing here runs a compiler; it is text in, records out.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from .mlir_text import angle_end

#: the implicit indexing maps of named linalg ops the tuner configures (generic ops print theirs)
NAMED_MAPS: dict[str, tuple[str, ...]] = {
    "linalg.matmul": ("(d0, d1, d2) -> (d0, d2)", "(d0, d1, d2) -> (d2, d1)", "(d0, d1, d2) -> (d0, d1)"),
    "linalg.batch_matmul": ("(d0, d1, d2, d3) -> (d0, d1, d3)", "(d0, d1, d2, d3) -> (d0, d3, d2)",
                            "(d0, d1, d2, d3) -> (d0, d1, d2)"),
}
#: lowering_config fields that are tile lists
TILE_FIELDS = ("distribution", "cache_parallel", "cache_reduction", "vector_common_parallel", "vector_reduction",
               "vector_inner_parallel")

_ELEM_TYPES = {"f32", "f16", "bf16", "f64", "i8", "i16", "i32", "i64"}


@dataclass(frozen=True)
class RootOp:
    """The op a spec would configure: what a matcher needs (kind, maps, element types, loop sizes) and what the
    compiler chose for it (tiles, pipeline), from one dispatch of a compiled kernel."""

    dispatch: str                      # e.g. main$async_dispatch_2
    op_name: str                       # linalg.generic / linalg.matmul ...
    kind: str                          # "contraction" | "convolution"
    maps: tuple[str, ...]              # affine maps of lhs, rhs, out: "(d0, d1, d2) -> (d0, d2)"
    iterators: tuple[str, ...]         # "parallel" | "reduction" per loop
    bounds: tuple[int, ...]            # loop sizes
    elem_types: tuple[str, str, str]   # lhs, rhs, out
    tiles: dict[str, tuple[int, ...]] = field(default_factory=dict, compare=False)   # the compiler's tiles
    translation: str = ""              # the function's translation_info attribute, verbatim
    pipeline: str = ""                 # e.g. DoubleTilingExpert
    target_cpu: str | None = None      # the llvm-cpu target's resolved cpu (znver3 ...), when on the CPU
    vector_bytes: int | None = None    # native_vector_size of the target (32 for AVX2, 64 for AVX-512)
    gpu_target: str = ""               # the #iree_gpu.target<...> attribute text, on a GPU target
    config: str = field(default="", compare=False)   # the op's lowering_config attribute, verbatim
    source: str = field(default="", compare=False)   # the dumped configuration file it was read from

    @property
    def rank(self) -> int:
        return len(self.bounds)

    @property
    def flops(self) -> int:
        return 2 * math.prod(self.bounds)

    def parallel_dims(self) -> list[int]:
        return [i for i, it in enumerate(self.iterators) if it == "parallel"]

    def reduction_dims(self) -> list[int]:
        return [i for i, it in enumerate(self.iterators) if it == "reduction"]

    def operand_dims(self) -> tuple[list[int | None], ...]:
        """Per operand (lhs, rhs, out), per result position: the loop dim it is indexed by plainly, or None
        for a compound expression (d2 + d5)."""
        return tuple(_results(m) for m in self.maps)

    def dim_groups(self) -> dict[str, list[int]]:
        """The groups a matcher pins: contraction (batch, m, n, k) or convolution (batch, output_image,
        output_channel, filter, input_channel, depth), each a sorted list of loop dims."""
        lhs, rhs, out = ({d for d in ds if d is not None} for ds in self.operand_dims())
        if self.kind == "contraction":
            return {"batch": sorted(lhs & rhs & out), "m": sorted((lhs & out) - rhs),
                    "n": sorted((rhs & out) - lhs), "k": sorted((lhs & rhs) - out)}
        in_compound = {d for d in range(self.rank) if d not in lhs and _in_compound(self.maps[0], d)}
        par, red = set(self.parallel_dims()), set(self.reduction_dims())
        return {
            "batch": sorted((lhs & out & par) - rhs),
            "output_image": sorted((in_compound & out & par) - rhs),
            "output_channel": sorted((rhs & out & par) - lhs - in_compound),
            "filter": sorted(in_compound & rhs & red),
            "input_channel": sorted(lhs & rhs & red),
            "depth": sorted(lhs & rhs & out & par),
        }


def read_root(configs_dir: str | Path) -> RootOp | None:
    """The root op of a compiled kernel: the contraction or convolution with the most arithmetic over all its
    dumped dispatches; None when the kernel has none (an elementwise or reduction kernel: only its flags can
    be tuned)."""
    best: RootOp | None = None
    d = Path(configs_dir)
    if not d.is_dir():
        return None
    for f in sorted(d.glob("*.mlir")):
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        for op in parse_dispatch(text, dispatch=_dispatch_name(f.name), source=str(f)):
            if best is None or op.flops > best.flops:
                best = op
    return best


def _dispatch_name(file_name: str) -> str:
    stem = file_name.removesuffix(".mlir")
    return stem.removeprefix("configured_module_").removeprefix("configured_")


_OP_RE = re.compile(r"=\s*(linalg\.[a-z_0-9]+)\b")


def parse_dispatch(text: str, dispatch: str = "", source: str = "") -> list[RootOp]:
    """Every configurable contraction / convolution op in one dumped dispatch."""
    translation = _attr_after(text, "translation_info = ")
    pipeline_m = re.search(r"pipeline\s*=\s*#iree_(?:cpu|gpu)\.pipeline<([A-Za-z]+)>", translation or "")
    if pipeline_m is None:
        pipeline_m = re.search(r"#iree_codegen\.translation_info<pipeline\s*=\s*([A-Za-z]+)", translation or "")
    cpu_m = re.search(r'\bcpu = "([^"]+)"', text)
    vec_m = re.search(r"native_vector_size = (\d+)", text)
    gpu_target = _attr_after(text, "iree_codegen.target_info = ") or _attr_after(text, "iree.gpu.target = ") or ""
    ops: list[RootOp] = []
    for line in _op_lines(text):
        m = _OP_RE.search(line)
        if m is None or "lowering_config" not in line:
            continue
        op_name = m.group(1)
        maps = _maps_of(line, op_name)
        if maps is None or len(maps) != 3:
            continue
        iterators = _iterators_of(line, op_name, maps)
        types = _operand_types(line)
        if types is None or len(types) != 3:
            continue
        bounds = _bounds(maps, [t[0] for t in types])
        if bounds is None or "reduction" not in iterators:
            continue
        kind = "convolution" if any(_compound(m_) for m_ in maps[:1]) else "contraction"
        if kind == "contraction" and any(_compound(m_) for m_ in maps):
            continue
        config = _attr_after(line, "lowering_config = ") or ""
        ops.append(RootOp(
            dispatch=dispatch, op_name=op_name, kind=kind, maps=tuple(maps), iterators=tuple(iterators),
            bounds=tuple(bounds), elem_types=(types[0][1], types[1][1], types[2][1]), tiles=parse_tiles(config),
            translation=translation or "", pipeline=pipeline_m.group(1) if pipeline_m else "",
            target_cpu=cpu_m.group(1) if cpu_m else None, vector_bytes=int(vec_m.group(1)) if vec_m else None,
            gpu_target=gpu_target, config=config, source=source))
    return ops


def parse_tiles(config: str) -> dict[str, tuple[int, ...]]:
    """The tile lists of a lowering_config attribute (`distribution = [64, 64, 0]`, ...)."""
    out: dict[str, tuple[int, ...]] = {}
    for name in TILE_FIELDS + ("workgroup", "reduction", "subgroup", "thread"):
        m = re.search(rf"\b{name} = \[([0-9,\s]*)\]", config)
        if m:
            out[name] = tuple(int(x) for x in m.group(1).replace(" ", "").split(",") if x)
    return out


def _op_lines(text: str) -> list[str]:
    """Each op's first line (where its attributes and operand types are printed)."""
    return [ln for ln in text.splitlines() if "linalg." in ln]


def _maps_of(line: str, op_name: str) -> list[str] | None:
    m = re.search(r"indexing_maps = \[(.*?)\]\s*(?:,\s*iterator_types|ins\(|\}|\{)", line)
    if m:
        return re.findall(r"affine_map<(\([^<]*?\))>", m.group(1))
    named = NAMED_MAPS.get(op_name)
    return list(named) if named else None


def _iterators_of(line: str, op_name: str, maps: list[str]) -> list[str]:
    m = re.search(r"iterator_types = \[([^\]]*)\]", line)
    if m:
        return [s.strip().strip('"') for s in m.group(1).split(",")]
    # named contraction: a loop dim missing from the output is a reduction
    out_dims = {d for d in _results(maps[2]) if d is not None}
    return ["parallel" if d in out_dims else "reduction" for d in range(_num_dims(maps[0]))]


def _operand_types(line: str) -> list[tuple[list[int], str]] | None:
    ins = re.search(r"ins\([^:]*:\s*([^)]*)\)", line)
    outs = re.search(r"outs\([^:]*:\s*([^)]*)\)", line)
    if ins is None or outs is None:
        return None
    found = []
    for t in re.findall(r"tensor<([^>]*)>", ins.group(1) + " " + outs.group(1)):
        parts = t.split("x")
        elem = parts[-1].split(",")[0].strip()
        if elem not in _ELEM_TYPES or not all(p.isdigit() for p in parts[:-1]):
            return None
        found.append(([int(p) for p in parts[:-1]], elem))
    return found


def _num_dims(amap: str) -> int:
    head = amap.split("->")[0]
    return len([x for x in head.strip().strip("()").split(",") if x.strip()])


def _results(amap: str) -> list[int | None]:
    tail = amap.split("->", 1)[1].strip()
    tail = tail[1:-1] if tail.startswith("(") and tail.endswith(")") else tail
    out: list[int | None] = []
    for expr in (e.strip() for e in tail.split(",")):
        m = re.fullmatch(r"d(\d+)", expr)
        out.append(int(m.group(1)) if m else None)
    return out


def _compound(amap: str) -> bool:
    return any(r is None for r in _results(amap))


def _in_compound(amap: str, d: int) -> bool:
    tail = amap.split("->", 1)[1]
    exprs = [e.strip() for e in tail.strip().strip("()").split(",")]
    return any(re.search(rf"\bd{d}\b", e) and not re.fullmatch(r"d\d+", e) for e in exprs)


def _bounds(maps: list[str], shapes: list[list[int]]) -> list[int] | None:
    n = _num_dims(maps[0])
    bounds: list[int | None] = [None] * n
    for amap, shape in zip(maps, shapes):
        res = _results(amap)
        if len(res) != len(shape):
            return None
        for d, size in zip(res, shape):
            if d is not None and bounds[d] is None:
                bounds[d] = size
    if any(b is None for b in bounds):
        return None
    return [int(b) for b in bounds if b is not None]


def _attr_after(text: str, prefix: str) -> str | None:
    """The attribute value starting right after `prefix`: a `#dialect.attr<...>` up to its matching '>', or a
    plain value up to the next ',' / '}' / end of line."""
    i = text.find(prefix)
    if i < 0:
        return None
    j = i + len(prefix)
    plain = min((k for k in (text.find(c, j) for c in ",}\n") if k >= 0), default=len(text))
    lt = text.find("<", j)
    if lt < 0 or lt > plain:
        return text[j:plain] if plain > j else None
    end = angle_end(text, lt + 1)
    return text[j:end + 1] if end >= 0 else None
