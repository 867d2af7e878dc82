"""boo_engine.nn.kernels: the one path torch code takes into our kernels (real IREE kernels on the CPU)."""
from __future__ import annotations

import dataclasses
import gc

import pytest
import torch
from nn_support import private_kernel_cache

from boo_engine.nn import kernels
from boo_engine.nn.kernels import (
    BOO_KERNELS,
    BooNNError,
    current_variant,
    kernel_variant,
    launchable_for,
    record_calls,
    run,
    target_for,
    use_variant,
)
from boo_engine.ops.conv import ConvSignature
from boo_engine.ops.gemm import GemmSignature
from boo_engine.ops.layernorm import LayerNormSignature
from boo_engine.variants import BEST, Variant


@pytest.fixture(autouse=True, scope="module")
def _private_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.delenv("BOO_TUNING_SPEC_PATH", raising=False)
    mp.delenv("BOO_KERNELS", raising=False)
    kernels.clear_launchables()
    with private_kernel_cache(tmp_path_factory.getbasetemp() / "nn-kernels"):
        yield
    kernels.clear_launchables()
    mp.undo()


GEMM = GemmSignature("float32", 16, 24, 8)
LN = LayerNormSignature("float32", (2, 4, 16), 2, affine=True)


def _close(a, b, tol=1e-5):
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.shape == y.shape and x.dtype == y.dtype
        assert torch.allclose(x.float(), y.float(), atol=tol, rtol=tol)


def test_run_matches_the_reference_single_and_multi_output_and_bf16():
    for sig in (GEMM, LN, GemmSignature("bfloat16", 16, 24, 8)):
        args = sig.get_sample_args(1)
        _close(run(sig, *args), sig.reference(*args), tol=1e-2 if sig.dtype_name == "bfloat16" else 1e-5)


def test_results_own_their_memory():
    """Results leave IREE zero-copy (DLPack): each must keep its own buffer alive and never alias another call's."""
    a, b = GEMM.get_sample_args(2)
    outs = [run(GEMM, a * (i + 1), b) for i in range(20)]
    gc.collect()
    junk = [torch.randn(16, 8) for _ in range(200)]   # reuse freed memory if anything was freed under us
    for i, y in enumerate(outs):
        assert torch.allclose(y, (a * (i + 1)) @ b, atol=1e-4), i
    assert len({y.data_ptr() for y in outs}) == len(outs)
    del junk


def test_launchables_are_cached_in_memory():
    a, b = GEMM.get_sample_args(0)
    run(GEMM, a, b)
    n = kernels.cached_launchables()
    first = launchable_for(GEMM, target_for(a.device), current_variant())
    run(GEMM, a, b)
    assert kernels.cached_launchables() == n
    assert launchable_for(GEMM, target_for(a.device), current_variant())[0] is first[0]


def test_variant_precedence(tmp_path, monkeypatch):
    spec = tmp_path / "mine.mlir"
    spec.write_text("module {}\n")
    assert current_variant() is BEST                                # the best known kernels by default
    monkeypatch.setenv("BOO_KERNELS", "boo")
    assert current_variant() is BOO_KERNELS and BOO_KERNELS.base == "boo"   # or BOO's own, when asked
    monkeypatch.setenv("BOO_KERNELS", "fastest")
    with pytest.raises(BooNNError, match="BOO_KERNELS='fastest': expected one of best, boo"):
        current_variant()
    monkeypatch.delenv("BOO_KERNELS")
    monkeypatch.setenv("BOO_TUNING_SPEC_PATH", str(spec))
    assert current_variant().tuning_specs == (str(spec),)          # iree-boo-driver's variable
    v = Variant(name="flagged", flags=("--iree-opt-data-tiling",))
    with use_variant(v):
        assert current_variant() is v                               # the block's, over the environment
        assert current_variant("x=--iree-opt-data-tiling").name == "x"   # an explicit one, over both
    monkeypatch.delenv("BOO_TUNING_SPEC_PATH")
    assert current_variant() is BEST


def test_scoped_variant_leaves_other_kernels_at_the_best_known():
    v = Variant(name="scoped", flags=("--iree-opt-data-tiling",), kernels=("some_other_kernel",))
    assert kernel_variant(GEMM, v).best == "rules"
    assert kernel_variant(GEMM, dataclasses.replace(v, kernels=(GEMM.func_name,))).best == ""


def test_a_tuned_file_changes_the_kernels_it_names_and_leaves_the_others_at_the_best_known(tmp_path):
    """tuned.toml as `boo-tui tune` writes it: a spec for every kernel and per-kernel tables, no scope. A kernel it
    does not name got the plain build (a ResNet's stem-conv gradient 1.36 -> 3.5 ms in `boo-tui model`); it keeps
    the best known one, with the spec (a winner that is a spec alone matches its dispatch by content)."""
    spec = str(tmp_path / "tuned.mlir")
    tuned = Variant(name="tuned", tuning_specs=(spec,), kernel_flags=((GEMM.func_name, ("--iree-opt-data-tiling",)),),
                    kernel_formulations=((GEMM.func_name, "default"),))
    other = ConvSignature("float32", 1, 4, 4, (8, 8), (3, 3), (1, 1), (1, 1), (1, 1))
    got = kernel_variant(other, tuned)
    assert got.best == "rules" and got.tuning_specs == (spec,), got
    named = kernel_variant(GEMM, tuned)
    assert named.best == "" and named.flags_for(GEMM.func_name) == ["--iree-opt-data-tiling"]
    everywhere = dataclasses.replace(tuned, flags=("--iree-opt-level=O3",))   # a change of every kernel's: kept
    assert kernel_variant(other, everywhere).best == ""


def test_a_spec_carried_to_a_kernel_the_tuned_file_does_not_name_drops_the_best_columns_data_tiling(tmp_path):
    """The best column data-tiles a transposed gemm on an AVX-512 CPU; a tuned file's spec carried over to it was
    tuned without data-tiling (which would leave it nothing to match): the kernel gets the spec and no
    data-tiling."""
    from boo_engine.cpu_defaults.machine import host_cpu
    from boo_engine.cpu_defaults.rules import DATA_TILING, rule_data_tiled_gemm

    gemm_t = GemmSignature("float32", 64, 96, 80, trans_b=True)
    if not rule_data_tiled_gemm(gemm_t, host_cpu().features):
        pytest.skip("this CPU has no AVX-512: the rule does not data-tile here")
    assert DATA_TILING in kernel_variant(gemm_t, BEST).flags
    spec = str(tmp_path / "tuned.mlir")
    tuned = Variant(name="tuned", tuning_specs=(spec,), kernel_flags=((GEMM.func_name, ("--iree-opt-level=O3",)),))
    got = kernel_variant(gemm_t, tuned)
    assert got.best == "rules" and got.tuning_specs == (spec,) and DATA_TILING not in got.flags, got


def test_tuned_flags_of_a_plain_conv_apply_to_it_with_a_fused_activation():
    conv = ConvSignature("float32", 1, 4, 4, (8, 8), (3, 3), (1, 1), (1, 1), (1, 1), bias=True)
    fused = dataclasses.replace(conv, activation="relu")
    assert fused.func_name != conv.func_name
    tuned = Variant(name="tuned", kernel_flags=((conv.func_name, ("--iree-opt-data-tiling",)),),
                    kernels=(conv.func_name,))
    got = kernel_variant(fused, tuned)
    assert got.flags_for(fused.func_name) == ["--iree-opt-data-tiling"]
    assert kernel_variant(GEMM, tuned).best == "rules"


def test_record_calls_tallies_each_kernel():
    a, b = GEMM.get_sample_args(0)
    x = LN.get_sample_args(0)
    with record_calls() as log:
        for _ in range(3):
            run(GEMM, a, b)
        run(LN, *x)
    run(GEMM, a, b)   # outside the block: not counted
    calls = {name: t.calls for (name, _), t in log.tallies.items()}
    assert calls == {GEMM.func_name: 3, LN.func_name: 1}
    assert all(t.total_ns > 0 for t in log.tallies.values())
