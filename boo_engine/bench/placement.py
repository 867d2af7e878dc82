"""A fresh placement of a CPU job's inputs for every measuring round.

Where the inputs land in physical memory moves some kernels a lot: on the 2-core AMD EPYC Zen 3 the 512^3 f32
gemm ran 5.6-6.1 ms from one placement to another, and a 3x3 backward-data conv 10.5-14 ms in most placements
and 22.4 ms in one (docs/performance.md). The worker's heap hands a job the pages the previous job freed, so one
draw used to stick for the worker's whole life, every round of a job measured the same draw, and one run's
interval said nothing about the next run (another process, another draw).

Here each round copies the inputs into a new anonymous mapping, after first touching a random number of pad pages
in a mapping of their own: the kernel's page allocator hands out recently freed pages first, so without the pad
the copy would land on the pages the last round just released, in the same order. The pad makes each round draw
other pages.
The rounds then sample the spread of placements, the comparisons take their confidence from the rounds
(compare.py), and the headline is the median over them. The jobs of one round that take the same inputs (a
command's baseline, its variants, its torch column) share the round's placement (bench/child.py): in one run a
comparison sees its kernels on the very same memory, so a placement never passes for a kernel's difference (an A/A
variant on its own placements read 0.83x-1.20x "faster"/"slower" in 3 of 25 in-run comparisons).

CPU only: a GPU's inputs live in device memory, placed by the driver.
"""
from __future__ import annotations

import mmap
import os
import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

PAGE = mmap.PAGESIZE
#: pad pages touched before the inputs: up to 2 MiB on 4 KiB pages
MAX_PAD_PAGES = 512


class Placement:
    """The mappings holding one round's inputs; they live as long as this object (keep it for the round)."""

    def __init__(self, seed: str | None = None) -> None:
        # no seed: a new draw in every process (the physical pages are a new draw anyway)
        self._rng = random.Random(seed) if seed is not None else random.Random(os.urandom(16))
        self._maps: list[mmap.mmap] = []

    def place(self, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        """Copies of `args` (torch CPU tensors; anything else is passed through) in fresh memory."""
        import torch

        # a non-contiguous input keeps its own memory: its strides are part of what is measured (ops/strided.py)
        return tuple(self._copy(a) if isinstance(a, torch.Tensor) and a.device.type == "cpu" and a.numel()
                     and a.is_contiguous() else a for a in args)

    def _copy(self, t: torch.Tensor) -> torch.Tensor:
        import numpy as np
        import torch

        src = t
        nbytes = src.numel() * src.element_size()
        pad = self._rng.randrange(MAX_PAD_PAGES + 1) * PAGE
        if pad:   # the pad in a mapping of its own, faulted in first and kept for the round
            p = mmap.mmap(-1, pad)
            self._maps.append(p)
            np.frombuffer(p, dtype=np.uint8, count=pad)[::PAGE] = 1
        # the input at the start of a fresh mapping, as IREE's and torch's allocators hand out large buffers: the
        # kernel aligns a large one to 2 MiB for huge pages. Measured on an AVX-512 Xeon against
        # iree-benchmark-module: inputs at a random cache line within the page made the 512^3 gemm 1.23-1.32x;
        # page-aligned but behind the pad in the same mapping (off the 2 MiB boundary), a 1x1 conv with 4.7 MB
        # of input read 1.073-1.088x
        m = mmap.mmap(-1, nbytes)
        self._maps.append(m)
        out = torch.frombuffer(m, dtype=src.dtype, count=src.numel()).view(src.shape)
        out.copy_(src)
        if t.requires_grad:
            out.requires_grad_(True)
        return out

    def close(self) -> None:
        maps, self._maps = self._maps, []
        for m in maps:
            try:
                m.close()
            except BufferError:   # a tensor still views it: the mapping goes with its last reference
                pass
