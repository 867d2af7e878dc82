"""A LLaMA-like decoder block, small and with random weights: RMSNorm (in float32, as LLaMA computes it), rotary
position embeddings on q and k (the rotate-half form), grouped-query attention (2 key/value heads shared by 4 query
heads) through causal scaled_dot_product_attention, and a SiLU-gated MLP (SwiGLU), with a final RMSNorm, as in
LLaMA 2, written here from the papers' descriptions.

    boo-tui capture zoo/llama.py:llama --input 2x16x32 [--backward] [--eval] -o cmds.txt

Input: hidden states (batch, tokens, width 32).
"""
from __future__ import annotations

import torch
from torch import nn

#: factory -> the `--input` specs of one forward (the float inputs take the dtype the model runs in)
INPUTS = {"llama": ["2x16x32"]}
#: the factories that are conv nets: also captured channels-last (`--layout nhwc`)
CONV_NETS: frozenset[str] = frozenset()


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.type_as(x)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int, max_len: int, base: float = 10000.0) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.q = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.k = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(heads * self.head_dim, dim, bias=False)
        inv_freq = 1.0 / base ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim)
        angles = torch.outer(torch.arange(max_len).float(), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)                                   # (max_len, head_dim)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.cos[:t], self.sin[:t]
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        rep = self.heads // self.kv_heads                                             # grouped-query attention
        k = k[:, :, None].expand(b, self.kv_heads, rep, t, self.head_dim).reshape(b, self.heads, t, self.head_dim)
        v = v[:, :, None].expand(b, self.kv_heads, rep, t, self.head_dim).reshape(b, self.heads, t, self.head_dim)
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(a.transpose(1, 2).reshape(b, t, -1))


class Block(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4, kv_heads: int = 2, hidden: int = 64, max_len: int = 32) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(dim)
        self.attn = Attention(dim, heads, kv_heads, max_len)
        self.mlp_norm = RMSNorm(dim)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)
        self.norm = RMSNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x))
        h = self.mlp_norm(x)
        x = x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))
        return self.norm(x)


def llama() -> nn.Module:
    """width 32, 4 query heads and 2 key/value heads of 8, SwiGLU hidden 64; up to 32 tokens."""
    torch.manual_seed(0)
    return Block()
