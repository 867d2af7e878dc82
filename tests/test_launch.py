"""Launchables: called like sig.reference, zero-copy inputs, exact results structure, clear errors."""
from __future__ import annotations

import gc

import pytest
import torch

from boo_engine.commands import parse_command
from boo_engine.compile.cache import KernelCache
from boo_engine.errors import LaunchError
from boo_engine.runtime.launchable import get_launchable, load_artifact

CONV = "conv -n 2 -c 4 -H 8 -W 8 -k 6 -y 3 -x 3 -p 1 -q 1"


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> KernelCache:
    return KernelCache(tmp_path_factory.mktemp("launch"))


@pytest.fixture(scope="module")
def conv(cache):
    return get_launchable(parse_command(f"{CONV} -F 1"), "cpu", cache=cache)


def test_single_output_is_a_tensor_like_the_reference(conv):
    args = conv.sig.get_sample_args(1)
    out = conv(*args)
    ref = conv.sig.reference(*args)
    assert isinstance(out, torch.Tensor) and out.shape == ref.shape and out.dtype == ref.dtype
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)


def test_tuple_outputs_keep_structure_and_survive_gc(cache):
    sig = parse_command(f"{CONV} -F 6")
    k = get_launchable(sig, "cpu", cache=cache)
    args = sig.get_sample_args(2)
    out = k(*args)
    gc.collect()
    _ = [torch.randn(4096) for _ in range(64)]  # reuse freed memory: outputs must not alias IREE buffers
    ref = sig.reference(*args)
    assert isinstance(out, tuple) and len(out) == len(ref) == 2
    for o, r in zip(out, ref):
        assert o.shape == r.shape and o.dtype == r.dtype
        torch.testing.assert_close(o, r, rtol=1e-4, atol=1e-4)


def test_bf16_round_trip(cache):
    sig = parse_command("convbfp16 -n 1 -c 4 -H 6 -W 6 -k 4 -y 1 -x 1")
    k = get_launchable(sig, "cpu", cache=cache)
    args = sig.get_sample_args(0)
    out = k(*args)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), sig.reference(*args).float(), rtol=2e-2, atol=2e-2)


def test_prepare_invoke_matches_call(conv):
    args = conv.sig.get_sample_args(3)
    p = conv.prepare(*args)
    first = p.to_torch(p.invoke())
    second = p.to_torch(p.invoke())
    assert torch.equal(first, second) and torch.equal(first, conv(*args))


def test_cpu_inputs_are_zero_copy(conv):
    """A later write to the torch input is seen by the kernel: IREE reads the tensor's own memory."""
    x, w = conv.sig.get_sample_args(4)
    p = conv.prepare(x, w)
    before = p.to_torch(p.invoke())
    x.mul_(2.0)
    after = p.to_torch(p.invoke())
    torch.testing.assert_close(after, before * 2, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad, match", [
    (lambda x, w: (x,), "takes 2 tensors, got 1"),
    (lambda x, w: (x, w, w), "takes 2 tensors, got 3"),
    (lambda x, w: (x[:1], w), r"argument 0 has shape \(1, 4, 8, 8\), expected \(2, 4, 8, 8\)"),
    (lambda x, w: (x, w.half()), "argument 1 has dtype torch.float16, expected torch.float32"),
    (lambda x, w: (x, w.numpy()), "argument 1 must be a torch.Tensor"),
])
def test_bad_arguments_raise_launch_error(conv, bad, match):
    x, w = conv.sig.get_sample_args(0)
    with pytest.raises(LaunchError, match=match) as ei:
        conv(*bad(x, w))
    assert "\n" not in str(ei.value) and conv.sig.func_name in str(ei.value)


def test_non_contiguous_input_is_accepted(conv):
    x, w = conv.sig.get_sample_args(5)
    xt = x.transpose(2, 3).contiguous().transpose(2, 3)  # same values, strided memory
    assert not xt.is_contiguous()
    torch.testing.assert_close(conv(xt, w), conv(x, w))


def test_load_artifact_errors_are_one_line(tmp_path):
    bad = tmp_path / "x.vmfb"
    bad.write_bytes(b"not a module")
    with pytest.raises(LaunchError, match="cannot load"):
        load_artifact(str(bad), "local-sync")
    with pytest.raises(LaunchError, match="unavailable"):
        load_artifact(str(bad), "cuda")


THREADS = r"""
import sys, torch
from boo_engine.commands import parse_command
from boo_engine.compile.cache import KernelCache
from boo_engine.errors import LaunchError
from boo_engine.runtime.launchable import get_launchable
sig = parse_command("gemm --a_w 16 --a_h 32 --b_w 16")
cache = KernelCache(sys.argv[1])
args = sig.get_sample_args(0)
k2 = get_launchable(sig, "cpu", cache=cache, threads=2)
assert k2.module.driver == "local-task"
k1 = get_launchable(sig, "cpu", cache=cache)
assert k1.module.driver == "local-sync"
torch.testing.assert_close(k2(*args), k1(*args))
try:
    get_launchable(sig, "cpu", cache=cache, threads=3)
except LaunchError as e:
    assert "fresh process" in str(e)
    print("ok")
"""


def test_local_task_threads_fixed_per_process(tmp_path):
    """threads > 1 runs on local-task; IREE fixes its worker count per process, so asking for another count
    later is a clear error rather than a silently different measurement (run in a child: it is per process)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", THREADS, str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]
