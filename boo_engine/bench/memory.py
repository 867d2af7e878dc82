"""Does a job fit in its device's memory? Checked before a measurement allocates anything, so a kernel too big
for the machine fails as one line naming its size, never as torch's allocator message (or the OOM killer).

The estimate, from the signature's shapes and dtypes alone (no torch):
- inputs and outputs, once each (on a GPU: in device memory; the host also holds the inputs it uploads);
- workspace: on the CPU a second copy of the outputs (copied out of IREE's buffers), the float32 tensors 16-bit
  inputs are generated from, and, when numerics are checked, the float64 copies of inputs and outputs the
  reference computes with. The kernel's own scratch memory is not known in advance and not counted.

Free memory: MemAvailable of /proc/meminfo for the CPU, `torch.cuda.mem_get_info()` of the device for a GPU
(ROCm builds of torch call theirs "cuda" too).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import BooError
from ..ops.base import ELEMENT_BYTES, OpSignature

#: the bytes a float64 copy of an element takes (numerics)
_F64 = 8


class TooBig(BooError):
    """The job cannot fit in the device's free memory."""


@dataclass(frozen=True)
class MemoryNeed:
    inputs: int
    outputs: int
    workspace: int

    @property
    def total(self) -> int:
        return self.inputs + self.outputs + self.workspace


def _numel(shape: tuple[int, ...]) -> int:
    return math.prod(int(d) for d in shape)


def estimate(sig: OpSignature, *, gpu: bool = False, numerics: bool = False) -> MemoryNeed:
    """The memory one measurement of `sig` needs on its device (see the module's docstring)."""
    ins = list(zip(sig.input_shapes(), sig.input_dtype_names()))
    outs = list(zip(sig.output_shapes(), sig.output_dtype_names()))
    inputs = sum(_numel(s) * ELEMENT_BYTES[d] for s, d in ins)
    outputs = sum(_numel(s) * ELEMENT_BYTES[d] for s, d in outs)
    if gpu:
        return MemoryNeed(inputs, outputs, 0)
    workspace = outputs + sum(_numel(s) * 4 for s, d in ins if ELEMENT_BYTES[d] < 4)
    if numerics:
        workspace += (sum(_numel(s) for s, _ in ins) + sum(_numel(s) for s, _ in outs)) * _F64
    return MemoryNeed(inputs, outputs, workspace)


def host_available() -> int | None:
    """MemAvailable of /proc/meminfo in bytes; None where there is no such file."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def gpu_available(device: str) -> int:
    """Free bytes of a torch GPU device (the measuring process's current one when `device` is "cuda")."""
    import torch

    free, _total = torch.cuda.mem_get_info(device)
    return int(free)


def check_fits(sig: OpSignature, device: str = "cpu", *, numerics: bool = False) -> MemoryNeed:
    """Raise TooBig (one line naming the sizes) when `sig` cannot fit in `device`'s free memory; else return the
    estimate. `device`: "cpu" or a torch GPU device ("cuda", "cuda:1")."""
    gpu = device != "cpu"
    need = estimate(sig, gpu=gpu, numerics=numerics)
    where = "the GPU" if gpu else "this host"
    free = gpu_available(device) if gpu else host_available()
    if free is not None and need.total > free:
        parts = f"inputs {human_bytes(need.inputs)} + outputs {human_bytes(need.outputs)}"
        if need.workspace:
            parts += f" + workspace {human_bytes(need.workspace)}"
        raise TooBig(f"{sig.func_name}: too big for {where}: needs {human_bytes(need.total)} ({parts}), "
                     f"only {human_bytes(free)} free")
    if gpu:  # the host holds the inputs too before they are uploaded
        host = host_available()
        if host is not None and need.inputs > host:
            raise TooBig(f"{sig.func_name}: too big for this host: its inputs take {human_bytes(need.inputs)}, "
                         f"only {human_bytes(host)} free")
    return need


def human_bytes(n: int) -> str:
    """1536 -> '1.5 KiB'; binary units up to EiB, then EiB with a big number."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} EiB"
