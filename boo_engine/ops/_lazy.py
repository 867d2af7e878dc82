"""`torch`, imported on first use: the ops modules refer to it everywhere, but parsing a command, naming its
kernel and computing its cost must not pay torch's ~1 s import (see OpSignature)."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any


class _LazyTorch:
    def __getattr__(self, name: str) -> Any:
        module = importlib.import_module("torch")
        return getattr(module, name)

    def __repr__(self) -> str:
        return "<torch, imported on first use>"


if TYPE_CHECKING:
    import torch
else:
    torch = _LazyTorch()
