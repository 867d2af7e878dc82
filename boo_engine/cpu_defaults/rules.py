"""The op class of a kernel and the built-in per-op-class rules (flags, formulation, build), where the cause is
known; the figures behind each are in its docstring and docs/performance.md."""
from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..ops.conv_forms import VECTOR_ELEMS, channels_innermost
from ..targets import BOO_BUILD

if TYPE_CHECKING:  # pragma: no cover
    from ..ops.base import OpSignature

IM2COL = "--iree-global-opt-use-im2col-for-convs"
DATA_TILING = "--iree-opt-data-tiling"
#: LLVM may reorder a floating-point sum: partial sums in vector lanes, added up at the end, instead of one add
#: waiting for the one before (IREE turns it on from --iree-opt-level=O2; BOO compiles at O1 and ours at the default)
REASSOCIATE = "--iree-llvmcpu-reassociate-fp-reductions=true"
#: the ops whose kernels are reductions over many elements per output (statistics over a row or a channel)
REDUCING = frozenset({"layernorm", "bnorm"})


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
      Zen 3 (docs/performance.md). Except too a stride-1 channels-first kxk conv on a CPU with AVX-512 (16
      floats a register): there IREE's own conv was as fast or faster. On a 2-core Zen 4 (one thread, us per
      call; IREE's conv, im2col, BOO's build): n2 c64 28x28 3x3 1,558 / 1,833 / 1,559, n1 c128 14x14 753 / 885 /
      755, n8 c8 16x16 55 / 93 / 55, n8 c3 32x32 (a small CNN's first conv) 46 / 172 / 46; on a Zen 5 im2col
      won only 1.17x on the first (1,287 -> 1,102), where the AVX2-only Zen 3 took it 2.5x faster. (The best
      column takes most of these as our matmul instead: `rule_conv_matmul`.)
    - bf16 channels-last 1x1 forward convs: data-tiling only with native bf16 dot products (avx512bf16 or
      amx-bf16): IREE's x86 data tiles for bf16 are sized for VDPBF16PS. Without them bf16 tiles fall back to
      unpacking every element: 4.3x faster on a Zen 5 (avx512bf16), 28x SLOWER on a Zen 3 (19.4 vs 0.69 ms).
    - fp16 channels-last 1x1 forward convs: data-tiling only with avx512f: f16 takes the f32 tile sizes, 16x16
      zmm tiles with AVX-512 (2x faster on a Zen 5) but 8x8 ymm tiles on AVX2, where it was shape-dependent on
      a Zen 3 (1.25x slower on n4 c35 48x32, 1.16x faster on n8 c128->384 24x48): no rule without a cause.
    - layer norms and batch norms: `rule_reduction_flags`, which per_op_default_flags adds to any class's flags.
    - nothing else: im2col does not compile for fp16/bf16 in IREE 3.13 ("'arith.addf' op requires the same
      type"), backward and grouped convs had no consistent winner, and data-tiling breaks tuning specs on
      matmuls (the tune --defaults table may still choose it per machine for convs).
    """
    if not cls.is_conv or cls.op != "conv" or cls.mode != "forward":
        return []
    if cls.dtype == "float32":
        if cls.channels_last and cls.pointwise:
            return []
        if not cls.channels_last and not cls.pointwise and not cls.detail and "avx512f" in features:
            return []   # a stride-1 NCHW kxk conv with AVX-512: IREE's own conv (see above)
        return [IM2COL]
    if cls.channels_last and cls.pointwise:
        if cls.dtype == "bfloat16" and ("avx512bf16" in features or "amx-bf16" in features):
            return [DATA_TILING]
        if cls.dtype == "float16" and "avx512f" in features:
            return [DATA_TILING]
    return []


#: the formulation (ops/conv_forms.py) the rules choose for the `best` column where they choose one
MATMUL = "matmul"


def rule_formulation(cls: OpClass) -> str | None:
    """The built-in formulation of a class for the `best` column (None: the op's default export), where the cause
    is known. IREE 3.13 lowers `aten.convolution_backward` to generic ops no im2col applies to, and a grouped
    forward conv to a grouped linalg conv IREE has no im2col for either: written as an explicit im2col and a
    matmul (`matmul`), they are tiled as matmuls. Measured on a 2-core Zen 3, one thread (docs/performance.md,
    "Kernel formulations"): backward-weight 3x3 36.8 -> 2.7 ms, backward-data 9.2 -> 0.61 ms, grouped g4 2.1 ->
    0.22 ms, bf16 gradients 29.5 / 19.2 -> 1.36 / 1.48 ms, NHWC gradients 91 / 121 -> 7.2 / 10.8 ms, all three
    gradients 45.7 -> 4.3 ms. A STRIDED data gradient in the matmul formulation is a matmul and a fold
    (`conv_forms.fold_data_grad`: no multiply by the zeros a stride inserts, which the forward conv of the dilated
    dLdy (`fwdconv`) and its im2col do); on a 2-core Zen 4, one thread, us per call, the rule before (fwdconv for
    the data gradient alone, the matmul of the dilated dLdy with all gradients) -> now (torch): data gradient n2
    c16 56x56 s2 1,195 -> 289 (391), n2 c64 56x56 s2 -> k128 11,739 -> 3,964 (2,803), n8 c8 32x32 s2 199 -> 128
    (396); data and weight gradients n8 c8 32x32 s2 378 -> 263 (341), n2 c16 56x56 s2 671 -> 418 (390), c16 -> k32
    1,217 -> 589 (537), n2 c32 28x28 s2 -> k64 1,188 -> 487 (497), n4 c3 64x64 s2 -> k16 with the bias 1,084 -> 304
    (488). A channels-last kxk forward conv: IREE 3.13's im2col of it is ~2.3x slower than of the
    same conv channels-first (Zen 5: 2.53 vs 1.10 ms), our explicit im2col + matmul is not: 4.0 -> 2.1 ms on a
    2-core Zen 4 (n2 c64 28x28 3x3; BOO's build 21 ms), and the Zen 3's tune chose it too. Transposed convs
    (written as ordinary convs already) and everything else: none. A kernel that lacks the formulation (a bias
    gradient alone has no conv to rewrite) keeps its default."""
    if cls.op != "conv":
        return None
    details = cls.detail.split("-") if cls.detail else []
    if cls.mode == "backward":
        return MATMUL
    if "grouped" in details or (cls.channels_last and not cls.pointwise):
        return MATMUL
    return None


#: the shortest dot product (input channels x filter taps) for which a data-tiled matmul beat the other
#: formulations of a stride-1 kxk f32 conv with AVX-512 (`rule_conv_matmul`)
DEEP_REDUCTION = 256
#: the same for a filter other than 3x3 (3x1, 1x3, 5x5 ...), where the data-tiled matmul wins sooner
DEEP_REDUCTION_OTHER = 192
#: the shortest dot product for which a 3x3 conv is faster as our matmul than as IREE's own conv
MATMUL_REDUCTION_3X3 = 128


def rule_conv_matmul(cls: OpClass, sig: OpSignature, features: Collection[str]) -> tuple[str, ...] | None:
    """The flags with which the best column takes a plain (stride-1, ungrouped, 2-D) kxk f32 forward conv as the
    matmul formulation on a CPU with AVX-512, by rule: `(DATA_TILING,)`, `()` (the plain matmul), or None (not by
    this rule: IREE's own conv channels-first, the matmul channels-last, as `rule_formulation` says). On a 2-core
    Zen 4, one thread, us per call (IREE's conv / our matmul / the matmul data-tiled; torch beside):

    - Data-tiling packs the im2col matrix and the filter into 16-float tiles that the matmul then reads in order;
      the packing is paid once per element, so it pays when each element is used in a long dot product
      (C x taps >= DEEP_REDUCTION), and not in a short one. Against the rules before (IREE's conv NCHW, the
      matmul NHWC; 5 rounds interleaved): NCHW n2 c64 28x28 3x3 1,553 -> 1,307, n1 c128 14x14 750 -> 609, n2 c32
      28x28 423 -> 371; NHWC 1,589 -> 1,241, 871 -> 621, 428 -> 357; but c16 3x3 (144 long) 631 -> 723.
    - IREE's own conv is fast only for a 3x3 filter with short dot products: n8 c3 32x32 47 / 61 / 85, n8 c8
      32x32 117 / 178 / 246; already at c16 the matmul wins (n2 28x28 143 / 119 / 117, 56x56 633 / 610 / 724) and
      at c24 by 2.6x (n1 48x32 480 / 184 / 270; torch 325).
    - Every other filter shape is 10-25x slower as IREE's conv (the convs of real models, n1, 3 rounds): c64 38x38
      3x1 8,674 / 536 / 432 (torch 389), 1x3 7,475 / 536 / 430, c96 48x32 3x1 20,114 / 809 / 863 (840), c64
      38x19 5x1 6,227 / 430 / 341, c32 38x38 3x1 2,221 / 148 / 135, c48 48x32 1x3 4,066 / 221 / 246, c16 1x3
      497 / 35 / 43, n2 c8 3x1 238 / 17 / 23, n2 c8 5x5 1,192 / 694 / 318 (201), c16 5x5 2,367 / 326 / 291: the
      matmul always, data-tiled from DEEP_REDUCTION_OTHER.
    - Data tiles only where the output positions per image are not whole vector tiles (VECTOR_ELEMS): where they
      are, the plain matmul with aligned workgroup tiles (`rule_aligned_distribution`, every best-column kernel)
      is faster than the data tiles: n2 c64 28x28 3x3 1,398 -> 1,130 (torch 1,058), NHWC 1,325 -> 1,171 (1,257),
      n1 c64 56x56 3,377 -> 2,418 (2,127), c96 48x32 3x1 891 -> 819 (850), c48 48x32 3x3 753 -> 646 (627), c96
      3,022 -> 2,555 (2,323); but n1 c128 14x14 (196 positions) 625 data-tiled against 700. A small image whose
      matmul puts the output channels innermost instead (`conv_forms.channels_innermost`: 7x7, 32-256 channels)
      has those whole: n2 c256 7x7 2,520 data-tiled -> 1,361 (torch 1,002).
    Not measured on an AVX2 CPU: none there."""
    if not (cls.op == "conv" and cls.dtype == "float32" and cls.mode == "forward" and cls.filter == "kxk"
            and not cls.detail and "avx512f" in features):
        return None
    d = sig.describe()
    taps = [int(k) for k in d.get("filter_spatial") or ()]
    if len(taps) != 2:   # measured on 2-D convs only
        return None
    reduction = int(d.get("in_channels") or 0) * taps[0] * taps[1]
    positions = math.prod(int(s) for s in d.get("output_spatial") or (0,))
    channels = int(d.get("out_channels") or 0) // max(1, int(d.get("groups") or 1))
    # output positions (or, where they are not, the output channels: the matmul then puts those innermost) in
    # whole vector tiles: the plain matmul with aligned workgroup tiles beats the data tiles
    whole = positions % VECTOR_ELEMS == 0 or channels_innermost(positions, channels, taps)
    tiled = () if whole else (DATA_TILING,)
    if reduction >= DEEP_REDUCTION:
        return tiled
    if taps != [3, 3]:
        return tiled if reduction >= DEEP_REDUCTION_OTHER else ()
    return () if reduction >= MATMUL_REDUCTION_3X3 else None


#: aten calls that are one 2-D matmul: name -> the index of its right-hand operand (B), and whether B is stored
#: (N, K) as a linear layer's weight (read transposed) rather than (K, N)
_MATMUL_CALLS = {"mm": (1, False), "matmul": (1, False), "addmm": (2, False), "linear": (1, True)}


def rule_data_tiled_gemm(sig: OpSignature, features: Collection[str]) -> bool:
    """Whether the best column compiles a 2-D matmul (a `gemm` command, or an aten mm / addmm / matmul / linear
    call) with data-tiling, by rule: a bf16 one on a CPU with native bf16 dot products (avx512bf16 or amx-bf16:
    IREE's bf16 data tiles are VDPBF16PS's, as for the 1x1 conv rule), an f32 or f16 one whose right-hand operand
    is read transposed (stored (N, K): `--transB`, a linear layer's weight) on a CPU with avx512f. Without tiles
    IREE reads the transposed operand across its rows; data-tiling packs it once into 16-float tiles read in
    order. On a 2-core Zen 4, one thread, 5 rounds interleaved, median / torch's without -> with: f32 transB
    256x512x512 1.07 -> 0.93, 1024x512x1024 1.20 -> 0.91, 16x1024x4096 0.78 -> 0.71, transA and transB 1.06 ->
    0.90, addmm 2048x768x768 1.03 -> 0.99, linear 1.03 -> 0.95, a small transformer's addmm (K 64-128) 0.91 ->
    0.85; f16 transB 0.36 -> 0.33; bf16 3.4-4.1 -> 0.96-1.00 whichever operand is transposed. But an untransposed
    f32 operand lost 1-3% (gemm) to 10-13% (aten mm), f16 10%, and a batched matmul (16 x 64x16x64) 12%: none."""
    d = sig.describe()
    dtype = str(d.get("dtype") or "")
    if dtype not in ("float32", "float16", "bfloat16"):
        return False
    if sig.op == "gemm":
        transposed_b = bool(d.get("transB"))
    elif sig.op == "aten" and _aten_name(d) in _MATMUL_CALLS:
        index, weight = _MATMUL_CALLS[_aten_name(d)]
        dims, strides = d.get("arg_dims") or [], d.get("arg_strides") or []
        if len(dims) <= index or len(strides) <= index or len(dims[index]) != 2 or len(dims[index - 1]) != 2:
            return False
        unit_along_k = strides[index][-1 if weight else 0] == 1 and dims[index][-1 if weight else 0] > 1
        transposed_b = unit_along_k and strides[index][0 if weight else 1] != 1
    else:
        return False
    if dtype == "bfloat16":
        return "avx512bf16" in features or "amx-bf16" in features
    return transposed_b and "avx512f" in features


#: the fewest input channels for which a channels-last 1x1 f32 conv gained from data-tiling
POINTWISE_CHANNELS = 32


def rule_data_tiled_pointwise(cls: OpClass, sig: OpSignature, features: Collection[str]) -> bool:
    """Whether the best column compiles a channels-last 1x1 f32 forward conv (stride 1, ungrouped) with
    data-tiling, by rule: on an AVX-512 CPU, with POINTWISE_CHANNELS input channels or more. It is a matmul whose
    right-hand operand, the filter (F, C) channels-last, is read transposed, as `rule_data_tiled_gemm`'s. On a
    2-core Zen 4, one thread, 5 rounds interleaved, us per call, without -> with (torch): n8 c128 24x48 -> k384
    10,326 -> 8,882 (12,919), n4 c35 48x32 280 -> 237 (706), n2 c64 56x56 -> k256 2,167 -> 1,972 (3,062), n1 c512
    14x14 -> k2048 4,525 -> 4,291 (4,959), n2 c256 56x56 -> k64 2,241 -> 2,255 (7,886); but n4 c16 32x32 23 -> 31
    (164), and a strided one unchanged (71). Only the best column takes it (the per-op flags are what tuning specs
    are compiled with, and data-tiling leaves them nothing to match)."""
    if not (cls.op == "conv" and cls.dtype == "float32" and cls.mode == "forward" and cls.channels_last
            and cls.pointwise and not cls.detail and "avx512f" in features):
        return False
    return int(sig.describe().get("in_channels") or 0) >= POINTWISE_CHANNELS


def rule_build(cls: OpClass) -> str | None:
    """The build the `best` column takes for a class by rule, where BOO's own beats ours for a known cause (None:
    ours). A layer norm forward: BOO exports it with `force_single_dispatch`, ONE dispatch, where our export is four
    (statistics, normalization), each re-reading the input: 1.76 vs 3.41 ms for 16x128x768 f32 on a 2-core Zen 4."""
    return BOO_BUILD if cls.op == "layernorm" and cls.mode == "forward" else None


def rule_reduction_flags(cls: OpClass) -> list[str]:
    """The flags a reduction's kernel gets by rule in any build, ours or BOO's in the best column: reassociated
    floating-point sums (REASSOCIATE). Without it LLVM may not reorder a sum, so each row's (or channel's) sum is one
    chain of dependent adds, bound by the add's latency rather than the vector units; with it, partial sums in
    vector lanes. The cause is the compiler's, on any CPU; the order of the additions changes as torch's own
    vectorized reductions change it, and the numerics check still judges every kernel. On a 2-core Zen 4, one
    thread (BOO's build, us per call; torch beside it): layer norm 16x128x768 f32 1,043 -> 476 (torch 555), bf16
    2,182 -> 579 (torch 1,497), f32 backward 3,017 -> 2,269 (torch 3,955), batch norm n8 c64 28x28 forward 273 ->
    141 (torch 381); batch norm inference and every conv and gemm unchanged."""
    return [REASSOCIATE] if cls.op in REDUCING else []


def rule_reassociated_gradients(cls: OpClass) -> bool:
    """Whether the best column compiles a conv backward kernel that computes a weight or a bias gradient with
    reassociated sums (REASSOCIATE), by rule: those gradients are sums over every image and output position, which
    without it LLVM adds one after another (`rule_reduction_flags` has the cause). On a 2-core Zen 4, one thread,
    us per call, without -> with: n8 c8 16x16 1x1 all gradients with the bias 30.6 -> 18.6, n8 c3 32x32 3x3
    weight and bias 184 -> 135, n8 c8 32x32 s2 all gradients 271 -> 259. And its bias gradient, 30x torch's
    rounding noise summed in one chain of 2,048 adds, passes the numerics check with it. Best column only (the
    boo column is BOO's flags, exactly)."""
    if not cls.is_conv or cls.mode != "backward":
        return False
    kind = cls.detail.split("-", 1)[0]
    return kind in ("weight", "bias", "all")


def _aten_name(d: dict) -> str:
    """An aten call's op without namespace or overload (`aten::addmm.out` -> `addmm`)."""
    return str(d.get("aten") or "").rsplit("::", 1)[-1].split(".", 1)[0]


def _filter_spatial(d: dict, sig: OpSignature) -> tuple[int, ...]:
    """Filter spatial sizes from the filter shape and layout, when describe() has no filter_spatial."""
    fl = str(d.get("fil_layout") or "").upper()
    shapes = sig.input_shapes()
    if fl and len(shapes) >= 2 and len(shapes[1]) == len(fl):
        return tuple(int(s) for s, c in zip(shapes[1], fl) if c not in "NCKF")
    return ()


#: the most vector tiles in one workgroup's tile of a dimension when `rule_aligned_distribution` re-chooses it
ALIGNED_MAX_VECTORS = 8


def rule_aligned_distribution(bounds: Sequence[int], parallel: Collection[int], distribution: Sequence[int],
                              vector: Sequence[int]) -> tuple[int, ...] | None:
    """The distribution (workgroup) tiles of a kernel's root op with each parallel dimension's tile a whole number
    of its vector tiles, by rule, or None where IREE's already are. Each tile IREE chose that is not such a
    multiple becomes the largest multiple of the vector tile, up to ALIGNED_MAX_VECTORS of them, that divides the
    dimension (every workgroup then runs whole vector tiles), else IREE's rounded up to a multiple (only the last
    workgroup is left a remainder). The cause: IREE 3.13 on the CPU picks a distribution tile that divides the
    dimension without looking at the vector tile, e.g. 56 of 784 where the vector tile is 16, so EVERY workgroup
    runs 3.5 vector tiles, a peeled remainder included. Applied by a first pass of the compiler that stops at the
    configured executables (compile/aligned.py) and a tuning spec for the root op alone. On a 2-core Zen 4, one
    thread, 4 rounds interleaved, us per call, the best column before (data-tiled where it was) -> the matmul
    formulation aligned (torch): conv n2 c64 28x28 3x3 1,398 -> 1,153 (1,106), NHWC 1,325 -> 1,185 (1,267), n1
    c64 56x56 3,377 -> 2,418 (2,127), n2 c16 28x28 118 -> 93 (122), grouped g4 135 -> 116 (123), the data
    gradient n2 c32 28x28 462 -> 340 (326)."""
    out = list(distribution)
    for d in parallel:
        if d >= len(out) or d >= len(vector) or d >= len(bounds):
            continue
        v, b, t = int(vector[d]), int(bounds[d]), int(out[d])
        if v <= 1 or t <= 0 or t % v == 0 or t >= b:
            continue
        whole = [m for m in range(v, min(b, ALIGNED_MAX_VECTORS * v) + 1, v) if b % m == 0]
        out[d] = max(whole) if whole else min(-(-t // v) * v, b)
    new = tuple(out)
    return None if new == tuple(distribution) else new
