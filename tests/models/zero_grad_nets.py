"""Models of our own whose backward has gradients that are zero in exact arithmetic (issue 25, item 4): a conv with
bias before a training-mode BatchNorm2d (the norm subtracts the channel mean, so the bias cancels and its gradient
is zero), and a Linear before a softmax whose outputs are summed into the loss (the softmax sums to 1 whatever the
logits, so everything feeding it alone has zero gradient). In float32 both sides hold rounding noise there.

`wrong_scale` and `wrong_bias` are the same net with a gradient made wrong under torch.compile only (so iree_boo's
column differs from eager's): the gradient into the conv's output scaled by 1.02 (every gradient upstream of it
off by 2%), or 1e-4 added to the conv bias's gradient alone (zero in exact arithmetic: only the rounding floor can
catch it)."""
from __future__ import annotations

from typing import Any

import torch
from torch import nn


class _WrongUnderCompile(torch.autograd.Function):
    """Identity forward; backward returns scale * grad + shift when traced by torch.compile, grad in eager."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, scale: float, shift: float) -> torch.Tensor:
        ctx.scale, ctx.shift = scale, shift
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, None, None]:
        if torch.compiler.is_compiling():
            return grad * ctx.scale + ctx.shift, None, None
        return grad, None, None


class ZeroGradNet(nn.Module):
    """conv(bias) -> BatchNorm2d (training) -> relu -> conv -> pool -> head; and attention-like weights: a linear
    on the conv's output pixels as tokens, softmax over the tokens, returned as a second output (its sum, a
    constant, goes into the loss)."""

    def __init__(self, channels: int = 8, classes: int = 10, scale: float = 1.0, bias_shift: float = 0.0) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1, bias=True)
        self.bn = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(channels, classes)
        self.attn = nn.Linear(channels, classes)
        self.scale, self.bias_shift = scale, bias_shift

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        bias = self.conv.bias
        if self.bias_shift:
            bias = _WrongUnderCompile.apply(bias, 1.0, self.bias_shift)
        y = nn.functional.conv2d(x, self.conv.weight, bias, padding=1)
        if self.scale != 1.0:
            y = _WrongUnderCompile.apply(y, self.scale, 0.0)
        y = torch.relu(self.bn(y))
        z = torch.relu(self.conv2(y))
        tokens = z.flatten(2).transpose(1, 2)                       # (N, H*W, C)
        return self.head(self.pool(z).flatten(1)), torch.softmax(self.attn(tokens), dim=1)


def make() -> nn.Module:
    torch.manual_seed(0)
    return ZeroGradNet()


def wrong_scale() -> nn.Module:
    torch.manual_seed(0)
    return ZeroGradNet(scale=1.02)


def wrong_bias() -> nn.Module:
    torch.manual_seed(0)
    return ZeroGradNet(bias_shift=1e-4)
