"""A small net whose kernels take clearly different parts of its time, for checking a capture's shares against the
same commands measured on their own (tests/test_capture_shares.py): a 3x3 conv, a strided 3x3 conv, a 1x1 conv,
a layer norm over the pixels as tokens, attention written out (two bmm and a softmax) and a linear wide enough
(64 -> 256) that the few us the profiler adds to the ops inside it are a small part of its time. One thread on an
AMD EPYC Zen 4: about 2.6 ms a forward pass at 4x16x32x32; the first conv, the two bmm and the linear 15-22% each."""
from __future__ import annotations

import torch
from torch import nn


class WeightedNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(16, 32, 3, padding=1)
        self.c2 = nn.Conv2d(32, 32, 3, padding=1, stride=2)
        self.c3 = nn.Conv2d(32, 64, 1)
        self.ln = nn.LayerNorm(64)
        self.fc = nn.Linear(64, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.c3(torch.relu(self.c2(torch.relu(self.c1(x)))))   # (N, 64, H/2, W/2)
        t = self.ln(y.flatten(2).transpose(1, 2))                   # (N, H*W/4, 64) tokens
        a = torch.softmax(torch.bmm(t, t.transpose(1, 2)), dim=-1)
        return self.fc(torch.bmm(a, t))


def make() -> nn.Module:
    torch.manual_seed(0)
    return WeightedNet()
