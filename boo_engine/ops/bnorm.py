"""Batch-norm signatures (MIOpenDriver `bnorm`): forward training, forward inference and backward.

Statistics are taken per channel over N and the spatial dims (`-m 1`, spatial, what torch's BatchNorm does) or
per element over N only (`-m 0`, MIOpen's per-activation mode). Scale, bias and the statistics are float32
whatever the data dtype, as in MIOpen and BOO (mixed precision): their shape is (C,) in spatial mode and the
input's shape without N, in layout order, in per-activation mode.

Call conventions (in order; `[...]` present only when the flag asks):
- training (`-F 1`): (x, scale, bias[, running_mean, running_var if -r 1])
  -> (y[, saved_mean, saved_invstd if -s 1][, new_running_mean, new_running_var if -r 1])
- inference (`-F 2`): (x, scale, bias, running_mean, running_var) -> y
- backward (`-F 0 -b 1`): (dLdy, x, scale[, saved_mean, saved_invstd if -s 1; else recomputed from x])
  -> (dLdx, dLdscale, dLdbias)

The references are the normalization math written out (accumulating in float32 for 16-bit data), which lowers
through IREE's torch input without a decomposition pass. Momentum 0.1 and epsilon 1e-5 are fixed, as in BOO.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from boo_engine.ops._lazy import torch

if TYPE_CHECKING:
    import torch

from boo_engine.ops._common import SHORT_DTYPES, check_dtype, check_size, fail, label_of, numel, shape_str
from boo_engine.ops.base import OpSignature
from boo_engine.ops.layernorm import sum_leading

BNORM_EPS = 1e-5
BNORM_MOMENTUM = 0.1
BNORM_MODES = ("forward_training", "forward_inference", "backward")
_SPATIAL = {2: "HW", 3: "DHW"}
#: the mode as a shape label gives it
BNORM_SHORT_MODES: dict[str, str] = {"forward_training": "train", "forward_inference": "infer", "backward": "bwd"}


def _acc(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _sum_batch_space(t: torch.Tensor) -> torch.Tensor:
    """A (N, P, R) work tensor summed over N and R per statistic, as (1, P, 1), in chains of at most SUM_CHUNK
    additions (layernorm.sum_leading): IREE's CPU code sums one long chain per output, and a Conv3d net's float32
    batch-norm backward (1024 values a channel) had 4-7x torch's error std in its scale and bias gradients."""
    n, p, r = t.shape
    return sum_leading(t.permute(0, 2, 1).reshape(n * r, p), [0]).reshape(1, p, 1)


@dataclass(frozen=True)
class BatchNormSignature(OpSignature):
    op: ClassVar[str] = "bnorm"

    dtype_name: str
    input_shape: tuple[int, ...]  # in layout order
    layout: str = "NCHW"
    spatial: bool = True  # -m 1; False = per-activation (-m 0)
    bnorm_mode: str = "forward_training"
    run: bool = False
    save: bool = False

    def __post_init__(self) -> None:
        op = "bnorm"
        object.__setattr__(self, "input_shape", tuple(self.input_shape))
        check_dtype(op, self.dtype_name)
        if self.bnorm_mode not in BNORM_MODES:
            raise fail(op, f"unknown mode {self.bnorm_mode!r}")
        rank = len(self.layout)
        if rank - 2 not in _SPATIAL or sorted(self.layout) != sorted("NC" + _SPATIAL[rank - 2]):
            raise fail(op, f"--layout {self.layout!r} is not a 2-D or 3-D layout (letters N, C, [D,] H, W each once)")
        if len(self.input_shape) != rank:
            raise fail(op, f"input has {len(self.input_shape)} dims, layout {self.layout!r} {rank}")
        for ch, d in zip(self.layout, self.input_shape):
            check_size(op, f"input dim {ch}", d)
        if self.bnorm_mode == "forward_training" and self.run and self.reduced_count < 2:
            raise fail(op, "updating running statistics (-r 1) needs more than one value per channel")

    # ---- shapes ---------------------------------------------------------------------------------------
    @property
    def num_spatial_dims(self) -> int:
        return len(self.layout) - 2

    @property
    def _work_layout(self) -> str:
        """The layout the math runs in: N first, then the statistics' dims (C first in spatial mode)."""
        if self.spatial:
            return "NC" + _SPATIAL[self.num_spatial_dims]
        return "N" + self.layout.replace("N", "")

    @property
    def param_shape(self) -> tuple[int, ...]:
        if self.spatial:
            return (self.input_shape[self.layout.index("C")],)
        return tuple(d for ch, d in zip(self.layout, self.input_shape) if ch != "N")

    @property
    def reduced_count(self) -> int:
        """How many values each statistic is taken over."""
        return numel(self.input_shape) // numel(self.param_shape)

    def _roles(self) -> list[str]:
        if self.bnorm_mode == "forward_training":
            return ["x", "scale", "bias"] + (["running_mean", "running_var"] if self.run else [])
        if self.bnorm_mode == "forward_inference":
            return ["x", "scale", "bias", "running_mean", "running_var"]
        return ["dLdy", "x", "scale"] + (["saved_mean", "saved_invstd"] if self.save else [])

    def arg_names(self) -> list[str]:
        return self._roles()

    def result_names(self) -> list[str]:
        if self.bnorm_mode == "forward_training":
            return (["y"] + (["saved_mean", "saved_invstd"] if self.save else [])
                    + (["running_mean", "running_var"] if self.run else []))
        if self.bnorm_mode == "forward_inference":
            return ["y"]
        return ["dLdx", "dLdscale", "dLdbias"]

    def _is_data(self, role: str) -> bool:
        return role in ("x", "y", "dLdy", "dLdx")

    def input_shapes(self) -> list[tuple[int, ...]]:
        return [self.input_shape if self._is_data(r) else self.param_shape for r in self._roles()]

    def input_dtype_names(self) -> list[str]:
        return [self.dtype_name if self._is_data(r) else "float32" for r in self._roles()]

    def output_shapes(self) -> list[tuple[int, ...]]:
        return [self.input_shape if self._is_data(r) else self.param_shape for r in self.result_names()]

    def output_dtype_names(self) -> list[str]:
        return [self.dtype_name if self._is_data(r) else "float32" for r in self.result_names()]

    # ---- identity -------------------------------------------------------------------------------------
    @property
    def mode(self) -> str:
        return self.bnorm_mode

    @property
    def func_name(self) -> str:
        items = ["bnorm", f"{self.num_spatial_dims}d", self.dtype_name, self.mode, shape_str(self.input_shape),
                 self.layout.lower(), "spatial" if self.spatial else "per_activation"]
        if self.run and self.bnorm_mode == "forward_training":
            items.append("run")
        if self.save and self.bnorm_mode != "forward_inference":
            items.append("save")
        return "_".join(items)

    @property
    def shape_label(self) -> str:
        """`n3 c4 3x2 NCHW train`: batch, channels, spatial size (D H W order), layout, `per-act` for
        per-activation statistics (-m 0), the mode (train, infer, bwd), `+run` / `+save` where they apply and a
        16-bit dtype."""
        size = dict(zip(self.layout, self.input_shape))
        return label_of(
            f"n{size['N']}", f"c{size['C']}", shape_str([size[ch] for ch in _SPATIAL[self.num_spatial_dims]]),
            self.layout, "" if self.spatial else "per-act", BNORM_SHORT_MODES[self.bnorm_mode],
            "+run" if self.run and self.bnorm_mode == "forward_training" else "",
            "+save" if self.save and self.bnorm_mode != "forward_inference" else "",
            SHORT_DTYPES.get(self.dtype_name, self.dtype_name))

    # ---- sample args ----------------------------------------------------------------------------------
    def get_sample_args(self, seed: int = 0, *, device: torch.device | str | None = None,
                        splat_value: float | None = None) -> tuple[torch.Tensor, ...]:
        """As the base class, but variances are positive (|randn| + 0.5) and saved statistics are the real ones
        of x, so the kernel computes on values a training step would give it."""
        args = list(super().get_sample_args(seed, splat_value=splat_value))
        roles = self._roles()
        if splat_value is None and "running_var" in roles:
            i = roles.index("running_var")
            args[i] = args[i].abs() + 0.5
        if "saved_mean" in roles:
            mean, var = self._stats(args[roles.index("x")].float())
            args[roles.index("saved_mean")] = mean.reshape(self.param_shape)
            args[roles.index("saved_invstd")] = torch.rsqrt(var + BNORM_EPS).reshape(self.param_shape)
        if device is not None:
            args = [a.to(device) for a in args]
        return tuple(args)

    # ---- reference ------------------------------------------------------------------------------------
    def _to_work(self, t: torch.Tensor) -> torch.Tensor:
        """Data tensor in layout order -> (N, P, rest) where P indexes the statistics."""
        w = self._work_layout
        t = t.permute([self.layout.index(ch) for ch in w])
        if self.spatial:
            return t.reshape(t.shape[0], t.shape[1], -1)
        return t.reshape(t.shape[0], -1, 1)

    def _from_work(self, t: torch.Tensor) -> torch.Tensor:
        w = self._work_layout
        work_shape = [self.input_shape[self.layout.index(ch)] for ch in w]
        t = t.reshape(work_shape)
        return t.permute([w.index(ch) for ch in self.layout]).contiguous()

    def _stats(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-statistic mean and biased variance of a data tensor (flat, P values)."""
        xw = self._to_work(x)
        mean = xw.mean(dim=(0, 2))
        var = ((xw - mean[None, :, None]) ** 2).mean(dim=(0, 2))
        return mean, var

    def reference(self, *args: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        a = dict(zip(self._roles(), args))
        data_dtype = a["x"].dtype
        param_dtype = a["scale"].dtype
        acc = _acc(data_dtype)
        def col(t: torch.Tensor) -> torch.Tensor:  # a flat (P,) parameter against (N, P, rest)
            return t.to(acc).reshape(1, -1, 1)

        def flat(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(self.param_shape)

        x = self._to_work(a["x"].to(acc))
        scale = col(a["scale"])
        if self.bnorm_mode == "forward_inference":
            invstd = torch.rsqrt(col(a["running_var"]) + BNORM_EPS)
            y = (x - col(a["running_mean"])) * invstd * scale + col(a["bias"])
            return self._from_work(y).to(data_dtype)
        if self.bnorm_mode == "forward_training":
            mean = x.mean(dim=(0, 2), keepdim=True)
            var = ((x - mean) ** 2).mean(dim=(0, 2), keepdim=True)
            invstd = torch.rsqrt(var + BNORM_EPS)
            y = (x - mean) * invstd * scale + col(a["bias"])
            results = [self._from_work(y).to(data_dtype)]
            if self.save:
                results += [flat(mean).to(param_dtype), flat(invstd).to(param_dtype)]
            if self.run:
                m, count = BNORM_MOMENTUM, self.reduced_count
                new_mean = (1 - m) * a["running_mean"].to(acc) + m * flat(mean)
                new_var = (1 - m) * a["running_var"].to(acc) + m * flat(var) * (count / (count - 1))
                results += [new_mean.to(param_dtype), new_var.to(param_dtype)]
            return tuple(results) if len(results) > 1 else results[0]
        # backward
        dy = self._to_work(a["dLdy"].to(acc))
        if self.save:
            mean, invstd = col(a["saved_mean"]), col(a["saved_invstd"])
        else:
            mean = x.mean(dim=(0, 2), keepdim=True)
            invstd = torch.rsqrt(((x - mean) ** 2).mean(dim=(0, 2), keepdim=True) + BNORM_EPS)
        xhat = (x - mean) * invstd
        dbias = _sum_batch_space(dy)
        dscale = _sum_batch_space(dy * xhat)
        count = self.reduced_count
        dx = scale * invstd * (dy - dbias / count - xhat * dscale / count)
        return (self._from_work(dx).to(data_dtype), flat(dscale).to(param_dtype), flat(dbias).to(param_dtype))

    # ---- cost model -----------------------------------------------------------------------------------
    @property
    def flops(self) -> int:
        """A documented estimate per data element: training forward 8 (mean 1, variance 3, normalize 2,
        scale and shift 2), inference 4, backward 10 (x-hat 2, two reductions 3, input grad 5)."""
        per = {"forward_training": 8, "forward_inference": 4, "backward": 10}[self.bnorm_mode]
        return per * numel(self.input_shape)

    def describe(self) -> dict[str, Any]:
        return {
            **self.common_facts(),
            "arguments": self.arg_names(),
            "results": self.result_names(),
            "layout": self.layout,
            "norm_mode": "spatial" if self.spatial else "per_activation",
            "param_shape": list(self.param_shape),
            "run": self.run,
            "save": self.save,
            "eps": BNORM_EPS,
            "momentum": BNORM_MOMENTUM,
        }
