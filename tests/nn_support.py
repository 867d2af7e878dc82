"""Shared by tests/test_nn_*.py: one private kernel cache for the whole test session, and torch references."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import torch

from boo_engine.compile import cache as cache_mod
from boo_engine.locations import CACHE_DIR_ENV


@contextlib.contextmanager
def private_kernel_cache(root: Path) -> Iterator[Path]:
    """kernels.run compiles through the process-wide default cache: point it at `root` (the same folder for both
    nn test files, so a kernel compiles once per session) instead of the user's ~/.cache, and put it back after."""
    old_env, old_default = os.environ.get(CACHE_DIR_ENV), cache_mod._default
    os.environ[CACHE_DIR_ENV] = str(root)
    cache_mod._default = None
    try:
        yield root
    finally:
        cache_mod._default = old_default
        if old_env is None:
            os.environ.pop(CACHE_DIR_ENV, None)
        else:
            os.environ[CACHE_DIR_ENV] = old_env


def close(actual: torch.Tensor, expected: torch.Tensor, tol: float = 1e-4) -> None:
    """Equal within `tol` relative to the expected's scale (f32 sums of a few dozen terms)."""
    scale = max(1.0, expected.abs().max().item())
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol * scale)
