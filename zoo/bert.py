"""A BERT-like encoder layer, small and with random weights: word, position and token-type embeddings summed and
layer-normed, one post-norm encoder layer whose attention is written out (scores = q k^T / sqrt(d) plus an additive
mask from the attention mask, softmax, times v), a GELU feed-forward, and the tanh pooler on the first token, as in
BERT-base, written here from the paper's description. No dropout: a random op has no reference to check against.

    boo-tui capture zoo/bert.py:bert --input 2x16:int64 --input 2x16:int64 [--backward] [--eval] -o cmds.txt
    boo-tui capture zoo/bert.py:bert_bf16 --input 2x16:int64 --input 2x16:int64 ...   (the same in bfloat16)

Inputs: token ids and the attention mask (1 = attend, 0 = padding), both int64; `capture` draws them as 0/1.
The inputs being integers, the dtype cannot come from them: `bert_bf16` builds the model in bfloat16.
"""
from __future__ import annotations

import math

import torch
from torch import nn

#: factory -> the `--input` specs of one forward (integer inputs keep their dtype)
INPUTS = {"bert": ["2x16:int64", "2x16:int64"]}
#: the factories that are conv nets: also captured channels-last (`--layout nhwc`)
CONV_NETS: frozenset[str] = frozenset()
#: factory -> the factory of the same model in bfloat16 (for models whose inputs are all integers)
BF16 = {"bert": "bert_bf16"}


class SelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).transpose(1, 2)             # (B, heads, T, head_dim)

    def forward(self, x: torch.Tensor, additive_mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim) + additive_mask
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        b, _, t, _ = context.shape
        return self.out(context.transpose(1, 2).reshape(b, t, -1))


class Bert(nn.Module):
    def __init__(self, vocab: int = 64, max_len: int = 32, dim: int = 32, heads: int = 4, hidden: int = 64) -> None:
        super().__init__()
        self.words = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(max_len, dim)
        self.types = nn.Embedding(2, dim)
        self.emb_norm = nn.LayerNorm(dim, eps=1e-12)
        self.attn = SelfAttention(dim, heads)
        self.attn_norm = nn.LayerNorm(dim, eps=1e-12)
        self.ffn = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))
        self.ffn_norm = nn.LayerNorm(dim, eps=1e-12)
        self.pooler = nn.Linear(dim, dim)
        self.register_buffer("position_ids", torch.arange(max_len), persistent=False)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = ids.shape[1]
        x = self.words(ids) + self.positions(self.position_ids[:t]) + self.types(torch.zeros_like(ids))
        x = self.emb_norm(x)
        dtype = x.dtype
        additive = (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min    # (B, 1, 1, T)
        x = self.attn_norm(x + self.attn(x, additive))
        x = self.ffn_norm(x + self.ffn(x))
        return x, torch.tanh(self.pooler(x[:, 0]))


def bert() -> nn.Module:
    """vocabulary 64, 16 tokens, width 32, 4 heads, feed-forward 64."""
    torch.manual_seed(0)
    return Bert()


def bert_bf16() -> nn.Module:
    return bert().to(torch.bfloat16)
