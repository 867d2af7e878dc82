"""Conv1d and Conv3d stacks, small and with random weights.

conv1d: an audio/sequence stack: a 5-tap conv with batch norm, a causal dilated grouped conv (left padding by
F.pad, as WaveNet pads), a strided conv, a max pool, then global average pool and a linear head.
conv3d: a video/volume stack: a 3x3x3 conv with batch norm, a strided 3x3x3 conv, a 3-D max pool, a (1,3,3)
spatial conv with dilation, a 1x1x1 conv, then global average pool and a linear head.

    boo-tui capture zoo/convnd.py:conv1d --input 2x4x64 [--backward] [--eval] -o cmds.txt
    boo-tui capture zoo/convnd.py:conv3d --input 2x3x8x8x8 [--backward] [--eval] [--layout nhwc] -o cmds.txt
"""
from __future__ import annotations

import torch
from torch import nn

#: factory -> the `--input` specs of one forward (the float inputs take the dtype the model runs in)
INPUTS = {"conv1d": ["2x4x64"], "conv3d": ["2x3x8x8x8"]}
#: the factories that are conv nets: also captured channels-last (`--layout nhwc`: channels_last_3d for 5-D; a
#: 3-D tensor has no channels-last format in torch, so conv1d is not among them)
CONV_NETS = frozenset({"conv3d"})


class CausalConv1d(nn.Module):
    """A dilated conv that sees only the past: padded on the left by (kernel - 1) * dilation."""

    def __init__(self, cin: int, cout: int, kernel: int, dilation: int, groups: int) -> None:
        super().__init__()
        self.pad = (kernel - 1) * dilation
        self.conv = nn.Conv1d(cin, cout, kernel, dilation=dilation, groups=groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(nn.functional.pad(x, (self.pad, 0)))


class Conv1dStack(nn.Module):
    def __init__(self, cin: int = 4, width: int = 16, classes: int = 10) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv1d(cin, width, 5, padding=2, bias=False), nn.BatchNorm1d(width), nn.ReLU(),
            CausalConv1d(width, width, 3, dilation=2, groups=4), nn.ReLU(),
            nn.Conv1d(width, 2 * width, 3, stride=2, padding=1), nn.ReLU(),
            nn.MaxPool1d(2),
        )
        self.head = nn.Linear(2 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x).mean(-1))


class Conv3dStack(nn.Module):
    def __init__(self, cin: int = 3, width: int = 8, classes: int = 10) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv3d(cin, width, 3, padding=1, bias=False), nn.BatchNorm3d(width), nn.ReLU(),
            nn.Conv3d(width, 2 * width, 3, stride=2, padding=1, bias=False), nn.BatchNorm3d(2 * width), nn.ReLU(),
            nn.MaxPool3d(2),
            nn.Conv3d(2 * width, 2 * width, (1, 3, 3), padding=(0, 2, 2), dilation=(1, 2, 2)), nn.ReLU(),
            nn.Conv3d(2 * width, 2 * width, 1),
        )
        self.pool = nn.AdaptiveAvgPool3d(1)
        self.head = nn.Linear(2 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(self.body(x)).flatten(1))


def conv1d() -> nn.Module:
    """4 -> 16 -> 16 (grouped, causal, dilated) -> 32 (stride 2) channels over 64 steps."""
    torch.manual_seed(0)
    return Conv1dStack()


def conv3d() -> nn.Module:
    """3 -> 8 -> 16 (stride 2) channels over an 8x8x8 volume, pooled to 2x2x2."""
    torch.manual_seed(0)
    return Conv3dStack()
