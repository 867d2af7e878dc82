"""A convolution's fields checked, each error naming the flag a commands line sets: what `ConvSignature` runs
when it is made (`validate`), and the tables of flags, layouts and `-F` values it checks against."""
from __future__ import annotations

import itertools
from typing import Protocol

from boo_engine.ops._common import check_dtype, check_size, fail, shape_str


class ConvFields(Protocol):
    """The fields of a `ConvSignature` the checks read."""

    @property
    def dtype_name(self) -> str: ...
    @property
    def batch(self) -> int: ...
    @property
    def in_channels(self) -> int: ...
    @property
    def out_channels(self) -> int: ...
    @property
    def groups(self) -> int: ...
    @property
    def in_spatial(self) -> tuple[int, ...]: ...
    @property
    def fil_spatial(self) -> tuple[int, ...]: ...
    @property
    def stride(self) -> tuple[int, ...]: ...
    @property
    def padding(self) -> tuple[int, ...]: ...
    @property
    def dilation(self) -> tuple[int, ...]: ...
    @property
    def output_padding(self) -> tuple[int, ...]: ...
    @property
    def in_layout(self) -> str: ...
    @property
    def fil_layout(self) -> str: ...
    @property
    def out_layout(self) -> str: ...
    @property
    def forw(self) -> int: ...
    @property
    def transposed(self) -> bool: ...
    @property
    def activation(self) -> str: ...
    @property
    def out_spatial(self) -> tuple[int, ...]: ...


#: MIOpen `-F` values and the gradients each selects (input, weight, bias); 1 is forward
CONV_BACKWARD_MASKS: dict[int, tuple[bool, bool, bool]] = {
    2: (True, False, False),
    4: (False, True, False),
    6: (True, True, False),
    7: (False, False, True),
    8: (True, False, True),
    9: (False, True, True),
    10: (True, True, True),
}
CONV_FORW_VALUES = (1, *CONV_BACKWARD_MASKS)
#: activations a forward conv applies after its bias ("" none): what the torch.compile backend fuses into a conv.
#: Named in func_name only when set, so existing kernel names and cache keys stay as they were.
CONV_ACTIVATIONS = ("", "relu", "sigmoid")


def check_activation(activation: str, forw: int) -> None:
    if activation not in CONV_ACTIVATIONS:
        raise fail("conv", f"unknown activation {activation!r} (expected relu or sigmoid)")
    if activation and forw != 1:
        raise fail("conv", f"activation {activation} applies to a forward conv only (-F 1), not -F {forw}")


SPATIAL_LETTERS: dict[int, str] = {1: "H", 2: "HW", 3: "DHW"}
DEFAULT_LAYOUTS: dict[int, str] = {n: "NC" + s for n, s in SPATIAL_LETTERS.items()}

#: per spatial rank, every layout (each letter of N, C and the spatial letters once): a layout is checked by one
#: look-up, not by sorting its letters (a file of 200,000 convs checks 600,000 layouts)
_LAYOUTS: dict[int, frozenset[str]] = {
    n: frozenset("".join(p) for p in itertools.permutations("NC" + s)) for n, s in SPATIAL_LETTERS.items()}


# flag spellings used in messages, per spatial letter
_IN_FLAGS = {"D": "--in_d", "H": "-H", "W": "-W"}
_FIL_FLAGS = {"D": "--fil_d", "H": "-y", "W": "-x"}
_STRIDE_FLAGS = {"D": "--conv_stride_d", "H": "-u", "W": "-v"}
_PAD_FLAGS = {"D": "--pad_d", "H": "-p", "W": "-q"}
_DIL_FLAGS = {"D": "--dilation_d", "H": "-l", "W": "-j"}
_OPAD_FLAGS = {"D": "--trans_output_pad_d", "H": "-Y", "W": "-X"}



def validate(sig: ConvFields) -> None:
    """Every check, in this order (the first error wins): dtype, rank, layouts, activation, -F, sizes, groups,
    then the transposed conv's output or the filter against the padded input."""
    check_dtype("conv", sig.dtype_name)
    nd = len(sig.in_spatial)
    if nd not in SPATIAL_LETTERS:
        raise fail("conv", f"{nd}-D convolution not supported (expected 1, 2 or 3 spatial dims)")
    _check_ranks(sig, nd)
    _check_layouts(sig, nd)
    check_activation(sig.activation, sig.forw)
    _check_forw(sig.forw)
    _check_sizes(sig, SPATIAL_LETTERS[nd])
    _check_groups(sig)
    if sig.transposed:
        _check_transposed(sig, SPATIAL_LETTERS[nd])
    else:
        _check_filter_fits(sig)


def _check_ranks(sig: ConvFields, nd: int) -> None:
    """Every spatial tuple has the input's `nd` dims."""
    for name, seq in (("filter", sig.fil_spatial), ("stride", sig.stride), ("padding", sig.padding),
                      ("dilation", sig.dilation), ("output padding", sig.output_padding)):
        if len(seq) != nd:
            raise fail("conv", f"{name} has {len(seq)} dims, the input {nd}")


def _check_layouts(sig: ConvFields, nd: int) -> None:
    """Each of the three layouts is an `nd`-D one."""
    for flag, label in (("--in_layout", sig.in_layout), ("--fil_layout", sig.fil_layout),
                        ("--out_layout", sig.out_layout)):
        if label not in _LAYOUTS[nd]:
            want = ", ".join("NC" + SPATIAL_LETTERS[nd])
            raise fail("conv", f"{flag} {label!r} is not a {nd}-D layout (expected the letters {want}, each once)")


def _check_forw(forw: int) -> None:
    """`-F` is forward (1) or one of the backward masks."""
    if forw not in CONV_FORW_VALUES:
        if forw in (0, 3, 5):
            raise fail("conv", f"unsupported -F {forw} (forward mixed with backward)")
        raise fail("conv", f"unsupported -F {forw} (expected one of {', '.join(map(str, CONV_FORW_VALUES))})")


def _check_sizes(sig: ConvFields, letters: str) -> None:
    """Every size, stride, padding and dilation is in range, named by its flag."""
    op = "conv"
    check_size(op, "-n", sig.batch)
    check_size(op, "-c", sig.in_channels)
    check_size(op, "-k", sig.out_channels)
    check_size(op, "-g", sig.groups)
    for i, ch in enumerate(letters):
        check_size(op, _IN_FLAGS[ch], sig.in_spatial[i])
        check_size(op, _FIL_FLAGS[ch], sig.fil_spatial[i])
        check_size(op, _STRIDE_FLAGS[ch], sig.stride[i])
        check_size(op, _PAD_FLAGS[ch], sig.padding[i], minimum=0)
        check_size(op, _DIL_FLAGS[ch], sig.dilation[i])
        check_size(op, _OPAD_FLAGS[ch], sig.output_padding[i], minimum=0)


def _check_groups(sig: ConvFields) -> None:
    """Both channel counts are divisible by the groups."""
    if sig.in_channels % sig.groups:
        raise fail("conv", f"-c {sig.in_channels} not divisible by -g {sig.groups}")
    if sig.out_channels % sig.groups:
        raise fail("conv", f"-k {sig.out_channels} not divisible by -g {sig.groups}")


def _check_transposed(sig: ConvFields, letters: str) -> None:
    """A transposed conv: each output padding below its stride, and an output that is not empty."""
    for i, ch in enumerate(letters):
        op_, s = sig.output_padding[i], sig.stride[i]
        if op_ >= s:
            raise fail("conv", f"{_OPAD_FLAGS[ch]} {op_} must be smaller than the stride ({s})")
    if any(o < 1 for o in sig.out_spatial):
        raise fail("conv", f"transposed conv output {shape_str(sig.out_spatial)} is empty "
                           "(padding too large for the input)")


def _check_filter_fits(sig: ConvFields) -> None:
    """A conv that is not transposed: no output padding, and the (dilated) filter fits in the padded input."""
    if any(o != 0 for o in sig.output_padding):
        raise fail("conv", "output padding (-Y/-X) only applies to a transposed conv (-m trans)")
    padded = [x + 2 * p for x, p in zip(sig.in_spatial, sig.padding)]
    extent = [d * (f - 1) + 1 for f, d in zip(sig.fil_spatial, sig.dilation)]
    if any(e > p for e, p in zip(extent, padded)):
        what = "dilated filter" if any(d != 1 for d in sig.dilation) else "filter"
        raise fail("conv", f"{what} {shape_str(extent)} larger than padded input {shape_str(padded)}")
