"""A UNet stage, small and with random weights: a down path (3x3 convs, group norm, SiLU, a stride-2 conv), a
middle, and two ways up as diffusion UNets have them, a transposed conv (stride 2) and a nearest upsample followed
by a conv, each concatenated with the skip connection, then a bilinear upsample into a 1x1 output conv; written
here from the UNet and DDPM papers' descriptions.

    boo-tui capture zoo/unet.py:unet --input 2x8x16x16 [--backward] [--eval] [--layout nhwc] -o cmds.txt
"""
from __future__ import annotations

import torch
from torch import nn

#: factory -> the `--input` specs of one forward (the float inputs take the dtype the model runs in)
INPUTS = {"unet": ["2x8x16x16"]}
#: the factories that are conv nets: also captured channels-last (`--layout nhwc`)
CONV_NETS = frozenset(INPUTS)


class ConvBlock(nn.Module):
    """(3x3 conv, group norm, SiLU) twice."""

    def __init__(self, cin: int, cout: int, groups: int = 4) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(groups, cout), nn.SiLU(),
                                  nn.Conv2d(cout, cout, 3, padding=1), nn.GroupNorm(groups, cout), nn.SiLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class UNetStage(nn.Module):
    def __init__(self, cin: int = 8, width: int = 16, cout: int = 4) -> None:
        super().__init__()
        self.down = ConvBlock(cin, width)
        self.downsample = nn.Conv2d(width, 2 * width, 3, stride=2, padding=1)
        self.mid = ConvBlock(2 * width, 2 * width)
        self.up_t = nn.ConvTranspose2d(2 * width, width, 2, stride=2)                  # learned upsampling
        self.up_t_block = ConvBlock(2 * width, width)
        self.up_n = nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"),          # fixed upsampling + conv
                                  nn.Conv2d(2 * width, width, 3, padding=1))
        self.up_n_block = ConvBlock(2 * width, width)
        self.out = nn.Conv2d(width, cout, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = self.down(x)                                                             # (B, 16, H, W)
        mid = self.mid(self.downsample(skip))                                           # (B, 32, H/2, W/2)
        a = self.up_t_block(torch.cat([self.up_t(mid), skip], dim=1))
        b = self.up_n_block(torch.cat([self.up_n(mid), skip], dim=1))
        small = nn.functional.avg_pool2d(a + b, 2)
        return self.out(nn.functional.interpolate(small, scale_factor=2, mode="bilinear", align_corners=False))


def unet() -> nn.Module:
    """8 -> 16 channels at 16x16, 32 at 8x8, back to 16 at 16x16 two ways, 4 out."""
    torch.manual_seed(0)
    return UNetStage()
