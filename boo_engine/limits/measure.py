"""Measure what this machine's kernels can reach: peak GFLOP/s per dtype and peak memory GB/s.

Runs in a process of its own (`python -m boo_engine.limits.measure --target cpu --threads 1`, started by
`peaks.measure_in_child`), so torch's and IREE's thread pools are sized for the measurement alone and the caller
(the session's engine thread, the dashboard's process) neither imports torch nor holds the GIL meanwhile.

Every candidate is timed with the project's harness (`bench.harness.measure`: warm-up discarded, the fastest of the
samples; torch on a GPU synchronised after each block):

- compute, per dtype: an IREE-compiled matmul built the normal way (a `gemm` signature through the kernel cache,
  `get_launchable`) at two sizes, and torch.matmul on the target's device (CPU: `torch.set_num_threads(threads)`)
  at a size that makes one call ~30 ms from a probe call; the best wins.
- bandwidth: streaming kernels over buffers far larger than the last-level cache (CPU: 8x the LLC, at least
  256 MiB; GPU: 1 GiB): torch `copy_` (bytes read + written) and `add(out=)`, and IREE's compile of aten::add.

The answer is a list of candidates (JSON), the caller (`peaks.py`) keeps the best of each kind and dtype.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Unpack

from ..bench.harness import measure
from ..targets import Target, parse_target
from .records import Candidate, CandidateExtras, Measurement
from .theory import DTYPES, cpu_stream_bytes

_GEMM_OP = {"float32": "gemm", "float16": "gemmfp16", "bfloat16": "gemmbfp16"}
#: harness settings: short (the whole measurement should stay under ~15 s on a CPU), the best of >= 5 samples
_ITERS = 5
_WARMUP_S = 0.05
_MAX_S = 1.5


def _best_us(call: Callable[[], object], sync: Callable[[], object] | None) -> float:
    """The fastest sample: a peak is what the machine CAN do, and other processes only ever slow a sample down
    (the median of 5 taken beside a busy core had put the f32 peak at 92 GFLOP/s, under what kernels then ran at)."""
    m = measure(call, iters=_ITERS, warmup_s=_WARMUP_S, min_warmup_calls=2, max_time_s=_MAX_S, sync=sync)
    return float(min(m.samples_us))


def _candidate(kind: str, dtype: str | None, work: float, best_us: float, source: str,
               **details: Unpack[CandidateExtras]) -> Candidate:
    """One measured candidate: `work` flops (compute) or bytes (bandwidth) per call; value in GFLOP/s or GB/s."""
    return {"kind": kind, "dtype": dtype, "value": work / best_us / 1e3, "source": source,
            "best_us": best_us, **details}


def iree_gemm_sizes(target: Target) -> tuple[int, ...]:
    return (512, 1024) if target.kind == "cpu" else (4096, 8192)


def _iree_matmuls(target: Target, dtype: str, device: str, errors: list[str]) -> list[Candidate]:
    from .. import parse_command
    from ..runtime.launchable import get_launchable

    out: list[Candidate] = []
    for n in iree_gemm_sizes(target):
        try:
            sig = parse_command(f"{_GEMM_OP[dtype]} --a_w {n} --a_h {n} --b_w {n}")
            launchable = get_launchable(sig, target)
            prepared = launchable.prepare(*sig.get_sample_args(0, device=device))
            med = _best_us(prepared.invoke, None)   # an IREE invoke returns once the device is done
            out.append(_candidate("compute", dtype, sig.flops, med, f"iree matmul {n}^3", size=n,
                                  func_name=sig.func_name))
        except Exception as e:  # noqa: BLE001 - a candidate that cannot run is noted, the others still count
            errors.append(f"iree matmul {dtype} {n}: {(str(e).splitlines() or [repr(e)])[0]}")
    return out


def _torch_matmul(dtype: str, device: str, sync: Callable[[], object] | None) -> Candidate:
    import torch  # measure_peaks imported it

    tdt = getattr(torch, dtype)
    if device == "cpu":
        # one probe call at 256 sets the size: ~30 ms a call, 256..2048 (f16 on a CPU without fp16 units runs
        # at ~1 GFLOP/s, where 1024^3 would take 2 s a call)
        a = torch.randn(256, 256).to(tdt)
        t0 = time.perf_counter()
        torch.matmul(a, a)
        rate = 2 * 256 ** 3 / max(time.perf_counter() - t0, 1e-9)
        n = int(min(2048, max(256, round((0.03 * rate / 2) ** (1 / 3) / 128) * 128)))
    else:
        n = 8192
    a = torch.randn(n, n, device=device).to(tdt)
    b = torch.randn(n, n, device=device).to(tdt)
    med = _best_us(lambda: torch.matmul(a, b), sync)
    return _candidate("compute", dtype, 2 * n ** 3, med, f"torch.matmul {n}^3", size=n)


def _bandwidth(target: Target, device: str, sync: Callable[[], object] | None, errors: list[str]) -> list[Candidate]:
    import torch  # measure_peaks imported it

    nbytes = cpu_stream_bytes() if device == "cpu" else 1 << 30
    n = nbytes // 4
    out = []
    a = torch.ones(n, device=device)
    b = torch.ones(n, device=device)
    out.append(_candidate("bandwidth", None, 2 * n * 4, _best_us(lambda: b.copy_(a), sync),
                          f"torch copy_ {nbytes >> 20} MiB", buffer_bytes=nbytes))
    c = torch.empty(n, device=device)
    out.append(_candidate("bandwidth", None, 3 * n * 4, _best_us(lambda: torch.add(a, b, out=c), sync),
                          f"torch add {nbytes >> 20} MiB", buffer_bytes=nbytes))
    try:
        from .. import parse_command
        from ..runtime.launchable import get_launchable

        sig = parse_command(f'aten::add "[[{n}], [{n}]]" "[\'float\', \'float\']" "[[1], [1]]" "[\'\', \'\']"')
        prepared = get_launchable(sig, target).prepare(a, b)
        med = _best_us(prepared.invoke, None)
        out.append(_candidate("bandwidth", None, sig.bytes, med, f"iree add {nbytes >> 20} MiB",
                              buffer_bytes=nbytes, func_name=sig.func_name))
    except Exception as e:  # noqa: BLE001
        errors.append(f"iree add: {(str(e).splitlines() or [repr(e)])[0]}")
    return out


def measure_peaks(target: Target | str = "cpu", threads: int = 1) -> Measurement:
    """Measure every candidate in this process: {"candidates": [...], "errors": [...], "seconds": s, ...}.
    Imports torch and sets its thread count: run it in a process of its own (`measure_in_child`)."""
    t0 = time.perf_counter()
    import torch

    target = target if isinstance(target, Target) else parse_target(target)
    if target.kind == "cpu":
        target = Target("cpu", threads=threads, per_op_defaults=target.per_op_defaults)
        torch.set_num_threads(threads)
        device, sync = "cpu", None
    else:
        device, sync = "cuda", torch.cuda.synchronize   # ROCm's torch calls its GPUs "cuda" too
    candidates: list[Candidate] = []
    errors: list[str] = []
    with torch.no_grad():
        for dtype in DTYPES:
            candidates += _iree_matmuls(target, dtype, device, errors)
            try:
                candidates.append(_torch_matmul(dtype, device, sync))
            except Exception as e:  # noqa: BLE001
                errors.append(f"torch.matmul {dtype}: {(str(e).splitlines() or [repr(e)])[0]}")
        candidates += _bandwidth(target, device, sync, errors)
    return {"candidates": candidates, "errors": errors, "seconds": time.perf_counter() - t0,
            "threads": threads, "target": target.name}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m boo_engine.limits.measure")
    p.add_argument("--target", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    out = measure_peaks(args.target, args.threads)
    sys.stdout.write("\n" + json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
