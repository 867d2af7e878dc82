"""The `bnorm` / `bnormfp16` / `bnormbfp16` flag table (MIOpenDriver's batch-norm driver).

Supported: forward training (`-F 1`), forward inference (`-F 2`), backward (`-F 0 -b 1`); spatial (`-m 1`) and
per-activation (`-m 0`) statistics; `-r` (running statistics) and `-s` (saved statistics); any layout of the
letters N, C, [D,] H, W. Refused with a clear message: forward and backward in one command, alpha != 1,
beta != 0.

Checked against MIOpen's driver/bn_driver.hpp and BOO's op_exports/batch_norm.py: `-s/--save 1` saves the batch
mean and inverse std (training) or takes them (backward), `-r/--run 1` keeps running statistics (training: in and
out, in BOO's `_native_batch_norm_legit_functional` order), `-L/--layout` is x's memory order (BOO: NHWC as a
channels_last tensor). `-m` keeps MIOpen's meaning, default 0 = per-activation; BOO's own line
(`bnormbfp16 ... --save 1 --run 1 --layout NHWC`, no -m) is per-activation here, while BOO, which accepts only
mode 0, computes a spatial (per-channel) norm for it: add `-m 1` for BOO's kernel.
"""
from __future__ import annotations

from collections.abc import Sequence

from boo_engine.commands.driver_flags import Flag, parse_flags, require, show
from boo_engine.ops.bnorm import BatchNormSignature

BNORM_FLAGS: tuple[Flag, ...] = (
    Flag("batchsize", "n", "int", 32),
    Flag("in_channels", "c", "int", 3),
    Flag("in_d", "D", "int", 0),
    Flag("in_h", "H", "int", 32),
    Flag("in_w", "W", "int", 32),
    Flag("alpha", "A", "float", 1.0),
    Flag("beta", "B", "float", 0.0),
    Flag("forw", "F", "int", 1),
    Flag("back", "b", "int", 0),
    Flag("mode", "m", "int", 0),
    Flag("run", "r", "int", 0),
    Flag("save", "s", "int", 0),
    Flag("layout", "L", "str", None),
)


def parse_bnorm(op: str, dtype_name: str, tokens: Sequence[str]) -> BatchNormSignature:
    values, spelled = parse_flags(op, tokens, BNORM_FLAGS)
    name = lambda long: spelled.get(long, "--" + long)  # noqa: E731 - the flag as the user wrote it
    for long in ("back", "mode", "run", "save"):
        require(op, values[long] in (0, 1), f"{name(long)} expects 0 or 1, got {values[long]}")
    require(op, values["forw"] in (0, 1, 2), f"{name('forw')} expects 0 (off), 1 (train) or 2 (inference), "
                                             f"got {values['forw']}")
    require(op, values["alpha"] == 1.0 and values["beta"] == 0.0,
            f"only alpha=1 and beta=0 are supported, got -A {values['alpha']:g} -B {values['beta']:g}")
    forw, back = values["forw"], values["back"]
    require(op, not (forw and back), f"-F {forw} with -b 1 runs forward and backward together: "
                                     "give them as two commands (-F 0 -b 1 for the backward)")
    require(op, forw or back, "-F 0 -b 0 runs nothing (use -F 1 training, -F 2 inference or -F 0 -b 1 backward)")
    mode = {1: "forward_training", 2: "forward_inference"}.get(forw, "backward")
    in_d = values["in_d"]
    require(op, in_d >= 0, f"{name('in_d')} must be at least 0 (0 = a 2-D input), got {in_d}")
    layout = values["layout"]
    if layout is None:
        layout = "NCDHW" if in_d else "NCHW"
    layout = layout.upper()
    require(op, len(layout) == (5 if in_d else 4),
            f"{name('layout')} {show(layout)} does not fit a {'3' if in_d else '2'}-D input"
            f" ({name('in_d')} {in_d})")
    sizes = {"N": values["batchsize"], "C": values["in_channels"], "D": in_d, "H": values["in_h"],
             "W": values["in_w"]}
    shape = tuple(sizes.get(ch, -1) for ch in layout)  # an unknown letter fails the signature's layout check
    return BatchNormSignature(dtype_name=dtype_name, input_shape=shape, layout=layout, spatial=bool(values["mode"]),
                              bnorm_mode=mode, run=bool(values["run"]), save=bool(values["save"]))
