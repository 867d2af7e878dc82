"""Convolution signatures (1-D, 2-D, 3-D; any layout; groups; bias; forward and every backward mode; transposed).

Layouts are strings of letters: N (batch), C (channels), and the spatial letters H (1-D), H W (2-D) or D H W
(3-D). The filter's N is its first torch dimension (out channels, or in channels for a transposed conv) and its
C the second. The reference permutes every tensor to torch's N C <spatial> order, calls torch, and permutes the
results back, so an NHWC command takes NHWC tensors and returns NHWC tensors.
"""
from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from boo_engine.ops._lazy import torch

if TYPE_CHECKING:
    import torch

from boo_engine.ops import conv_forms as forms
from boo_engine.ops._common import (
    BACKWARD_MODE_NAMES,
    SHORT_DTYPES,
    label_of,
    numel,
    shape_str,
    short_backward_mode,
)
from boo_engine.ops.base import DEFAULT_FORMULATION, OpSignature
from boo_engine.ops.conv_checks import CONV_ACTIVATIONS as CONV_ACTIVATIONS
from boo_engine.ops.conv_checks import CONV_BACKWARD_MASKS as CONV_BACKWARD_MASKS
from boo_engine.ops.conv_checks import CONV_FORW_VALUES as CONV_FORW_VALUES
from boo_engine.ops.conv_checks import DEFAULT_LAYOUTS as DEFAULT_LAYOUTS
from boo_engine.ops.conv_checks import SPATIAL_LETTERS as SPATIAL_LETTERS
from boo_engine.ops.conv_checks import validate
from boo_engine.ops.conv_forms import FWDCONV, MATMUL, MIXED


def _activate(y: torch.Tensor, activation: str) -> torch.Tensor:
    if not activation:
        return y
    return torch.relu(y) if activation == "relu" else torch.sigmoid(y)

@functools.cache
def _picker(layout: str) -> Callable[[tuple[int, ...]], tuple[int, ...]]:
    """The sizes of a tensor in `layout` (a valid one) from (N, C, *spatial), in the layout's order."""
    order = "NC" + SPATIAL_LETTERS[len(layout) - 2]
    return operator.itemgetter(*(order.index(ch) for ch in layout))


def _knob(name: str, values: tuple[int, ...], default: int) -> str:
    """`p1` (the same in every dim) or `p1x0`; empty when every dim has the default."""
    if all(v == default for v in values):
        return ""
    return name + (str(values[0]) if len(set(values)) == 1 else shape_str(values))


def _perm(src: str, dst: str) -> list[int]:
    """The permutation p with `t.permute(p)` turning a tensor laid out as `src` into `dst`."""
    return [src.index(ch) for ch in dst]


def _permute(t: torch.Tensor, src: str, dst: str) -> torch.Tensor:
    if src == dst:
        return t
    return t.permute(_perm(src, dst)).contiguous()


def _selected(grads: tuple[torch.Tensor | None, ...], mask: list[bool], torch_layout: str,
              layouts: tuple[str | None, ...]) -> torch.Tensor | tuple[torch.Tensor, ...]:
    """The gradients the mask selects, each from torch's layout into its own (None: a bias gradient, no layout).
    Those are computed; the others may be None, or computed anyway (eager convolution_backward returns dW
    whatever the mask), so the mask decides."""
    results = []
    for grad, on, layout in zip(grads, mask, layouts):
        if on:
            assert grad is not None
            results.append(grad if layout is None else _permute(grad, torch_layout, layout))
    return results[0] if len(results) == 1 else tuple(results)


@dataclass(frozen=True)
class ConvSignature(OpSignature):
    """One convolution kernel. Spatial tuples are in D, H, W order (only the dims the conv has)."""

    op: ClassVar[str] = "conv"

    dtype_name: str
    batch: int
    in_channels: int
    out_channels: int
    in_spatial: tuple[int, ...]
    fil_spatial: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int = 1
    bias: bool = False
    forw: int = 1
    in_layout: str = ""
    fil_layout: str = ""
    out_layout: str = ""
    transposed: bool = False
    output_padding: tuple[int, ...] = field(default=())
    activation: str = ""    # see CONV_ACTIVATIONS

    def __post_init__(self) -> None:
        for name in ("in_spatial", "fil_spatial", "stride", "padding", "dilation", "output_padding"):
            if type(value := getattr(self, name)) is not tuple:
                object.__setattr__(self, name, tuple(value))
        nd = len(self.in_spatial)
        # fill defaults that depend on the spatial rank (frozen: go through object.__setattr__)
        for name in ("in_layout", "fil_layout", "out_layout"):
            if not getattr(self, name) and nd in DEFAULT_LAYOUTS:
                object.__setattr__(self, name, DEFAULT_LAYOUTS[nd])
        if not self.output_padding:
            object.__setattr__(self, "output_padding", (0,) * nd)
        self._validate()

    # ---- validation -----------------------------------------------------------------------------------
    def _validate(self) -> None:
        validate(self)

    # ---- derived facts --------------------------------------------------------------------------------
    @property
    def num_spatial_dims(self) -> int:
        return len(self.in_spatial)

    @property
    def _torch_layout(self) -> str:
        return DEFAULT_LAYOUTS[self.num_spatial_dims]

    @property
    def out_spatial(self) -> tuple[int, ...]:
        if self.transposed:
            return tuple(
                (x - 1) * s - 2 * p + d * (f - 1) + o + 1
                for x, f, s, p, d, o in zip(self.in_spatial, self.fil_spatial, self.stride, self.padding,
                                            self.dilation, self.output_padding)
            )
        return tuple(
            (x + 2 * p - d * (f - 1) - 1) // s + 1
            for x, f, s, p, d in zip(self.in_spatial, self.fil_spatial, self.stride, self.padding, self.dilation)
        )

    def _shape(self, layout: str, n: int, c: int, spatial: tuple[int, ...]) -> tuple[int, ...]:
        return _picker(layout)((n, c, *spatial))

    @property
    def input_shape(self) -> tuple[int, ...]:
        """x, in the input layout."""
        return self._shape(self.in_layout, self.batch, self.in_channels, self.in_spatial)

    @property
    def filter_shape(self) -> tuple[int, ...]:
        """w, in the filter layout: (k, c/g, ...) in torch order, (c, k/g, ...) for a transposed conv."""
        if self.transposed:
            return self._shape(self.fil_layout, self.in_channels, self.out_channels // self.groups, self.fil_spatial)
        return self._shape(self.fil_layout, self.out_channels, self.in_channels // self.groups, self.fil_spatial)

    @property
    def output_shape(self) -> tuple[int, ...]:
        """y (and dLdy), in the output layout."""
        return self._shape(self.out_layout, self.batch, self.out_channels, self.out_spatial)

    @property
    def is_forward(self) -> bool:
        return self.forw == 1

    @property
    def grad_mask(self) -> tuple[bool, bool, bool]:
        """Which of (dLdx, dLdw, dLdb) a backward mode returns; all False for forward."""
        return CONV_BACKWARD_MASKS.get(self.forw, (False, False, False))

    @property
    def mode(self) -> str:
        return "forward" if self.is_forward else BACKWARD_MODE_NAMES[self.grad_mask]

    @property
    def func_name(self) -> str:
        """BOO's name; a transposed conv (which BOO's name does not tell apart) gets a `_trans` suffix."""
        items = ["conv", f"{self.num_spatial_dims}d", self.dtype_name, self.mode]
        if self.bias and self.is_forward:
            items.append("b")
        items += [
            shape_str(self.input_shape),
            self.in_layout.lower(),
            shape_str(self.filter_shape),
            self.fil_layout.lower().replace("n", "f"),
            self.out_layout.lower().replace("c", "f"),
            shape_str(self.stride) + "s",
            shape_str(self.padding) + "p",
            shape_str(self.dilation) + "d",
            f"{self.groups}g",
        ]
        if self.transposed:
            items.append("trans")
            if any(self.output_padding):
                items.append(shape_str(self.output_padding) + "op")
        return "_".join(items + ([self.activation] if self.activation else []))

    @property
    def shape_label(self) -> str:
        """`n2 c64 28x28 k64 3x3 p1 NCHW fwd`: batch, input channels and spatial size, output channels, filter,
        then padding, stride (`s`), dilation (`d`) and groups (`g`) only where they are not the default, `trans`,
        the layout (`in/filter/out` when they differ), the mode (fwd, bwd-data, bwd-weight, ...), `bias`, the
        activation (`relu`, `sigmoid`) and a 16-bit dtype."""
        layouts = (self.in_layout, self.fil_layout, self.out_layout)
        return label_of(
            f"n{self.batch}", f"c{self.in_channels}", shape_str(self.in_spatial), f"k{self.out_channels}",
            shape_str(self.fil_spatial), _knob("p", self.padding, 0), _knob("s", self.stride, 1),
            _knob("d", self.dilation, 1), f"g{self.groups}" if self.groups != 1 else "",
            "trans" if self.transposed else "", _knob("op", self.output_padding, 0),
            self.in_layout if len(set(layouts)) == 1 else "/".join(layouts),
            "fwd" if self.is_forward else short_backward_mode(self.grad_mask),
            "bias" if self.bias and self.is_forward else "", self.activation, SHORT_DTYPES.get(self.dtype_name,
                                                                                              self.dtype_name))

    # ---- arguments and results ------------------------------------------------------------------------
    def input_shapes(self) -> list[tuple[int, ...]]:
        if self.is_forward:
            shapes = [self.input_shape, self.filter_shape]
            if self.bias:
                shapes.append((self.out_channels,))
            return shapes
        return [self.output_shape, self.input_shape, self.filter_shape]

    def output_shapes(self) -> list[tuple[int, ...]]:
        if self.is_forward:
            return [self.output_shape]
        all_grads = (self.input_shape, self.filter_shape, (self.out_channels,))
        return [s for s, on in zip(all_grads, self.grad_mask) if on]

    def _conv_args(self) -> tuple[list[int], list[int], list[int], bool, list[int], int]:
        return (list(self.stride), list(self.padding), list(self.dilation), self.transposed,
                list(self.output_padding), self.groups)

    # ---- formulations ---------------------------------------------------------------------------------
    def formulations(self) -> tuple[str, ...]:
        """"default" (aten.convolution / convolution_backward), then, where the kernel convolves at all:
        "fwdconv" (gradients and transposed convs as forward convs), "matmul" (explicit im2col + matmul), and
        "mixed" for a data with a weight gradient (the first as fwdconv, the second as matmul): ops/conv_forms.py"""
        dx, dw, _ = self.grad_mask
        if not (self.is_forward or dx or dw):
            return (DEFAULT_FORMULATION,)
        if self.is_forward and not self.transposed:
            return (DEFAULT_FORMULATION, MATMUL)
        if dx and dw and not self.is_forward and not self.transposed:
            return (DEFAULT_FORMULATION, FWDCONV, MATMUL, MIXED)
        return (DEFAULT_FORMULATION, FWDCONV, MATMUL)

    def formulated(self, formulation: str, *args: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        problem = self.formulation_problem(formulation)
        if problem is not None:
            raise ValueError(problem)
        return self._compute(args, formulation)

    def reference(self, *args: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        return self._compute(args, DEFAULT_FORMULATION)

    def _compute(self, args: tuple[torch.Tensor, ...], formulation: str) -> torch.Tensor | tuple[torch.Tensor, ...]:
        tl = self._torch_layout
        geometry = (self.stride, self.padding, self.dilation, self.groups)
        if self.is_forward:
            x = _permute(args[0], self.in_layout, tl)
            w = _permute(args[1], self.fil_layout, tl)
            b = args[2] if self.bias else None
            if formulation == DEFAULT_FORMULATION:
                y = torch.convolution(x, w, b, *self._conv_args())
            else:
                fwd, dgrad, _ = forms.PRIMITIVES[formulation]
                y = dgrad(x, w, self.out_spatial, *geometry) if self.transposed else fwd(x, w, *geometry)
                if b is not None:
                    y = y + b.reshape(1, -1, *([1] * self.num_spatial_dims))
            return _permute(_activate(y, self.activation), tl, self.out_layout)
        dy = _permute(args[0], self.out_layout, tl)
        x = _permute(args[1], self.in_layout, tl)
        w = _permute(args[2], self.fil_layout, tl)
        mask = list(self.grad_mask)
        grads = forms.gradients(dy, x, w, mask, self.transposed, self.in_spatial, self.fil_spatial, *geometry,
                                formulation)
        return _selected(grads, mask, tl, (self.in_layout, self.fil_layout, None))

    # ---- cost model -----------------------------------------------------------------------------------
    @property
    def macs_per_pass(self) -> int:
        """Multiply-adds of one pass; forward, backward-data and backward-weight each do this many."""
        fil = numel(self.fil_spatial)
        if self.transposed:
            return self.batch * self.in_channels * numel(self.in_spatial) * (self.out_channels // self.groups) * fil
        return self.batch * self.out_channels * numel(self.out_spatial) * (self.in_channels // self.groups) * fil

    @property
    def flops(self) -> int:
        """2 * MACs for each pass selected (forward, data grad, weight grad), plus one add per output element
        for the bias (the forward add or the bias-grad reduction)."""
        out_elems = self.batch * self.out_channels * numel(self.out_spatial)
        if self.is_forward:
            return 2 * self.macs_per_pass + (out_elems if self.bias else 0)
        dx, dw, db = self.grad_mask
        return 2 * self.macs_per_pass * (int(dx) + int(dw)) + (out_elems if db else 0)

    def describe(self) -> dict[str, Any]:
        return {
            **self.common_facts(),
            "forw": self.forw,
            "spatial_dims": self.num_spatial_dims,
            "in_layout": self.in_layout,
            "fil_layout": self.fil_layout,
            "out_layout": self.out_layout,
            "batch": self.batch,
            "in_channels": self.in_channels,
            "out_channels": self.out_channels,
            "input_spatial": list(self.in_spatial),
            "filter_spatial": list(self.fil_spatial),
            "output_spatial": list(self.out_spatial),
            "stride": list(self.stride),
            "padding": list(self.padding),
            "dilation": list(self.dilation),
            "groups": self.groups,
            "bias": self.bias,
            "transposed": self.transposed,
            "output_padding": list(self.output_padding),
            **({"activation": self.activation} if self.activation else {}),   # only when set: records stay
        }
