"""An `OpCall` -> the MIOpenDriver line that means the same call, or None (it then stays an `aten::` line).

Covered: convolutions (aten::conv1d/2d/3d, conv_transpose*, convolution, _convolution, convolution_backward),
2-D matrix products (aten::mm, aten::matmul of two matrices, aten::linear without bias), layer norm
(aten::layer_norm, native_layer_norm, native_layer_norm_backward) and batch norm (aten::batch_norm,
_batch_norm_impl_index, native_batch_norm, native_batch_norm_backward). Layouts are read from the strides each
tensor REALLY had; a tensor that is not dense in any order of its letters (a slice, a broadcast) cannot be said
in the grammar, nor can an eps or momentum the grammar fixes, a mixed-dtype call or an unbatched conv: those
return None. Anything unexpected in the call's lists returns None too (never an exception): the aten line is
always a faithful fallback.
"""
from __future__ import annotations

import ast
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from .calls import OpCall

#: profiler type name -> the MIOpenDriver op-word suffix (float32 has none)
DTYPE_SUFFIX = {"float": "", "c10::Half": "fp16", "c10::BFloat16": "bfp16"}
_SPATIAL = {1: "H", 2: "HW", 3: "DHW"}
_CONV_FLAGS = {  # per spatial letter: input, filter, stride, padding, dilation, output padding
    "D": ("--in_d", "--fil_d", "--conv_stride_d", "--pad_d", "--dilation_d", "--trans_output_pad_d"),
    "H": ("-H", "-y", "-u", "-p", "-l", "-Y"),
    "W": ("-W", "-x", "-v", "-q", "-j", "-X"),
}
_BNORM_EPS, _BNORM_MOMENTUM = 1e-5, 0.1


class _NotExpressible(Exception):
    """Raised inside a converter: this call has no MIOpenDriver line."""


def _need(cond: object) -> None:
    if not cond:
        raise _NotExpressible


def _value(text: str) -> Any:
    """A concrete input's Python value ('[1, 1]' -> [1, 1], 'True' -> True, '' -> None)."""
    if text == "":
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise _NotExpressible from None


def _ints(text: str, n: int) -> list[int]:
    """An int list of n entries (one entry broadcast, as torch's IntArrayRef[n] does)."""
    v = _value(text)
    if isinstance(v, int) and not isinstance(v, bool):
        v = [v]
    _need(isinstance(v, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in v))
    if len(v) == 1:
        v = v * n
    _need(len(v) == n)
    return v


def _present(call: OpCall, i: int) -> bool:
    """Argument i is a tensor (not None)."""
    return call.types[i] not in ("", "None")


def dense_layout(shape: Sequence[int], strides: Sequence[int], letters: str) -> str | None:
    """The order of `letters` (torch order of the dims) in which a tensor of this shape and these strides is dense,
    outermost first: 'NCHW', 'NHWC', ... The torch order wins ties (size-1 dims), channels-last next; None when
    the tensor is dense in no order."""
    n = len(letters)
    if len(shape) != n or len(strides) != n:
        return None
    canonical = tuple(range(n))
    channels_last = (0, *range(2, n), 1) if n >= 3 else canonical
    for perm in itertools.chain((canonical, channels_last), itertools.permutations(range(n))):
        expected = [0] * n
        step = 1
        for i in reversed(perm):
            expected[i] = step
            step *= shape[i]
        if all(shape[i] == 1 or strides[i] == expected[i] for i in range(n)):
            return "".join(letters[i] for i in perm)
    return None


def _layout(call: OpCall, i: int, letters: str) -> str:
    layout = dense_layout(call.dims[i], call.strides[i], letters)
    _need(layout is not None)
    return str(layout)


def _suffix(call: OpCall, *tensor_args: int) -> str:
    kinds = {call.types[i] for i in tensor_args}
    _need(len(kinds) == 1)
    kind = kinds.pop()
    _need(kind in DTYPE_SUFFIX)
    return DTYPE_SUFFIX[kind]


# ---- convolution ----------------------------------------------------------------------------------------
#: positions of stride, padding, dilation, transposed (or its fixed value), output_padding (None: none), groups
_ConvArgs = tuple[int, int, int, bool | int, int | None, int]
_CONV_ARGS: dict[str, _ConvArgs] = {  # op -> its _ConvArgs
    "aten::conv1d": (3, 4, 5, False, None, 6),
    "aten::conv2d": (3, 4, 5, False, None, 6),
    "aten::conv3d": (3, 4, 5, False, None, 6),
    "aten::conv_transpose1d": (3, 4, 7, True, 5, 6),
    "aten::conv_transpose2d": (3, 4, 7, True, 5, 6),
    "aten::conv_transpose3d": (3, 4, 7, True, 5, 6),
    "aten::convolution": (3, 4, 5, 6, 7, 8),
    "aten::_convolution": (3, 4, 5, 6, 7, 8),
}


def _channels_last(layout: str) -> bool:
    return layout[1] != "C"


def _conv_line(call: OpCall, x: int, w: int, geometry: _ConvArgs, forw: int, bias: bool,
               out_layout: str | None) -> str:
    stride_i, pad_i, dil_i, trans, opad_i, groups_i = geometry
    xs, ws = call.dims[x], call.dims[w]
    nd = len(xs) - 2
    _need(nd in _SPATIAL and len(ws) == nd + 2)
    letters = "NC" + _SPATIAL[nd]
    transposed = trans if isinstance(trans, bool) else _value(call.concrete[trans])
    _need(isinstance(transposed, bool))
    stride, pad, dil = (_ints(call.concrete[i], nd) for i in (stride_i, pad_i, dil_i))
    opad = _ints(call.concrete[opad_i], nd) if opad_i is not None and transposed else [0] * nd
    groups = _value(call.concrete[groups_i])
    _need(isinstance(groups, int) and not isinstance(groups, bool) and groups >= 1)
    in_layout, fil_layout = _layout(call, x, letters), _layout(call, w, letters)
    if out_layout is None:
        # the forward output's strides are not recorded: torch (mkldnn on the CPU, cuDNN/MIOpen on GPUs) writes
        # it channels-last when the input or the weight is channels-last, else in torch order
        cl = nd >= 2 and (_channels_last(in_layout) or _channels_last(fil_layout))
        out_layout = "N" + _SPATIAL[nd] + "C" if cl else letters
    out_channels = ws[1] * groups if transposed else ws[0]
    words = [f"conv{_suffix(call, x, w)}", "--spatial_dim", str(nd), "-n", str(xs[0]), "-c", str(xs[1]),
             "-k", str(out_channels)]
    for j, ch in enumerate(_SPATIAL[nd]):
        f_in, f_fil, f_stride, f_pad, f_dil, f_opad = _CONV_FLAGS[ch]
        words += [f_in, str(xs[2 + j]), f_fil, str(ws[2 + j]), f_stride, str(stride[j]), f_pad, str(pad[j]),
                  f_dil, str(dil[j])]
        if transposed:
            words += [f_opad, str(opad[j])]
    words += ["-g", str(groups), "-F", str(forw), "-b", "1" if bias else "0", "-m", "trans" if transposed else "conv",
              "-I", in_layout, "-f", fil_layout, "-O", out_layout]
    return " ".join(words)


def _conv_forward(call: OpCall) -> str:
    bias = _present(call, 2)
    if bias:
        _suffix(call, 0, 1, 2)
    return _conv_line(call, 0, 1, _CONV_ARGS[call.name], 1, bias, None)


#: convolution_backward's output_mask (input, weight, bias) -> MIOpen -F
_CONV_BWD_F = {(True, False, False): 2, (False, True, False): 4, (True, True, False): 6, (False, False, True): 7,
               (True, False, True): 8, (False, True, True): 9, (True, True, True): 10}


def _conv_backward(call: OpCall) -> str:
    # (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, mask)
    mask = _value(call.concrete[10])
    _need(isinstance(mask, list) and len(mask) == 3 and tuple(mask) in _CONV_BWD_F)
    nd = len(call.dims[1]) - 2
    _need(nd in _SPATIAL and len(call.dims[0]) == nd + 2)
    out_layout = _layout(call, 0, "NC" + _SPATIAL[nd])
    _suffix(call, 0, 1, 2)
    return _conv_line(call, 1, 2, (4, 5, 6, 7, 8, 9), _CONV_BWD_F[tuple(mask)], False, out_layout)


# ---- gemm -----------------------------------------------------------------------------------------------
def _transposed(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """A logical (R, C) matrix with these strides: False row-major, True column-major (stored transposed)."""
    _need(len(shape) == 2 and len(strides) == 2)
    (r, c), (s0, s1) = shape, strides
    if (c == 1 or s1 == 1) and (r == 1 or s0 == c):
        return False
    _need((r == 1 or s0 == 1) and (c == 1 or s1 == r))
    return True


def _gemm(call: OpCall) -> str:
    _need(len(call.dims) >= 2)
    a_shape, a_strides = call.dims[0], call.strides[0]
    if call.name == "aten::linear":  # x @ w.T: B is the weight read transposed
        _need(not _present(call, 2))
        w_shape, w_strides = call.dims[1], call.strides[1]
        _need(len(w_shape) == 2 and len(w_strides) == 2)
        b_shape, b_strides = [w_shape[1], w_shape[0]], [w_strides[1], w_strides[0]]
    else:
        _need(len(call.dims) == 2)
        b_shape, b_strides = call.dims[1], call.strides[1]
    _need(len(a_shape) == 2 and len(b_shape) == 2 and a_shape[1] == b_shape[0])
    ta, tb = _transposed(a_shape, a_strides), _transposed(b_shape, b_strides)
    m, k, n = a_shape[0], a_shape[1], b_shape[1]
    return (f"gemm{_suffix(call, 0, 1)} --a_w {m} --a_h {k} --b_w {n} --transA {int(ta)} --transB {int(tb)} "
            "-F 1")


# ---- layer norm -----------------------------------------------------------------------------------------
def _row_major(call: OpCall, i: int) -> None:
    shape = call.dims[i]
    _need(dense_layout(shape, call.strides[i], "abcdefghijklmnop"[: len(shape)]) == "abcdefghijklmnop"[: len(shape)])


def _affine_mode(call: OpCall, weight: int, bias: int, x: int) -> int:
    has_w, has_b = _present(call, weight), _present(call, bias)
    _need(has_w == has_b)  # weight without bias (LayerNorm(bias=False)) has no MIOpen mode
    if has_w:
        _suffix(call, x, weight, bias)
    return int(has_w)


def _layernorm_forward(call: OpCall) -> str:
    # layer_norm(input, normalized_shape, weight, bias, eps[, cudnn_enable]); native_layer_norm: the same less one
    shape = call.dims[0]
    normalized = _value(call.concrete[1])
    _need(isinstance(normalized, list) and 1 <= len(normalized) <= len(shape)
          and list(shape[len(shape) - len(normalized):]) == normalized)
    _row_major(call, 0)
    eps = _value(call.concrete[4])
    _need(isinstance(eps, int | float) and not isinstance(eps, bool))
    mode = _affine_mode(call, 2, 3, 0)
    return (f"layernorm{_suffix(call, 0)} --input {'x'.join(map(str, shape))} "
            f"--normalized_dim {len(shape) - len(normalized)} --eps {float(eps)!r} --mode {mode} -F 1")


def _layernorm_backward(call: OpCall) -> str:
    # (grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)
    shape = call.dims[1]
    _need(call.dims[0] == shape)
    normalized = _value(call.concrete[2])
    _need(isinstance(normalized, list) and 1 <= len(normalized) <= len(shape))
    _row_major(call, 0)
    _row_major(call, 1)
    mask = _value(call.concrete[7])
    _need(isinstance(mask, list) and len(mask) == 3)
    forw = 2 * bool(mask[0]) + 4 * bool(mask[1]) + 8 * bool(mask[2])
    mode = _affine_mode(call, 5, 6, 1)
    _need(forw and (mode or not forw & 12))
    _suffix(call, 0, 1)
    return (f"layernorm{_suffix(call, 0)} --input {'x'.join(map(str, shape))} "
            f"--normalized_dim {len(shape) - len(normalized)} --mode {mode} -F {forw}")


# ---- batch norm -----------------------------------------------------------------------------------------
def _bnorm_words(call: OpCall, x: int) -> list[str]:
    shape = call.dims[x]
    _need(len(shape) in (4, 5))
    letters = "NCHW" if len(shape) == 4 else "NCDHW"
    layout = _layout(call, x, letters)
    size = dict(zip(letters, shape))
    words = [f"bnorm{_suffix(call, x)}", "-n", str(size["N"]), "-c", str(size["C"])]
    if "D" in size:
        words += ["-D", str(size["D"])]
    return words + ["-H", str(size["H"]), "-W", str(size["W"]), "-m", "1", "--layout", layout]


def _close(value: object, want: float) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and abs(value - want) <= 1e-9 * want


def _float_params(call: OpCall, *args: int) -> None:
    """MIOpen's batch norm keeps scale, bias and statistics in float32 whatever the data type."""
    _need(all(call.types[i] == "float" for i in args))


def _bnorm_forward(call: OpCall) -> str:
    # (input, weight, bias, running_mean, running_var, training, momentum, eps[, cudnn_enabled])
    _need(_present(call, 1) and _present(call, 2))
    _float_params(call, 1, 2)
    training, momentum, eps = (_value(call.concrete[i]) for i in (5, 6, 7))
    _need(isinstance(training, bool) and _close(eps, _BNORM_EPS))
    running = _present(call, 3) and _present(call, 4)
    _need(running or not (_present(call, 3) or _present(call, 4)))
    if running:
        _float_params(call, 3, 4)
    if training:
        _need(not running or _close(momentum, _BNORM_MOMENTUM))
        flags = ["-F", "1", "-s", "1", "-r", str(int(running))]
    else:
        _need(running)
        flags = ["-F", "2", "-s", "0", "-r", "1"]
    return " ".join(_bnorm_words(call, 0) + flags)


def _bnorm_backward(call: OpCall) -> str:
    # (grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps, output_mask)
    train, eps, mask = (_value(call.concrete[i]) for i in (7, 8, 9))
    _need(train is True and _close(eps, _BNORM_EPS) and mask == [True, True, True])
    _need(_present(call, 2) and _present(call, 5) and _present(call, 6))
    _float_params(call, 2, 5, 6)
    _suffix(call, 0, 1)
    words = _bnorm_words(call, 1)
    _need(_layout(call, 0, "NCHW" if len(call.dims[1]) == 4 else "NCDHW") == words[-1])  # dLdy laid out as x
    return " ".join(words + ["-F", "0", "-b", "1", "-s", "1", "-r", "0"])


_CONVERTERS: dict[str, Callable[[OpCall], str]] = {
    **{name: _conv_forward for name in _CONV_ARGS},
    "aten::convolution_backward": _conv_backward,
    "aten::mm": _gemm,
    "aten::matmul": _gemm,
    "aten::linear": _gemm,
    "aten::layer_norm": _layernorm_forward,
    "aten::native_layer_norm": _layernorm_forward,
    "aten::native_layer_norm_backward": _layernorm_backward,
    "aten::batch_norm": _bnorm_forward,
    "aten::_batch_norm_impl_index": _bnorm_forward,
    "aten::native_batch_norm": _bnorm_forward,
    "aten::native_batch_norm_backward": _bnorm_backward,
}


def miopen_line(call: OpCall) -> str | None:
    """The MIOpenDriver command for this call, or None when the grammar cannot say it."""
    convert = _CONVERTERS.get(call.name)
    if convert is None:
        return None
    try:
        return convert(call)
    except (_NotExpressible, IndexError, KeyError, TypeError, ValueError):
        return None
