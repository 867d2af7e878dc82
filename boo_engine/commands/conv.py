"""The `conv` / `convfp16` / `convbfp16` flag table (MIOpenDriver's names, short letters and defaults)."""
from __future__ import annotations

import operator
from collections.abc import Callable, Sequence

from boo_engine.commands.driver_flags import Flag, parse_flags, require, show
from boo_engine.ops.conv import SPATIAL_LETTERS, ConvSignature

CONV_FLAGS: tuple[Flag, ...] = (
    Flag("spatial_dim", "_", "int", 2),
    Flag("batchsize", "n", "int", 100),
    Flag("in_channels", "c", "int", 3),
    Flag("in_d", "!", "int", 32),
    Flag("in_h", "H", "int", 32),
    Flag("in_w", "W", "int", 32),
    Flag("in_layout", "I", "str", None),
    Flag("out_channels", "k", "int", 32),
    Flag("fil_d", "@", "int", 3),
    Flag("fil_h", "y", "int", 3),
    Flag("fil_w", "x", "int", 3),
    Flag("fil_layout", "f", "str", None),
    Flag("bias", "b", "int", 0),
    Flag("out_layout", "O", "str", None),
    Flag("forw", "F", "int", 1),
    Flag("mode", "m", "str", "conv"),
    Flag("conv_stride_d", "#", "int", 1),
    Flag("conv_stride_h", "u", "int", 1),
    Flag("conv_stride_w", "v", "int", 1),
    Flag("pad_d", "$", "int", 0),
    Flag("pad_h", "p", "int", 0),
    Flag("pad_w", "q", "int", 0),
    Flag("dilation_d", "^", "int", 1),
    Flag("dilation_h", "l", "int", 1),
    Flag("dilation_w", "j", "int", 1),
    Flag("trans_output_pad_d", "%", "int", 0),
    Flag("trans_output_pad_h", "Y", "int", 0),
    Flag("trans_output_pad_w", "X", "int", 0),
    Flag("group_count", "g", "int", 1),
)

# per spatial letter, the flag (long name) giving each quantity
_BY_LETTER = {
    "D": ("in_d", "fil_d", "conv_stride_d", "pad_d", "dilation_d", "trans_output_pad_d"),
    "H": ("in_h", "fil_h", "conv_stride_h", "pad_h", "dilation_h", "trans_output_pad_h"),
    "W": ("in_w", "fil_w", "conv_stride_w", "pad_w", "dilation_w", "trans_output_pad_w"),
}


def _spatial_dims(op: str, values: dict, spelled: dict) -> int:
    """The spatial rank: the given layouts' length (they must agree), else --spatial_dim."""
    given = {name: values[name] for name in ("in_layout", "fil_layout", "out_layout") if values[name] is not None}
    ranks = set()
    for name, layout in given.items():
        require(op, 3 <= len(layout) <= 5,
                f"{spelled[name]} {show(layout)} is not a 1-D, 2-D or 3-D layout (3 to 5 letters)")
        ranks.add(len(layout) - 2)
    if len(ranks) > 1:
        shown = ", ".join(f"{spelled[n]} {v}" for n, v in given.items())
        require(op, False, f"layouts disagree on the number of spatial dims ({shown})")
    if ranks:
        return ranks.pop()
    nd = values["spatial_dim"]
    require(op, nd in SPATIAL_LETTERS, f"--spatial_dim {nd} not supported (expected 1, 2 or 3)")
    return nd


def _tuple_of(names: tuple[str, ...]) -> Callable[[dict], tuple]:
    """values -> (values[name] for name in names), as a tuple (an itemgetter of one name gives a bare value)."""
    if len(names) == 1:
        name = names[0]
        return lambda values: (values[name],)
    return operator.itemgetter(*names)


#: per spatial rank, the getters of the input size, filter, stride, padding, dilation and output padding
_QUANTITIES: dict[int, tuple[Callable[[dict], tuple], ...]] = {
    nd: tuple(_tuple_of(names) for names in zip(*(_BY_LETTER[ch] for ch in letters)))
    for nd, letters in SPATIAL_LETTERS.items()
}


#: small tuples seen (strides, paddings, filters: a few dozen in any file) -> the one kept: a session holds one
#: signature per distinct line, and six tuples of their own were ~340 bytes of each
_SHARED: dict[tuple, tuple] = {}
_SHARED_KEPT = 4096


def _shared(sizes: tuple) -> tuple:
    kept = _SHARED.get(sizes)
    if kept is not None:
        return kept
    if len(_SHARED) >= _SHARED_KEPT:
        _SHARED.clear()
    _SHARED[sizes] = sizes
    return sizes


def parse_conv(op: str, dtype_name: str, tokens: Sequence[str]) -> ConvSignature:
    """Build a ConvSignature from a conv command's flags (the op word already removed)."""
    values, spelled = parse_flags(op, tokens, CONV_FLAGS)
    nd = _spatial_dims(op, values, spelled)
    in_sp, fil_sp, stride, pad, dil, opad = (_shared(get(values)) for get in _QUANTITIES[nd])
    bias = values["bias"]
    require(op, bias in (0, 1), f"-b expects 0 or 1, got {bias}")
    mode = values["mode"]
    require(op, mode in ("conv", "trans"), f"-m expects 'conv' or 'trans', got {show(mode)}")
    in_layout, fil_layout, out_layout = values["in_layout"], values["fil_layout"], values["out_layout"]
    return ConvSignature(
        dtype_name=dtype_name,
        batch=values["batchsize"],
        in_channels=values["in_channels"],
        out_channels=values["out_channels"],
        in_spatial=in_sp,
        fil_spatial=fil_sp,
        stride=stride,
        padding=pad,
        dilation=dil,
        groups=values["group_count"],
        bias=bool(bias),
        forw=values["forw"],
        transposed=mode == "trans",
        output_padding=opad,
        in_layout=in_layout.upper() if in_layout else "",
        fil_layout=fil_layout.upper() if fil_layout else "",
        out_layout=out_layout.upper() if out_layout else "",
    )
