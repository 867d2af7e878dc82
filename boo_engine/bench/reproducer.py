"""Reproduce a measurement outside the tool: the inputs the harness used, saved next to the artifact, and the
`iree-benchmark-module` command line that times the same artifact on the same inputs.

Inputs are written once per (seed, splat value) into `<artifact_dir>/inputs_<tag>/`: `.npy` for dtypes numpy
has (float32, float16), raw little-endian bytes for bfloat16, which iree-benchmark-module reads with
`--input=<shape>xbf16=@file.bin` (checked with iree-benchmark-module 3.13).

A saved input is reused only when it is whole: readable, of the signature's shape and dtype, and of the size its
header promises (a truncated `.npy` would make the stored command fail); otherwise it is written again. When the
artifact's folder cannot be written (a read-only cache), the inputs go to `scratch_dir` (the overlay's entry).
"""
from __future__ import annotations

import glob
import os
import shlex
import tempfile
from collections.abc import Sequence

from ..errors import BooError
from ..fsutil import open_regular
from ..targets import runtime_driver


class ReproducerError(BooError):
    """The reproducer could not be written (missing artifact, unwritable folder)."""


def write_reproducer(
    artifact_dir: str,
    sig,
    seed: int,
    driver: str,
    threads: int,
    function: str = "main",
    *,
    vmfb_path: str | None = None,
    splat_value: float | None = None,
    scratch_dir: str | None = None,
    repetitions: int = 10,
    min_time_s: float = 0.1,
) -> str:
    """Save `sig`'s inputs for `seed` beside the artifact and return the shell command that benchmarks it.

    `driver` is the IREE driver the harness used ("local-sync", "local-task", "hip", "cuda"); on the CPU the
    thread count picks local-sync (1) or local-task with `threads` workers, as the worker does.
    """
    artifact_dir = os.path.abspath(artifact_dir)
    vmfb = os.path.abspath(vmfb_path or _find_vmfb(artifact_dir))
    if not os.path.isfile(vmfb):
        raise ReproducerError(f"no such artifact: {vmfb}")
    tag = f"seed{seed}" if splat_value is None else f"splat{splat_value:g}"
    folder = os.path.join(artifact_dir, f"inputs_{tag}")
    if scratch_dir and not _inputs_whole(folder, sig) and not os.access(artifact_dir, os.W_OK):
        folder = os.path.join(os.path.abspath(scratch_dir), f"inputs_{tag}")
    input_flags = _write_inputs(folder, sig, seed, splat_value)
    device_flags = _device_flags(driver, threads)
    cmd = [
        "iree-benchmark-module",
        f"--module={vmfb}",
        *device_flags,
        f"--function={function}",
        *input_flags,
        f"--benchmark_repetitions={repetitions}",
        f"--benchmark_min_time={min_time_s:g}s",
    ]
    return shlex.join(cmd)


def _find_vmfb(artifact_dir: str) -> str:
    found = sorted(glob.glob(os.path.join(artifact_dir, "*.vmfb")))
    if len(found) != 1:
        what = "no .vmfb" if not found else f"{len(found)} .vmfb files"
        raise ReproducerError(f"{what} in {artifact_dir}; pass vmfb_path")
    return found[0]


def _device_flags(driver: str, threads: int) -> list[str]:
    """On the CPU, `--device_allocator=caching` as the benchmark worker's device has (see `IreeCall`): results
    reuse the buffer the previous call freed instead of being calloc'd (and, above 32 MiB, page-faulted) anew."""
    driver = runtime_driver(driver, threads)
    if driver == "local-task":
        return ["--device=local-task", f"--task_topology_max_group_count={threads}", "--device_allocator=caching"]
    if driver == "local-sync":
        return ["--device=local-sync", "--device_allocator=caching"]
    return [f"--device={driver}"]


def _write_inputs(folder: str, sig, seed: int, splat_value: float | None) -> list[str]:
    """Write each argument once (a complete folder is reused: then torch is not even imported, so a run over
    cached kernels reports its results without paying for it) and return the --input flags for them."""
    shapes, dtypes = sig.input_shapes(), sig.input_dtype_names()
    names = [_file_name(i, dt) for i, dt in enumerate(dtypes)]
    if not _inputs_whole(folder, sig):
        args = sig.get_sample_args(seed, splat_value=splat_value)
        parent = os.path.dirname(folder) or "."
        try:
            os.makedirs(parent, exist_ok=True)
            tmp = tempfile.mkdtemp(prefix=".inputs-", dir=parent)
            for name, t in zip(names, args):
                _write_one(os.path.join(tmp, name), t)
            if os.path.islink(folder):   # never ours (we make folders): writing through it would land elsewhere
                os.unlink(folder)
            if os.path.exists(folder):
                _merge(tmp, folder)
            else:
                try:
                    os.replace(tmp, folder)
                except OSError:   # another process won the race
                    _merge(tmp, folder)
        except OSError as e:
            raise ReproducerError(f"cannot write reproducer inputs in {parent}: {e.strerror or e}") from None
    return [_input_flag(os.path.join(folder, n), shape, dt) for n, shape, dt in zip(names, shapes, dtypes)]


def _inputs_whole(folder: str, sig) -> bool:
    """Every input file of `sig` in `folder` is there, readable and complete."""
    if os.path.islink(folder):
        return False
    dtypes = sig.input_dtype_names()
    return all(_input_whole(os.path.join(folder, _file_name(i, dt)), tuple(int(d) for d in shape), dt)
               for i, (shape, dt) in enumerate(zip(sig.input_shapes(), dtypes)))


def _input_whole(path: str, shape: tuple[int, ...], dtype_name: str) -> bool:
    count = 1
    for d in shape:
        count *= d
    try:
        with open_regular(path) as f:   # a FIFO planted there would block a plain open forever
            size = os.fstat(f.fileno()).st_size
            if dtype_name == "bfloat16":
                return size == 2 * count
            import numpy as np

            version = np.lib.format.read_magic(f)
            header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                      else np.lib.format.read_array_header_2_0)(f)
            got_shape, fortran, dtype = header
            return (tuple(got_shape) == shape and not fortran and dtype == np.dtype(dtype_name)
                    and size == f.tell() + count * dtype.itemsize)
    except (OSError, ValueError, TypeError):
        return False


def _merge(tmp: str, folder: str) -> None:
    """Another process made the folder first (or it is incomplete): move our files in, atomically each."""
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(tmp):
        os.replace(os.path.join(tmp, name), os.path.join(folder, name))
    os.rmdir(tmp)


def _file_name(i: int, dtype_name: str) -> str:
    return f"arg{i}.bin" if dtype_name == "bfloat16" else f"arg{i}.npy"


def _write_one(path: str, t) -> None:
    import numpy as np
    import torch

    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        with open(path, "wb") as f:
            f.write(t.view(torch.uint16).numpy().astype("<u2", copy=False).tobytes())
    else:
        np.save(path, t.numpy())


def _input_flag(path: str, shape: Sequence[int], dtype_name: str) -> str:
    if dtype_name == "bfloat16":
        dims = "x".join(str(d) for d in shape)
        return f"--input={dims}xbf16=@{path}" if dims else f"--input=bf16=@{path}"
    return f"--input=@{path}"
