"""MobileNet blocks, small and with random weights: inverted residuals as in MobileNetV2 (1x1 expansion, 3x3
depthwise conv, i.e. a grouped conv with one channel per group, 1x1 projection, ReLU6) and as in MobileNetV3 (a
squeeze-and-excitation gate with hard-sigmoid, hard-swish activations, a 5x5 depthwise conv), written here from
the papers' descriptions.

    boo-tui capture zoo/mobilenet.py:mobilenet --input 2x3x32x32 [--backward] [--eval] [--layout nhwc] -o cmds.txt
"""
from __future__ import annotations

import torch
from torch import nn

#: factory -> the `--input` specs of one forward (the float inputs take the dtype the model runs in)
INPUTS = {"mobilenet": ["2x3x32x32"]}
#: the factories that are conv nets: also captured channels-last (`--layout nhwc`)
CONV_NETS = frozenset(INPUTS)


def _conv_bn_act(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1,
                 act: type[nn.Module] | None = nn.ReLU6) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
                               nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class SqueezeExcite(nn.Module):
    """Channel gate: global average pool, 1x1 conv down, ReLU, 1x1 conv up, hard-sigmoid, times the input."""

    def __init__(self, channels: int, reduced: int) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.down = nn.Conv2d(channels, reduced, 1)
        self.up = nn.Conv2d(reduced, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = nn.functional.hardsigmoid(self.up(torch.relu(self.down(self.pool(x)))))
        return x * gate


class InvertedResidual(nn.Module):
    """1x1 expand -> kxk depthwise (groups = channels) [-> squeeze-excite] -> 1x1 project; a residual add when the
    shape is kept."""

    def __init__(self, cin: int, cout: int, expand: int, stride: int, kernel: int = 3, se: bool = False,
                 act: type[nn.Module] = nn.ReLU6) -> None:
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = [_conv_bn_act(cin, hidden, 1, act=act),
                                   _conv_bn_act(hidden, hidden, kernel, stride, groups=hidden, act=act)]
        if se:
            layers.append(SqueezeExcite(hidden, hidden // 4))
        layers.append(_conv_bn_act(hidden, cout, 1, act=None))
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


class MobileNet(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = _conv_bn_act(3, 16, 3, 2)
        self.blocks = nn.Sequential(
            InvertedResidual(16, 24, 4, 2),                                     # V2: downsampling, no residual
            InvertedResidual(24, 24, 4, 1),                                     # V2: residual
            InvertedResidual(24, 24, 3, 1, kernel=5, se=True, act=nn.Hardswish),  # V3: SE, hard-swish
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(24, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(self.blocks(self.stem(x))).flatten(1))


def mobilenet() -> nn.Module:
    """A 2x3x32x32 input: stem to 16x16x16, blocks to 24x8x8, then the head."""
    torch.manual_seed(0)
    return MobileNet()
