"""Tuning specs with REAL compiles: the shipped specs apply to the sample commands they name (and only those),
"spec not applied: matched no dispatch" is detected, a spec without the marker is judged against the baseline,
several specs in one variant work, a spec the compiler rejects fails with one clear line, and the gfx942
example cross-compiles for hip:gfx942 and applies."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from boo_engine.commands import parse_command
from boo_engine.compile.cache import KernelCache
from boo_engine.compile.pool import compile_signature
from boo_engine.cpu_defaults.rules import IM2COL
from boo_engine.errors import CompileError
from boo_engine.variants import BASELINE, SPEC_MARKER, Variant, preflight_variant, spec_applied

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "tuning_specs"
FAST = SPECS / "cpu_gemm_256x512x512_fast.mlir"
SLOW = SPECS / "cpu_gemm_256x512x512_slow.mlir"
NOTHING = SPECS / "cpu_matches_nothing.mlir"
CONV = SPECS / "cpu_conv_2x64x28x28_k64_3x3_nchw_fast.mlir"
GFX942 = SPECS / "gfx942_gemm_f16_128x256x256.mlir"

GEMM = "gemm --a_w 256 --a_h 512 --b_w 512 -F 1"
GEMM_T = "gemm --a_w 256 --a_h 512 --b_w 512 --transB 1 -F 1"
CONV_NCHW = "conv -n 2 -c 64 -H 28 -W 28 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -m conv -g 1 -F 1 -t 1"
GEMM16 = "gemmfp16 --a_w 128 --a_h 256 --b_w 256 -F 1"

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> KernelCache:
    return KernelCache(tmp_path_factory.mktemp("spec-cache"))


@pytest.fixture(scope="module", autouse=True)
def _spec_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("BOO_SPEC_CACHE_DIR", str(tmp_path_factory.mktemp("linked")))
    yield
    mp.undo()


def _spec(path: Path, name: str | None = None) -> Variant:
    v = Variant(name=name or path.stem, tuning_specs=(str(path),))
    preflight_variant(v)
    return v


@pytest.fixture(scope="module")
def gemm_base(cache):
    return compile_signature(parse_command(GEMM), "cpu", BASELINE, cache=cache)


def test_fast_spec_applies_to_the_sample_gemm(cache, gemm_base):
    art = compile_signature(parse_command(GEMM), "cpu", _spec(FAST), cache=cache)
    check = spec_applied(art.configs_dir, gemm_base.configs_dir, art.variant.tuning_specs)
    assert check.applied, check.detail
    assert check.dispatches == ("main$async_dispatch_0",)
    # the marker really is in the dumped configuration, next to the spec's lowering_config
    text = "".join(p.read_text() for p in Path(art.configs_dir).glob("*.mlir"))
    assert SPEC_MARKER in text and "vector_common_parallel = [8, 32, 0]" in text
    assert "vector_common_parallel = [8, 32, 0]" not in "".join(
        p.read_text() for p in Path(gemm_base.configs_dir).glob("*.mlir"))
    # without a baseline, the marker alone decides
    assert spec_applied(art.configs_dir, None, art.variant.tuning_specs).applied


def test_spec_matching_nothing_is_reported(cache, gemm_base):
    art = compile_signature(parse_command(GEMM), "cpu", _spec(NOTHING), cache=cache)
    check = spec_applied(art.configs_dir, gemm_base.configs_dir, art.variant.tuning_specs)
    assert not check.applied
    assert check.detail == "spec not applied: matched no dispatch"
    assert not spec_applied(art.configs_dir, None, art.variant.tuning_specs).applied


def test_gemm_specs_leave_the_transposed_gemm_alone(cache):
    """The fast tiles made the transB gemm 4.4x slower: the spec's indexing maps must keep it off."""
    sig = parse_command(GEMM_T)
    base = compile_signature(sig, "cpu", BASELINE, cache=cache)
    art = compile_signature(sig, "cpu", _spec(FAST), cache=cache)
    assert not spec_applied(art.configs_dir, base.configs_dir, art.variant.tuning_specs).applied


def test_spec_without_marker_is_judged_against_the_baseline(cache, gemm_base, tmp_path):
    nomarker = tmp_path / "fast_nomarker.mlir"
    nomarker.write_text(FAST.read_text().replace(f'    transform.annotate %op "{SPEC_MARKER}" : !transform.any_op\n', ""))
    art = compile_signature(parse_command(GEMM), "cpu", _spec(nomarker), cache=cache)
    assert SPEC_MARKER not in "".join(p.read_text() for p in Path(art.configs_dir).glob("*.mlir"))
    check = spec_applied(art.configs_dir, gemm_base.configs_dir, [str(nomarker)])
    assert check.applied and "differs from the baseline" in check.detail
    assert spec_applied(art.configs_dir, None, [str(nomarker)]).applied  # its lowering_config shows up
    # and the same spec pointed at a kernel it does not match: identical to the baseline -> not applied
    nothing = tmp_path / "nothing_nomarker.mlir"
    nothing.write_text(NOTHING.read_text().replace(f'    transform.annotate %op "{SPEC_MARKER}" : !transform.any_op\n', ""))
    art2 = compile_signature(parse_command(GEMM), "cpu", _spec(nothing), cache=cache)
    assert spec_applied(art2.configs_dir, gemm_base.configs_dir, [str(nothing)]).detail == \
        "spec not applied: matched no dispatch"


def test_two_specs_in_one_variant(cache, gemm_base):
    v = Variant(name="two", tuning_specs=(str(NOTHING), str(SLOW)))
    preflight_variant(v)
    art = compile_signature(parse_command(GEMM), "cpu", v, cache=cache)
    check = spec_applied(art.configs_dir, gemm_base.configs_dir, v.tuning_specs)
    assert check.applied, check.detail
    assert "vector_common_parallel = [1, 16, 0]" in "".join(p.read_text() for p in Path(art.configs_dir).glob("*.mlir"))


def test_conv_spec_applies_to_the_nchw_conv_as_compiled(cache):
    """The conv spec targets the contraction im2col makes of the conv (the per-op default on a CPU without
    AVX-512, cpu_defaults.rules.rule_flags; asked for here, so on any CPU)."""
    sig = parse_command(CONV_NCHW)
    base = compile_signature(sig, "cpu", Variant(name="im2col", flags=(IM2COL,)), cache=cache)
    art = compile_signature(sig, "cpu", dataclasses.replace(_spec(CONV), flags=(IM2COL,)), cache=cache)
    check = spec_applied(art.configs_dir, base.configs_dir, art.variant.tuning_specs)
    assert check.applied, (check.detail, base.flags)


def test_spec_rejected_by_the_compiler_fails_with_one_clear_line(cache, tmp_path):
    """A spec that parses and verifies but whose configuration the CPU backend cannot build."""
    bad = tmp_path / "huge_vectors.mlir"
    bad.write_text(FAST.read_text()
                   .replace("vector_common_parallel = [8, 32, 0]", "vector_common_parallel = [64, 64, 0]")
                   .replace("vector_reduction = [0, 0, 1]", "vector_reduction = [0, 0, 512]")
                   .replace("distribution = [128, 128, 0]", "distribution = [64, 64, 0]"))
    v = _spec(bad)  # pre-flight cannot know: the problem only shows when the config meets the kernel
    with pytest.raises(CompileError) as e:
        compile_signature(parse_command(GEMM), "cpu", v, cache=cache)
    msg = str(e.value)
    assert "\n" not in msg and "gemm_float32_forward_256x512x512" in msg
    assert "large vector sizes" in msg


def test_gfx942_spec_cross_compiles_and_applies(cache):
    sig = parse_command(GEMM16)
    base = compile_signature(sig, "hip:gfx942", BASELINE, cache=cache)
    art = compile_signature(sig, "hip:gfx942", _spec(GFX942), cache=cache)
    assert Path(art.vmfb_path).stat().st_size > 0
    check = spec_applied(art.configs_dir, base.configs_dir, art.variant.tuning_specs)
    assert check.applied, check.detail
    text = "".join(p.read_text() for p in Path(art.configs_dir).glob("*.mlir"))
    assert "#iree_gpu.lowering_config" in text and "workgroup = [64, 64, 0]" in text
    assert "TileAndFuse" in text
