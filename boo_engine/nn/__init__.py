"""BOO's Python side on our engine: kernels called from torch code.

`kernels.run(sig, *tensors)` is the one entry point the functional API, the modules and the torch.compile backend
share (variant in force, target per device, in-memory launchable cache, call accounting).
"""
from __future__ import annotations

from .kernels import (
    BooNNError,
    CallLog,
    current_variant,
    record_calls,
    run,
    use_target,
    use_variant,
)

__all__ = ["BooNNError", "CallLog", "current_variant", "record_calls", "run", "use_target", "use_variant"]

# ---- functional API and modules (BOO's names) ----
from .functional import boo_conv, boo_layer_norm, boo_linear
from .modules import (
    BooConv1d,
    BooConv2d,
    BooConv3d,
    BooLayerNorm,
    BooLinear,
    replace_convs_with_boo,
    replace_with_boo,
)

__all__ += ["BooConv1d", "BooConv2d", "BooConv3d", "BooLayerNorm", "BooLinear", "boo_conv", "boo_layer_norm",
            "boo_linear", "replace_convs_with_boo", "replace_with_boo"]

# ---- torch.compile backends (boo_engine/nn/backend.py): iree_boo, iree_boo_inductor, backend(...) ----
from .backend import BooBackend, backend, iree_boo, iree_boo_inductor  # noqa: E402

__all__ += ["BooBackend", "backend", "iree_boo", "iree_boo_inductor"]
