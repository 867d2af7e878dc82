"""Layer-norm signatures: normalize over dims [normalized_dim, rank) of an input of any rank >= 1.

Modes are MIOpen's: `--mode 0` MIOPEN_ELEMENTWISE_AFFINE (weight = 1, bias = 0: no learnable affine in PyTorch
terms), `--mode 1` MIOPEN_WEIGHT_BIAS (random weight and bias). Every `-F` works in both modes: in mode 0 the
weight and bias gradients are those of the implicit weight = 1 and bias = 0 (what a training step would apply if
they were learnable).

Argument conventions are BOO's (iree-turbine `op_exports/layer_norm.py`), so kernels and their inputs line up with
what BOO users know:
- forward (`-F 1`): (x[, weight, bias in mode 1]) -> (y, mean, rstd); mean / rstd have the input's leading dims
  and a 1 for every normalized dim (what `aten.native_layer_norm` returns), in the op's dtype.
- input backward (`-F 2`): (dLdy, x, weight, mean, rstd) in BOTH modes; in mode 0 the weight argument is all
  ones (MIOpen's implicit weight), in mode 1 random. The kernel multiplies by it either way, as BOO's does.
- weight backward (`-F 4`): (dLdy, x, mean, rstd). Bias backward (`-F 8`): (dLdy,).
- full backward (`-F 14`): (dLdy, x, weight, bias, mean, rstd) in mode 1; (dLdy, x, mean, rstd) in mode 0 (BOO
  passes None for both there). The bias is passed although no gradient needs its value, as BOO does.
- the sums BOO lacks (`-F 6`, `10`, `12`) take what their parts take: the weight whenever dLdx is asked for.
Backward kernels return the selected grads in the order (dLdx, dLdw, dLdb); mean / rstd are the forward's saved
statistics, read as given. (A formulation recomputing them from x, as autograd through the forward does, was
1.3-2.6x slower on every shape measured on a Zen 3 and is not the same function when the saved statistics are
rounded or, as in the structured test, not x's: it was dropped.)

`--input-permutation P` (BOO's): x is stored in memory as `x.permute(P)` made contiguous (BOO's
`permute_layout`), so the kernel's x argument has the shape `[shape[p] for p in P]` and the kernel permutes it
back; dLdy and the outputs keep the plain layout.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from boo_engine.ops._lazy import torch

if TYPE_CHECKING:
    import torch

from boo_engine.ops._common import (
    BACKWARD_MODE_NAMES,
    SHORT_DTYPES,
    check_dtype,
    check_size,
    fail,
    label_of,
    numel,
    shape_str,
    short_backward_mode,
)
from boo_engine.ops.base import OpSignature

LAYERNORM_FORW_VALUES = (1, 2, 4, 6, 8, 10, 12, 14)


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 accumulation for 16-bit inputs (as aten does); wider types compute in their own precision."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


#: longest chain of additions in a leading-dims sum (see sum_leading)
SUM_CHUNK = 64


def sum_leading(t: torch.Tensor, lead_dims: list[int]) -> torch.Tensor:
    """Sum over the leading dims, in chunks of SUM_CHUNK rows summed level by level. IREE's CPU code sums a
    reduction in one long chain per output element, where torch sums pairwise: over BOO's 10x32x42x32 (13440 rows)
    the float32 weight and bias grads had 13x torch's error std (2.7e-4 vs 2.0e-5) and failed BOO's criteria.
    Chains of <= 64 additions bring it to torch's level (float64 accumulation would not: IREE demotes f64 to f32
    by default). Rows padded with zeros when the count is not a multiple of the chunk (exact: adding 0)."""
    if not lead_dims:
        # sum(dim=[]) would reduce over EVERY dim, so no leading dims means nothing to reduce
        return t.clone()
    rest = tuple(t.shape[len(lead_dims):])
    rows = t.reshape((-1,) + rest)
    while rows.shape[0] > SUM_CHUNK:
        n = rows.shape[0]
        chunks = -(-n // SUM_CHUNK)
        if chunks * SUM_CHUNK != n:
            pad = torch.zeros((chunks * SUM_CHUNK - n,) + rest, dtype=rows.dtype, device=rows.device)
            rows = torch.cat([rows, pad])
        rows = rows.reshape((chunks, SUM_CHUNK) + rest).sum(dim=1)
    return rows.sum(dim=0)


@dataclass(frozen=True)
class LayerNormSignature(OpSignature):
    op: ClassVar[str] = "layernorm"

    dtype_name: str
    input_shape: tuple[int, ...]
    normalized_dim: int
    eps: float = 1e-5
    affine: bool = False  # MIOpen --mode 1: with weight and bias
    forw: int = 1
    #: BOO's --input-permutation: x's memory order (None or the identity: plain row-major)
    input_permutation: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        op = "layernorm"
        if isinstance(self.eps, int) and not isinstance(self.eps, bool):
            object.__setattr__(self, "eps", float(self.eps))
        object.__setattr__(self, "input_shape", tuple(self.input_shape))
        check_dtype(op, self.dtype_name)
        if len(self.input_shape) < 1:
            raise fail(op, "--input needs at least one dimension")
        for d in self.input_shape:
            check_size(op, "--input dimension", d)
        rank = len(self.input_shape)
        if isinstance(self.normalized_dim, bool) or not isinstance(self.normalized_dim, int) or not (
            0 <= self.normalized_dim < rank
        ):
            raise fail(op, f"--normalized_dim {self.normalized_dim} out of range for a {rank}-D input "
                           f"(expected 0..{rank - 1})")
        if not (isinstance(self.eps, float) and math.isfinite(self.eps) and self.eps >= 0):
            raise fail(op, f"--eps must be a finite number >= 0, got {self.eps!r}")
        if self.forw not in LAYERNORM_FORW_VALUES:
            raise fail(op, f"unsupported -F {self.forw} (expected 1 forward, or a sum of 2 input, 4 weight, "
                           "8 bias grads)")
        perm = self.input_permutation
        if perm is not None:
            perm = tuple(perm)
            if sorted(perm) != list(range(rank)) or any(isinstance(p, bool) for p in perm):
                raise fail(op, f"--input-permutation {' '.join(map(str, perm))} is not a permutation of "
                               f"0..{rank - 1} (the {rank}-D input's dims)")
            # the identity is the plain layout: one signature (and one kernel name) for both spellings
            object.__setattr__(self, "input_permutation", None if perm == tuple(range(rank)) else perm)

    # ---- identity -------------------------------------------------------------------------------------
    @property
    def is_forward(self) -> bool:
        return self.forw == 1

    @property
    def grad_mask(self) -> tuple[bool, bool, bool]:
        """Which of (dLdx, dLdw, dLdb) a backward mode returns; all False for forward."""
        if self.is_forward:
            return (False, False, False)
        return (bool(self.forw & 2), bool(self.forw & 4), bool(self.forw & 8))

    @property
    def mode(self) -> str:
        return "forward" if self.is_forward else BACKWARD_MODE_NAMES[self.grad_mask]

    @property
    def normalized_shape(self) -> tuple[int, ...]:
        return tuple(self.input_shape[self.normalized_dim:])

    @property
    def stats_shape(self) -> tuple[int, ...]:
        """Shape of mean / rstd: leading dims kept, normalized dims 1."""
        return tuple(self.input_shape[: self.normalized_dim]) + (1,) * len(self.normalized_shape)

    @property
    def func_name(self) -> str:
        """Unlike BOO's, distinct for every distinct kernel: normalized rank, dtype, mode, shape, affine, eps."""
        items = ["layer_norm", f"{len(self.normalized_shape)}d", self.dtype_name, self.mode,
                 shape_str(self.input_shape)]
        if self.affine:
            items += ["w", "b"]
        if self.input_permutation is not None:
            items.append("perm" + "".join(map(str, self.input_permutation)))
        items.append("eps" + repr(float(self.eps)))
        return "_".join(items)

    @property
    def shape_label(self) -> str:
        """`16x128x768 w+b`: the input shape, `norm2d` when more than the last dim is normalized, `w+b` with
        weight and bias (--mode 1), eps when not 1e-5, the backward mode and a 16-bit dtype."""
        return label_of(
            shape_str(self.input_shape),
            f"norm{len(self.normalized_shape)}d" if len(self.normalized_shape) > 1 else "",
            "w+b" if self.affine else "", f"eps{self.eps:g}" if self.eps != 1e-5 else "",
            "perm" + "".join(map(str, self.input_permutation)) if self.input_permutation else "",
            "" if self.is_forward else short_backward_mode(self.grad_mask),
            SHORT_DTYPES.get(self.dtype_name, self.dtype_name))

    # ---- arguments ------------------------------------------------------------------------------------
    def _arg_roles(self) -> list[str]:
        if self.is_forward:
            return ["x", "weight", "bias"] if self.affine else ["x"]
        dx, dw, _ = self.grad_mask
        roles = ["dLdy"]
        if dx or dw:
            roles.append("x")
        if self.forw == 14:
            # BOO's full backward: weight and bias in mode 1, neither in mode 0 (it passes None for both)
            roles += ["weight", "bias"] if self.affine else []
        elif dx:
            roles.append("weight")  # in both modes, as BOO's input backward (mode 0: all ones)
        if dx or dw:
            roles += ["mean", "rstd"]
        return roles

    def arg_names(self) -> list[str]:
        """The role of each call argument, in order (for display and for arranging backward inputs)."""
        return self._arg_roles()

    @property
    def stored_input_shape(self) -> tuple[int, ...]:
        """x's shape as the kernel takes it: the input shape in --input-permutation order."""
        if self.input_permutation is None:
            return self.input_shape
        return tuple(self.input_shape[p] for p in self.input_permutation)

    def _logical_x(self, x: torch.Tensor) -> torch.Tensor:
        """x as the kernel takes it (stored order) -> the input's own dims."""
        if self.input_permutation is None:
            return x
        inverse = [0] * len(self.input_permutation)
        for i, p in enumerate(self.input_permutation):
            inverse[p] = i
        return x.permute(inverse)

    def input_shapes(self) -> list[tuple[int, ...]]:
        shape_of = {"x": self.stored_input_shape, "dLdy": self.input_shape, "weight": self.normalized_shape,
                    "bias": self.normalized_shape, "mean": self.stats_shape, "rstd": self.stats_shape}
        return [shape_of[r] for r in self._arg_roles()]

    def output_shapes(self) -> list[tuple[int, ...]]:
        if self.is_forward:
            return [self.input_shape, self.stats_shape, self.stats_shape]
        grads = (self.input_shape, self.normalized_shape, self.normalized_shape)
        return [s for s, on in zip(grads, self.grad_mask) if on]

    def get_sample_args(self, seed: int = 0, *, device: torch.device | str | None = None,
                        splat_value: float | None = None) -> tuple[torch.Tensor, ...]:
        """As the base class, except that mean / rstd are the real statistics of x (computed in float32), so a
        backward kernel sees the inputs a training step would give it, and that the weight of a mode-0 backward is
        all ones (MIOPEN_ELEMENTWISE_AFFINE's implicit weight)."""
        args = list(super().get_sample_args(seed, splat_value=splat_value))
        roles = self._arg_roles()
        if "weight" in roles and not self.affine:
            args[roles.index("weight")] = torch.ones(self.normalized_shape, dtype=self.dtype)
        if "mean" in roles:
            x = self._logical_x(args[roles.index("x")]).float()
            dims = list(range(self.normalized_dim, len(self.input_shape)))
            mean = x.mean(dim=dims, keepdim=True)
            var = x.var(dim=dims, keepdim=True, unbiased=False)
            args[roles.index("mean")] = mean.to(self.dtype)
            args[roles.index("rstd")] = torch.rsqrt(var + self.eps).to(self.dtype)
        if device is not None:
            args = [a.to(device) for a in args]
        return tuple(args)

    # ---- reference ------------------------------------------------------------------------------------
    def reference(self, *args: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        roles = self._arg_roles()
        a = dict(zip(roles, args))
        if "x" in a:
            a["x"] = self._logical_x(a["x"])
        shape = list(self.normalized_shape)
        if self.is_forward:
            # 16-bit inputs are normalized in float32 (as eager torch does inside its kernel): exported as-is,
            # aten.native_layer_norm would lower to fp16/bf16 arithmetic and lose accuracy
            x = a["x"]
            acc = _acc_dtype(x.dtype)
            w, b = a.get("weight"), a.get("bias")
            y, mean, rstd = torch.ops.aten.native_layer_norm(
                x.to(acc), shape, None if w is None else w.to(acc), None if b is None else b.to(acc), self.eps)
            return y.to(x.dtype), mean.to(x.dtype), rstd.to(x.dtype)
        dy = a["dLdy"]
        out_dtype = dy.dtype
        acc = _acc_dtype(out_dtype)
        dy = dy.to(acc)
        dx_on, dw_on, db_on = self.grad_mask
        norm_dims = list(range(self.normalized_dim, len(self.input_shape)))
        lead_dims = list(range(self.normalized_dim))
        results = []
        if dx_on or dw_on:
            # the math of aten.native_layer_norm_backward, written out: it lowers through IREE's torch input
            # without a decomposition pass, and low-precision inputs accumulate in float32 as aten does
            rstd = a["rstd"].to(acc)
            xhat = (a["x"].to(acc) - a["mean"].to(acc)) * rstd
            if dx_on:
                g = dy * a["weight"].to(acc) if "weight" in a else dy
                dx = rstd * (g - g.mean(dim=norm_dims, keepdim=True)
                             - xhat * (g * xhat).mean(dim=norm_dims, keepdim=True))
                results.append(dx)
            if dw_on:
                results.append(sum_leading(dy * xhat, lead_dims))
        if db_on:
            results.append(sum_leading(dy, lead_dims))
        results = [r.to(out_dtype) for r in results]
        return results[0] if len(results) == 1 else tuple(results)

    # ---- cost model -----------------------------------------------------------------------------------
    @property
    def flops(self) -> int:
        """A documented estimate per input element: forward 6 (mean 1, variance 3, normalize 2) + 2 for the
        affine; input grad 9 (+1 with a weight argument); weight grad 4 (recompute x-hat 2, multiply,
        accumulate); bias grad 1."""
        n = numel(self.input_shape)
        if self.is_forward:
            return n * (6 + (2 if self.affine else 0))
        dx, dw, db = self.grad_mask
        per = (9 + (1 if "weight" in self._arg_roles() else 0)) * dx + 4 * dw + 1 * db
        return n * per

    def describe(self) -> dict[str, Any]:
        return {
            **self.common_facts(),
            "forw": self.forw,
            "arguments": self.arg_names(),
            "input_shape": list(self.input_shape),
            "normalized_dim": self.normalized_dim,
            "normalized_shape": list(self.normalized_shape),
            "eps": self.eps,
            "affine": self.affine,
            "input_permutation": None if self.input_permutation is None else list(self.input_permutation),
        }
