"""GPU facts the tuner reads from a compiled kernel's dumped executable configurations: the target's (MMA
intrinsics, subgroup sizes, workgroup and shared-memory limits, from `#iree_gpu.target<...>`), the compiler's own
configuration of the root op (its `#iree_gpu.lowering_config` and `translation_info`), and the contraction the
root op is tiled as: the op itself for a matmul, the implicit GEMM (igemm) IREE turns a convolution into.

The igemm of a convolution is IREE's to define (which filter dims it collapses into K, which side is M), so it is
asked from IREE's own Python bindings (`iree_codegen.get_igemm_generic_conv_details`) on the dumped file, never
re-derived here. Everything else is text in, records out.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from ..variants.mlir_text import angle_end
from ..variants.root_op import RootOp, _results

#: intrinsic families IREE 3.13 lists for a target but cannot compile with TileAndFuse: the reason, measured
BROKEN_INTRINSICS: dict[str, str] = {
    "NV_WMMA_": "IREE 3.13's TileAndFuse fails on NV_WMMA ('tensor.expand_shape' with garbage sizes)",
}

_TYPE_NAMES = {"F16": "f16", "BF16": "bf16", "F32": "f32", "F64": "f64", "I8": "i8", "I32": "i32"}
_INTRINSIC_RE = re.compile(r"(?P<family>[A-Z0-9_]+?)_(?P<acc>F32|F16|BF16|I32|F64)_(?P<m>\d+)x(?P<n>\d+)x(?P<k>\d+)"
                           r"_(?P<ab>[A-Z0-9]+(?:_[A-Z0-9]+)?)")
BYTES = {"f64": 8, "f32": 4, "i32": 4, "f16": 2, "bf16": 2, "i16": 2, "i8": 1, "i64": 8}


@dataclass(frozen=True)
class Intrinsic:
    """One MMA intrinsic: C[m, n] (acc) += A[m, k] (lhs) * B[k, n] (rhs) per subgroup."""

    name: str           # as IREE spells it: MFMA_F32_16x16x16_F16
    m: int
    n: int
    k: int
    lhs: str            # element types, MLIR spelling
    rhs: str
    acc: str


def parse_intrinsic(name: str) -> Intrinsic | None:
    """The shape and types of an intrinsic named like IREE's (`<FAMILY>_<ACC>_<M>x<N>x<K>_<A>[_<B>]`); None for
    block intrinsics (`4x4x4x16B`) and element types the tuner does not configure."""
    m = _INTRINSIC_RE.fullmatch(name)
    if m is None:
        return None
    ab = m.group("ab").split("_")
    types = [_TYPE_NAMES.get(t) for t in (m.group("acc"), ab[0], ab[-1])]
    if any(t is None for t in types):
        return None
    acc, lhs, rhs = (str(t) for t in types)
    return Intrinsic(name, int(m.group("m")), int(m.group("n")), int(m.group("k")), lhs, rhs, acc)


@dataclass(frozen=True)
class GpuTarget:
    """What `#iree_gpu.target<...>` says about the arch (what configurations are possible on it)."""

    arch: str                            # gfx942, sm_80 ...
    intrinsics: tuple[str, ...]          # the `mma = [...]` list, in the target's order
    subgroup_sizes: tuple[int, ...]      # wave64 / wave32 choices
    max_workgroup_sizes: tuple[int, ...]
    max_threads: int                     # per workgroup
    shared_memory_bytes: int             # per workgroup
    vgpr_bits: int | None = None         # register file per thread (AMD only)

    @property
    def vendor(self) -> str:
        return "amd" if self.arch.startswith("gfx") else "nvidia"

    def mma_for(self, lhs: str, rhs: str, acc: str) -> list[Intrinsic]:
        """The target's intrinsics that compute this op's element types exactly (no accumulator up-cast), those
        known broken excluded."""
        out = []
        for name in self.intrinsics:
            i = parse_intrinsic(name)
            if i is None or any(name.startswith(p) for p in BROKEN_INTRINSICS):
                continue
            if (i.lhs, i.rhs, i.acc) == (lhs, rhs, acc):
                out.append(i)
        return out


def parse_gpu_target(text: str) -> GpuTarget | None:
    """The facts of a `#iree_gpu.target<...>` attribute; None for anything else (a CPU target)."""
    if "#iree_gpu.target<" not in text:
        return None
    arch = re.search(r'arch = "([^"]+)"', text)
    if arch is None:
        return None
    mma = re.search(r"\bmma = \[([^\]]*)\]", text)
    names = tuple(re.findall(r"<([A-Za-z0-9_]+)>", mma.group(1))) if mma else ()
    return GpuTarget(
        arch=arch.group(1), intrinsics=names,
        subgroup_sizes=_ints(text, "subgroup_size_choices") or (64,),
        max_workgroup_sizes=_ints(text, "max_workgroup_sizes") or (1024, 1024, 1024),
        max_threads=_int(text, "max_thread_count_per_workgroup") or 1024,
        shared_memory_bytes=_int(text, "max_workgroup_memory_bytes") or 65536,
        vgpr_bits=_int(text, "vgpr_space_bits"))


def _ints(text: str, name: str) -> tuple[int, ...]:
    m = re.search(rf"\b{name} = \[([0-9,\s]*)\]", text)
    return tuple(int(x) for x in m.group(1).replace(" ", "").split(",") if x) if m else ()


def _int(text: str, name: str) -> int | None:
    m = re.search(rf"\b{name} = (\d+)", text)
    return int(m.group(1)) if m else None


# ---- the compiler's configuration of the root op ------------------------------------------------------------

@dataclass(frozen=True)
class GpuConfig:
    """The compiler's choice for the root op: the lowering_config's entries and the translation_info's."""

    fields: dict[str, str]               # lowering_config entry -> its value verbatim ("" for a unit attribute)
    pipeline: str                        # TileAndFuse, VectorDistribute ...
    workgroup_size: tuple[int, ...]
    subgroup_size: int | None
    options: dict[str, str]              # gpu_pipeline_options entries (prefetch_num_stages = 2 ...)
    translation: str                     # verbatim

    @property
    def mma_kind(self) -> str | None:
        m = re.search(r"<([A-Za-z0-9_]+)>", self.fields.get("mma_kind", ""))
        return m.group(1) if m else None

    def ints(self, name: str) -> tuple[int, ...] | None:
        v = self.fields.get(name)
        if v is None or not (v.startswith("[") and v.endswith("]")):
            return None
        return tuple(int(x) for x in v[1:-1].replace(" ", "").split(",") if x)


def parse_gpu_config(root: RootOp) -> GpuConfig | None:
    """The root op's GPU configuration; None when it has no `#iree_gpu.lowering_config`."""
    body = _inside(root.config, "#iree_gpu.lowering_config<")
    if body is None or not (body.startswith("{") and body.endswith("}")):
        return None
    fields: dict[str, str] = {}
    for entry in split_top(body[1:-1]):
        name, eq, value = entry.partition("=")
        fields[name.strip()] = value.strip() if eq else ""
    t = root.translation
    ws = re.search(r"workgroup_size = \[([0-9,\s]*)\]", t)
    sg = re.search(r"subgroup_size = (\d+)", t)
    opts_body = _inside(t, "#iree_gpu.pipeline_options<")
    options: dict[str, str] = {}
    for entry in split_top(opts_body or ""):
        name, _, value = entry.partition("=")
        options[name.strip()] = value.strip()
    return GpuConfig(fields=fields, pipeline=root.pipeline,
                     workgroup_size=tuple(int(x) for x in ws.group(1).replace(" ", "").split(",") if x) if ws else (),
                     subgroup_size=int(sg.group(1)) if sg else None, options=options, translation=t)


def _inside(text: str, head: str) -> str | None:
    """What the attribute starting with `head` (which ends with its opening '<') holds, up to the matching '>'."""
    i = text.find(head)
    if i < 0:
        return None
    start = i + len(head)
    end = angle_end(text, start)
    return text[start:end] if end >= 0 else None


def split_top(text: str) -> list[str]:
    """`a = [1, 2], b = #x<c, d>, e` -> ['a = [1, 2]', 'b = #x<c, d>', 'e']: commas outside any bracket."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for i, c in enumerate(text):
        if c in "<[{(":
            depth += 1
        elif c in ">]})" and not (c == ">" and i and text[i - 1] == "-"):
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


# ---- the contraction the root op is tiled as -----------------------------------------------------------------

@dataclass(frozen=True)
class GemmView:
    """The loops a GPU lowering_config of the root op indexes: the op's own for a contraction, the igemm's
    for a convolution; each operand's dims, and the dims grouped as a contraction's."""

    bounds: tuple[int, ...]
    operands: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]   # lhs, rhs, out: loop dims they use
    igemm: bool

    def _group(self, inside: tuple[int, ...], outside: tuple[int, ...]) -> tuple[int, ...]:
        sets = [set(o) for o in self.operands]
        return tuple(d for d in range(len(self.bounds))
                     if all(d in sets[i] for i in inside) and not any(d in sets[i] for i in outside))

    @property
    def batch(self) -> tuple[int, ...]:
        return self._group((0, 1, 2), ())

    @property
    def m(self) -> tuple[int, ...]:
        return self._group((0, 2), (1,))

    @property
    def n(self) -> tuple[int, ...]:
        return self._group((1, 2), (0,))

    @property
    def k(self) -> tuple[int, ...]:
        return self._group((0, 1), (2,))


def gemm_view(root: RootOp) -> GemmView | None:
    """The contraction the GPU configuration of `root` is written for; None when the maps are not plain dims
    (a contraction) or IREE has no igemm for the convolution (or its dump is gone)."""
    if root.kind == "contraction":
        ops = root.operand_dims()
        if any(d is None for o in ops for d in o):
            return None
        lhs, rhs, out = (tuple(int(d) for d in o if d is not None) for o in ops)
        return GemmView(tuple(root.bounds), (lhs, rhs, out), igemm=False)
    if not root.source or not Path(root.source).is_file():
        return None
    found = _igemm(root.source, tuple(root.maps))
    if found is None:
        return None
    bounds, maps = found
    dims = []
    for amap in maps:
        res = _results(amap)
        if any(r is None for r in res):
            return None
        dims.append(tuple(int(r) for r in res if r is not None))
    return GemmView(bounds, (dims[0], dims[1], dims[2]), igemm=True)


@functools.lru_cache(maxsize=32)
def _igemm(source: str, maps: tuple[str, ...]) -> tuple[tuple[int, ...], tuple[str, ...]] | None:
    """IREE's igemm of the convolution with these indexing maps in a dumped configuration file: its loop
    bounds and its lhs / rhs / out maps (as `(d0, ...) -> (...)` text)."""
    from iree.compiler import ir
    from iree.compiler.dialects import iree_codegen

    with ir.Context():
        module = ir.Module.parse(Path(source).read_text(errors="replace"))
        op = _find_op(module.operation, maps)
        if op is None:
            return None
        details = iree_codegen.get_igemm_generic_conv_details(op)
        if details is None:
            return None
        bounds = tuple(int(b) for b in details.igemm_loop_bounds)
        out_maps = tuple(re.sub(r"^affine_map<(.*)>$", r"\1", str(m)) for m in details.igemm_contraction_maps)
    return (bounds, out_maps) if len(out_maps) == 3 else None


def _find_op(op: object, maps: tuple[str, ...]) -> object | None:
    for region in op.regions:   # type: ignore[attr-defined]
        for block in region.blocks:
            for child in block.operations:
                inner = child.operation
                attrs = inner.attributes
                if "lowering_config" in attrs and "indexing_maps" in attrs:
                    text = str(attrs["indexing_maps"])
                    if all(f"affine_map<{m}>" in text for m in maps):
                        return inner
                found = _find_op(inner, maps)
                if found is not None:
                    return found
    return None


# ---- a configuration delivered without a spec -----------------------------------------------------------------

def configured_source(config_text: str, root: RootOp, info: str, marker: str) -> str:
    """The dumped configuration of the root's dispatch with the root op configured as `info` (a
    `#iree_codegen.compilation_info<lowering_config = ..., translation_info = ...>`) and `marker` set on it:
    an executable source to substitute (`--iree-hal-substitute-executable-source=DISPATCH=file`), for targets
    whose compiler ignores tuning specs (cuda in IREE 3.13). The dumped configuration of such a build shows
    the marker and the new configuration, as a spec's would."""
    body = _inside(info, "#iree_codegen.compilation_info<")
    parts = split_top(body or "")
    fields = dict((p.partition("=")[0].strip(), p.partition("=")[2].strip()) for p in parts)
    lowering, translation = fields.get("lowering_config"), fields.get("translation_info")
    if not lowering or not translation or not root.config:
        raise ValueError("not a compilation_info with a lowering_config and a translation_info")
    old = f"lowering_config = {root.config}"
    if config_text.count(old) != 1:
        raise ValueError(f"the root op's configuration is not found once in the dump of {root.dispatch}")
    text = config_text.replace(old, f"{marker}, lowering_config = {lowering}")
    if root.translation and text.count(f"translation_info = {root.translation}") == 1:
        return text.replace(f"translation_info = {root.translation}", f"translation_info = {translation}")
    raise ValueError(f"the translation_info of {root.dispatch} is not found once in its dump")
