"""ResNet blocks, small and with random weights: the basic block (two 3x3 convs) and the bottleneck (1x1, 3x3,
1x1 x4), each after a stem (7x7 stride-2 conv, batch norm, ReLU, 3x3 max pool) and before a head (global average
pool, linear), as in torchvision's ResNet-18 and ResNet-50, written here from the paper's description.

    boo-tui capture zoo/resnet.py:resnet_basic --input 2x3x32x32 [--backward] [--eval] [--layout nhwc] -o cmds.txt
    boo-tui model zoo/resnet.py:resnet_bottleneck --input 2x3x32x32:bfloat16 ...

The first block of each pair downsamples (stride 2, a 1x1 conv + batch norm on the shortcut), the second keeps the
shape (identity shortcut).
"""
from __future__ import annotations

import torch
from torch import nn

#: factory -> the `--input` specs of one forward (the float inputs take the dtype the model runs in)
INPUTS = {"resnet_basic": ["2x3x32x32"], "resnet_bottleneck": ["2x3x32x32"]}
#: the factories that are conv nets: also captured channels-last (`--layout nhwc`)
CONV_NETS = frozenset(INPUTS)


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False), nn.BatchNorm2d(cout)]


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1, self.bn1 = _conv_bn(cin, cout, 3, stride)
        self.conv2, self.bn2 = _conv_bn(cout, cout, 3)
        self.shortcut = (nn.Sequential(*_conv_bn(cin, cout, 1, stride)) if stride != 1 or cin != cout
                         else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int = 1) -> None:
        super().__init__()
        cout = width * self.expansion
        self.conv1, self.bn1 = _conv_bn(cin, width, 1)
        self.conv2, self.bn2 = _conv_bn(width, width, 3, stride)
        self.conv3, self.bn3 = _conv_bn(width, cout, 1)
        self.shortcut = (nn.Sequential(*_conv_bn(cin, cout, 1, stride)) if stride != 1 or cin != cout
                         else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        return torch.relu(self.bn3(self.conv3(y)) + self.shortcut(x))


class ResNet(nn.Module):
    """stem -> blocks -> average pool -> linear."""

    def __init__(self, blocks: list[nn.Module], width: int, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(*_conv_bn(3, 16, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(self.blocks(self.stem(x))).flatten(1))


def resnet_basic() -> nn.Module:
    """16 -> 32 channels (stride 2), then 32 -> 32: a 2x3x32x32 input ends 2x32x4x4 before the head."""
    torch.manual_seed(0)
    return ResNet([BasicBlock(16, 32, 2), BasicBlock(32, 32)], 32)


def resnet_bottleneck() -> nn.Module:
    """16 -> 8 -> 32 channels (stride 2, projected shortcut), then 32 -> 8 -> 32 (identity)."""
    torch.manual_seed(0)
    return ResNet([Bottleneck(16, 8, 2), Bottleneck(32, 8)], 32)
