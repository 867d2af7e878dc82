"""torch.nn modules on our kernels, and the functions that swap them into a model.

`BooConv1d/2d/3d`, `BooLayerNorm` and `BooLinear` subclass the torch modules they replace: same constructor,
same parameters and state_dict keys (a state_dict saved from nn.Conv2d loads into BooConv2d and back), same
initialisation; only `forward` differs, calling `boo_conv` / `boo_layer_norm` / `boo_linear`. Each takes an
optional `variant=` (a Variant or a `--variant` string) for its kernels; without one, the variant in force.

What our conv kernels cannot express is done by torch around them, never instead of them:
- `padding_mode` "reflect", "replicate" or "circular": the input is padded by `F.pad` with that mode (as torch's
  own conv modules do), then our kernel convolves it with no padding;
- `padding="same"` with an odd total padding in a dim: the extra element goes on the right by `F.pad` (torch's
  rule), the rest is the kernel's symmetric padding; `padding="valid"` is padding 0;
- unbatched input (C, *spatial): a batch of one, squeezed back.
dtypes other than float32 / float16 / bfloat16 raise `BooNNError` (no silent fallback to torch).
"""
from __future__ import annotations

from typing import Any, Protocol, TypeVar

import torch
import torch.nn.functional as F
from torch import nn

from ..variants import Variant
from .functional import boo_conv, boo_layer_norm, boo_linear

__all__ = ["BooConv1d", "BooConv2d", "BooConv3d", "BooLayerNorm", "BooLinear", "replace_convs_with_boo",
           "replace_with_boo"]


class _BooConv(Protocol):
    """What the conv mixin's forward reads: the Boo attributes and those of the nn.ConvNd base class."""

    @property
    def variant(self) -> Variant | str | None: ...
    @property
    def _nd(self) -> int: ...
    @property
    def weight(self) -> torch.Tensor: ...
    @property
    def bias(self) -> torch.Tensor | None: ...
    @property
    def stride(self) -> tuple[int, ...]: ...
    @property
    def padding(self) -> str | tuple[int, ...]: ...
    @property
    def dilation(self) -> tuple[int, ...]: ...
    @property
    def groups(self) -> int: ...
    @property
    def padding_mode(self) -> str: ...
    @property
    def _reversed_padding_repeated_twice(self) -> list[int]: ...


class _BooConvMixin:
    """forward() of the Boo conv modules (the nn.ConvNd attributes come from the torch base class)."""

    variant: Variant | str | None
    _nd: int

    def forward(self: _BooConv, input: torch.Tensor) -> torch.Tensor:
        unbatched = input.dim() == self._nd + 1
        x = input.unsqueeze(0) if unbatched else input
        padding: str | tuple[int, ...] | int
        if self.padding_mode != "zeros":
            x = F.pad(x, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            padding = 0
        else:
            padding = self.padding
        y = boo_conv(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups,
                     variant=self.variant)
        return y.squeeze(0) if unbatched else y

    def extra_repr(self) -> str:
        base = super().extra_repr()  # type: ignore[misc]
        return base if self.variant is None else f"{base}, variant={self.variant!r}"


class BooConv1d(_BooConvMixin, nn.Conv1d):
    """nn.Conv1d whose forward and backward run our conv kernels (see the module docstring)."""

    _nd = 1

    def __init__(self, *args: Any, variant: Variant | str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.variant = variant


class BooConv2d(_BooConvMixin, nn.Conv2d):
    """nn.Conv2d whose forward and backward run our conv kernels (see the module docstring)."""

    _nd = 2

    def __init__(self, *args: Any, variant: Variant | str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.variant = variant


class BooConv3d(_BooConvMixin, nn.Conv3d):
    """nn.Conv3d whose forward and backward run our conv kernels (see the module docstring)."""

    _nd = 3

    def __init__(self, *args: Any, variant: Variant | str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.variant = variant


class BooLayerNorm(nn.LayerNorm):
    """nn.LayerNorm on our layer-norm kernels (forward and backward)."""

    def __init__(self, *args: Any, variant: Variant | str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.variant = variant

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return boo_layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps, variant=self.variant)


class BooLinear(nn.Linear):
    """nn.Linear on our GEMM kernels (forward, dX, dW; the bias add and its gradient are torch's)."""

    def __init__(self, *args: Any, variant: Variant | str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.variant = variant

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return boo_linear(input, self.weight, self.bias, variant=self.variant)


# ---- swapping modules in a model ----------------------------------------------------------------------------

_CONVS: dict[type[nn.Module], type[nn.Module]] = {nn.Conv1d: BooConv1d, nn.Conv2d: BooConv2d, nn.Conv3d: BooConv3d}

M = TypeVar("M", bound=nn.Module)


def _shared(new: M, old: nn.Module) -> M:
    """`new` (built on the meta device: nothing allocated or initialised) holding `old`'s Parameter objects,
    buffers, hooks and training flag."""
    for name, p in old._parameters.items():
        new._parameters[name] = p
    for name, b in old.named_buffers(recurse=False):
        new.register_buffer(name, b, persistent=name not in old._non_persistent_buffers_set)
    for hooks in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_state_dict_hooks",
                  "_load_state_dict_pre_hooks"):
        getattr(new, hooks).update(getattr(old, hooks))
    return new.train(old.training)


def _boo_version(m: nn.Module, convs: bool, layer_norms: bool, linears: bool,
                 variant: Variant | str | None) -> nn.Module | None:
    """The Boo module for `m` (sharing its parameters), or None to leave it. Only the exact torch classes are
    swapped: a user subclass may override forward, and ConvTranspose is not a conv our forward kernels run."""
    kind = type(m)
    if convs and kind in _CONVS and isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
        new_conv = _CONVS[kind](m.in_channels, m.out_channels, m.kernel_size, stride=m.stride, padding=m.padding,
                                dilation=m.dilation, groups=m.groups, bias=m.bias is not None,
                                padding_mode=m.padding_mode, device="meta", variant=variant)
        return _shared(new_conv, m)
    if layer_norms and type(m) is nn.LayerNorm:
        new_ln = BooLayerNorm(m.normalized_shape, eps=m.eps, elementwise_affine=m.elementwise_affine,
                              bias=m.bias is not None, device="meta", variant=variant)
        return _shared(new_ln, m)
    if linears and type(m) is nn.Linear:
        new_lin = BooLinear(m.in_features, m.out_features, bias=m.bias is not None, device="meta",
                            variant=variant)
        return _shared(new_lin, m)
    return None


def replace_with_boo(model: nn.Module, convs: bool = True, layer_norms: bool = True, linears: bool = True, *,
                     variant: Variant | str | None = None) -> nn.Module:
    """Swap, in place, every nn.Conv1d/2d/3d (`convs`), nn.LayerNorm (`layer_norms`) and nn.Linear (`linears`)
    of `model` for its Boo module sharing the same Parameter objects (an optimizer built before keeps working).
    Returns the model, or the Boo module when `model` itself is one of those (a root cannot be swapped in place).
    """
    root = _boo_version(model, convs, layer_norms, linears, variant)
    if root is not None:
        return root
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            new = _boo_version(child, convs, layer_norms, linears, variant)
            if new is not None:
                setattr(parent, name, new)
    return model


def replace_convs_with_boo(model: nn.Module, *, variant: Variant | str | None = None) -> nn.Module:
    """BOO's `replace_convs_with_boo`: swap every nn.Conv1d/2d/3d (not ConvTranspose) of `model`, in place, for
    the Boo conv sharing its Parameters; returns the model."""
    return replace_with_boo(model, convs=True, layer_norms=False, linears=False, variant=variant)
