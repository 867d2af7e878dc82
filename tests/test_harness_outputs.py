"""The timed call's cost must not grow with the size of the kernel's result: a benchmark worker's CPU kernel gets
its result buffer from IREE's caching allocator (see `IreeCall`), so in steady state a call neither allocates,
zeroes nor page-faults its output.

Measured with counts, not times, so a loaded shared host cannot make these flaky: the allocator's own statistics
(bytes handed out per call) and the calling thread's minor page faults per call. Both kernels do almost no
arithmetic (a K=1 matmul: an outer product) and exist for the size of their result. Without the caching
allocator: 4 MiB allocated per call for the 4 MiB result, and 16385 faults per call (one per 4 KiB page) for the
64 MiB one, whose calloc comes from a fresh mmap on every call (above glibc's 32 MiB mmap ceiling), 47.5 ms per
call instead of 7.6 ms on the project's Zen 3.
"""
from __future__ import annotations

import resource
import shlex
import sys

import pytest

from boo_engine.bench.child import IreeCall, RuntimeCache
from boo_engine.bench.reproducer import write_reproducer
from boo_engine.commands import parse_command
from boo_engine.compile.build import compile_signature

SMALL_WORK_4MIB_OUT = "gemm --a_w 1024 --a_h 1 --b_w 1024"     # (1024 x 1) @ (1 x 1024): 4 MiB f32 result
SMALL_WORK_64MIB_OUT = "gemm --a_w 4096 --a_h 1 --b_w 4096"    # 64 MiB result, above glibc's mmap ceiling


def _kernel(cache, text: str) -> tuple[IreeCall, object]:
    sig = parse_command(text)
    art = compile_signature(sig, "cpu", cache=cache)
    return IreeCall(RuntimeCache(), sig, art.vmfb_path, "local-sync", 1, "main", sig.get_sample_args(0)), art


def _steady(kernel: IreeCall, warmup: int = 3) -> None:
    for _ in range(warmup):
        kernel.call()          # the result is dropped at once, as in the harness's loop


def test_no_allocation_per_call_in_steady_state(cache):
    kernel, _ = _kernel(cache, SMALL_WORK_4MIB_OUT)
    allocator = kernel.prepared.launchable.module.device.allocator
    if not allocator.has_statistics:
        pytest.skip("this IREE runtime was built without allocator statistics")
    _steady(kernel)
    before = allocator.statistics["device_bytes_allocated"]
    n = 20
    for _ in range(n):
        kernel.call()
    per_call = (allocator.statistics["device_bytes_allocated"] - before) / n
    assert per_call < 64 * 1024, f"{per_call:.0f} bytes allocated per call (the result is 4 MiB)"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RUSAGE_THREAD is Linux's")
def test_no_page_faults_per_call_for_a_64mib_result(cache):
    kernel, _ = _kernel(cache, SMALL_WORK_64MIB_OUT)
    _steady(kernel)
    n = 8
    f0 = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for _ in range(n):
        kernel.call()
    faults = (resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - f0) / n
    # 16385 per call (every 4 KiB page of the result) with a fresh buffer per call
    assert faults < 64, f"{faults:.0f} minor page faults per call for a 64 MiB result"


def test_results_stay_right_when_the_buffer_is_reused(cache):
    """The reused result buffer is not zeroed between calls: the kernel must overwrite all of it, and each
    call's result must be its own (the numerics read it through `outputs()`)."""
    import torch

    kernel, _ = _kernel(cache, SMALL_WORK_4MIB_OUT)
    a, b = kernel.prepared.tensors
    want = a @ b
    _steady(kernel)
    first = kernel.outputs()[0]
    second = kernel.outputs()[0]
    assert torch.equal(first, want) and torch.equal(second, want)


def test_reproducer_times_with_the_same_allocator(cache, tmp_path):
    sig = parse_command(SMALL_WORK_4MIB_OUT)
    art = compile_signature(sig, "cpu", cache=cache)
    for driver, threads in (("local-sync", 1), ("local-task", 2)):
        cmd = shlex.split(write_reproducer(str(tmp_path), sig, 0, driver, threads, vmfb_path=art.vmfb_path))
        assert "--device_allocator=caching" in cmd, cmd
    gpu = shlex.split(write_reproducer(str(tmp_path), sig, 0, "hip", 1, vmfb_path=art.vmfb_path))
    assert not any(f.startswith("--device_allocator") for f in gpu), gpu
