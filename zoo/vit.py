"""A Vision Transformer, small and with random weights: a patch embedding (a conv whose stride is its kernel), a
class token and learned position embeddings, one pre-norm encoder block (layer norm, multi-head attention through
scaled_dot_product_attention, layer norm, a GELU MLP) and a head on the class token, as in ViT-B/16, written here
from the paper's description.

    boo-tui capture zoo/vit.py:vit --input 2x3x16x16 [--backward] [--eval] [--layout nhwc] -o cmds.txt
"""
from __future__ import annotations

import torch
from torch import nn

#: factory -> the `--input` specs of one forward (the float inputs take the dtype the model runs in)
INPUTS = {"vit": ["2x3x16x16"]}
#: the factories that are conv nets: also captured channels-last (`--layout nhwc`; the patch conv reads it)
CONV_NETS = frozenset(INPUTS)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        qkv = self.qkv(x).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = nn.functional.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        return self.proj(a.transpose(1, 2).reshape(b, t, d))


class EncoderBlock(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class ViT(nn.Module):
    def __init__(self, image: int = 16, patch: int = 4, dim: int = 32, heads: int = 4, hidden: int = 64,
                 classes: int = 10) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
        self.block = EncoderBlock(dim, heads, hidden)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.patch(x).flatten(2).transpose(1, 2)                       # (B, patches, dim)
        tokens = torch.cat([self.cls.expand(x.shape[0], -1, -1), tokens], dim=1) + self.pos
        return self.head(self.norm(self.block(tokens))[:, 0])


def vit() -> nn.Module:
    """16x16 images in 4x4 patches (16 tokens + the class token), width 32, 4 heads, MLP 64."""
    torch.manual_seed(0)
    return ViT()
