"""Which recorded aten ops are compute (kept) and which are not (views, copies, allocations, metadata).

An op is compute unless its name is in NON_COMPUTE, or none of its tensor inputs has a dimension: that drops the
0-d bookkeeping (batch norm's `num_batches_tracked.add_(1)`, a loss's scalar `div`) and the factories that take no
tensor at all (aten::zeros, aten::arange, aten::scalar_tensor). Copies are left out by name even when they move
data (aten::contiguous, aten::clone, aten::copy_, aten::_to_copy): they are layout plumbing, not kernels one tunes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .calls import OpCall

#: aten ops that only make, view, copy, fill or describe tensors (names without the `aten::` prefix)
NON_COMPUTE: frozenset[str] = frozenset({
    # allocation and factories
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided", "zeros", "ones",
    "full", "zeros_like", "ones_like", "full_like", "new_zeros", "new_ones", "new_full", "scalar_tensor",
    "lift", "lift_fresh", "lift_fresh_copy", "resize_", "resize_as_", "set_", "fill_", "zero_",
    # views and shape changes
    "view", "_unsafe_view", "view_as", "reshape", "_reshape_alias", "reshape_as", "t", "t_", "transpose",
    "transpose_", "permute", "movedim", "moveaxis", "swapaxes", "swapdims", "numpy_T", "matrix_H", "mT", "mH",
    "adjoint", "as_strided", "as_strided_", "expand", "expand_as", "broadcast_to", "broadcast_tensors", "flatten",
    "unflatten", "squeeze", "squeeze_", "unsqueeze", "unsqueeze_", "slice", "select", "narrow", "split",
    "split_with_sizes", "unsafe_split", "unsafe_split_with_sizes", "tensor_split", "chunk", "unsafe_chunk",
    "unbind", "diagonal", "unfold", "alias", "detach", "detach_", "view_as_real", "view_as_complex", "real", "imag",
    "resolve_conj", "resolve_neg", "conj", "_conj", "_neg_view",
    # copies and dtype/device moves
    "contiguous", "clone", "copy_", "_copy_from", "_copy_from_and_resize", "to", "_to_copy", "type_as",
    "slice_backward", "select_backward",  # a view's gradient: zeros with the gradient copied into the view
    # metadata and host reads
    "size", "stride", "dim", "numel", "is_nonzero", "is_same_size", "result_type", "item", "_local_scalar_dense",
    "record_stream", "_has_compatible_shallow_copy_type",
})

#: profiler "Input type" values that are not tensors
NON_TENSOR_TYPES = frozenset({"", "Scalar", "ScalarList", "GenericList", "None", "Device", "Layout", "ScalarType",
                              "MemoryFormat", "String"})


def _has_dims(dims: object, type_name: str) -> bool:
    """An input's recorded dims (unchecked: whatever the trace holds) name a tensor of rank >= 1."""
    if type_name == "TensorList":
        return isinstance(dims, list) and any(isinstance(d, list) and len(d) > 0 for d in dims)
    if type_name in NON_TENSOR_TYPES:
        return False
    return isinstance(dims, list) and len(dims) > 0


def is_compute(call: OpCall) -> bool:
    """True for a call worth a command: not in NON_COMPUTE, and at least one tensor input of rank >= 1."""
    if call.name.removeprefix("aten::") in NON_COMPUTE:
        return False
    return any(_has_dims(d, t) for d, t in zip(call.dims, call.types))
