"""gpu_space: the TileAndFuse MMA configurations of a GPU kernel's root op, proven by compiling.

For an fp16 gemm and an fp16 conv, cross-compiled for gfx942 and sm_80 (and a gemm for gfx1100, the wave32 arch),
a few candidates drawn at random (seeded) from the space's VALID choices are compiled, and the dumped
configuration of each build must show the candidate applied: the tuner's marker and the candidate's own
workgroup tiles and intrinsic. On hip the candidate is a tuning spec; IREE 3.13's cuda backend ignores tuning
specs (its pipeline never receives --iree-codegen-tuning-spec-path), so on sm_80 it is the dispatch's dumped
configuration with the root op reconfigured, substituted as the executable's source. A choice that overflows
shared memory is refused, naming it, and IREE agrees (compiling it fails with its shared-memory error).

All compiles share one pool and one cache per module. BOO_GPU_SPACE_SAMPLES raises the number of candidates per
kernel (default 3); benchmarks/bench_gpu_space.py compiles larger samples (107 of 110 compiled and applied on
gfx942, gfx950, gfx1100 and sm_80; the 3 failures were iree-compile crashes, left to the search to prune).
"""
from __future__ import annotations

import dataclasses
import os
import random
import re
from pathlib import Path

import pytest

from boo_engine.commands import parse_command
from boo_engine.compile.cache import KernelCache
from boo_engine.compile.pool import CompilePool
from boo_engine.errors import CompileError
from boo_engine.tune.gpu_dispatch import configured_source
from boo_engine.tune.gpu_space import GpuSpace, gpu_space
from boo_engine.tune.space import Candidate, GlobalChoice
from boo_engine.variants import Variant
from boo_engine.variants.common import SPEC_MARKER
from boo_engine.variants.root_op import RootOp, read_root
from boo_engine.variants.tile_spec import SpecEntry, spec_module

GEMM = "gemmfp16 --a_w 256 --a_h 512 --b_w 512 -F 2"     # dA = dC @ B^T: a transposed operand
CONV = ("convfp16 -n 2 -c 64 -H 28 -W 28 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -F 1 "
        "--in_layout NHWC --out_layout NHWC --fil_layout NHWC")   # igemm with two K dims (taps, channels)
KERNELS = {("hip:gfx942", "gemm"): GEMM, ("hip:gfx942", "conv"): CONV,
           ("cuda:sm_80", "gemm"): GEMM, ("cuda:sm_80", "conv"): CONV, ("hip:gfx1100", "gemm"): GEMM}
SAMPLES = int(os.environ.get("BOO_GPU_SPACE_SAMPLES", "3"))
#: a gemm choice (on a 16x16x16 intrinsic) whose operand tiles, 128x256 and 256x128, need 128 KiB of shared memory
TOO_BIG = {"m": "4x2", "n": "4x2", "k_tiles": 16, "prefetch": 2}


def sample(space: GpuSpace, n: int, seed: int = 0) -> list[Candidate]:
    """`n` distinct valid candidates drawn at random over the space's choices (invalid draws skipped)."""
    rng = random.Random(seed)
    names = sorted(space.choices)
    out: dict[str, Candidate] = {}
    for _ in range(20000):
        if len(out) == n:
            break
        c = space.candidate("k", GlobalChoice("default"), {k: rng.choice(space.choices[k]) for k in names})
        if isinstance(c, Candidate):
            out.setdefault(c.key, c)
    return list(out.values())


def variant_for(target: str, root: RootOp, cand: Candidate, func_name: str, folder: Path) -> Variant:
    """A tuning spec on hip; on cuda (which ignores specs in IREE 3.13) the reconfigured dispatch as source."""
    assert cand.info is not None
    path = folder / f"{target.replace(':', '_')}_{func_name}_{cand.key}.mlir"
    if target.startswith("cuda"):
        path.write_text(configured_source(Path(root.source).read_text(), root, cand.info, SPEC_MARKER))
        return Variant(name=cand.key, substitutions=(("source", root.dispatch, str(path)),), kernels=(func_name,))
    path.write_text(spec_module([SpecEntry(f"match_{cand.key}", root, cand.info)]))
    return Variant(name=cand.key, tuning_specs=(str(path),))


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with CompilePool(workers=2, cache=KernelCache(tmp_path_factory.mktemp("kernels")), timeout_s=900) as p:
        yield p


@pytest.fixture(scope="module")
def roots(pool):
    """{(target, op): the baseline build's root op}."""
    futures = {k: pool.submit(parse_command(cmd), k[0]) for k, cmd in KERNELS.items()}
    return {k: read_root(f.result().configs_dir) for k, f in futures.items()}


@pytest.fixture(scope="module")
def compiled(pool, roots, tmp_path_factory):
    """{(target, op): [(candidate, its build's dumped configurations as text, or the CompileError)]}, the
    candidates of every kernel compiled together."""
    folder = tmp_path_factory.mktemp("candidates")
    futures = {}
    for (target, op), root in roots.items():
        space = gpu_space(root)
        assert space is not None, f"{target} {op}: no GPU space"
        sig = parse_command(KERNELS[target, op])
        futures[target, op] = [(c, pool.submit(sig, target, variant_for(target, root, c, sig.func_name, folder)))
                               for c in sample(space, SAMPLES if target != "hip:gfx1100" else 2)]
    out = {}
    for k, items in futures.items():
        out[k] = []
        for cand, fut in items:
            try:
                art = fut.result()
                text = "\n".join(p.read_text() for p in sorted(Path(art.configs_dir).glob("*.mlir")))
            except CompileError as e:
                text = e
            out[k].append((cand, text))
    return out


@pytest.mark.parametrize("key", list(KERNELS), ids=lambda k: f"{k[0]}-{k[1]}")
def test_the_space_holds_the_compilers_own_choice(roots, key):
    root = roots[key]
    space = gpu_space(root)
    assert space is not None
    params = space.baseline_params()
    assert params is not None, space.choices
    cand = space.candidate("k", GlobalChoice("default"), params)
    assert isinstance(cand, Candidate) and cand.info is not None
    # the same lowering_config and translation_info IREE chose, written back by the space
    assert f"lowering_config = {root.config}" in cand.info
    assert f"translation_info = {root.translation}>" in cand.info


@pytest.mark.parametrize("key", list(KERNELS), ids=lambda k: f"{k[0]}-{k[1]}")
def test_random_valid_candidates_compile_and_apply(compiled, key):
    results = compiled[key]
    assert results, "no valid candidate drawn"
    for cand, text in results:
        assert isinstance(text, str), f"{cand.describe()}: {text}"
        assert SPEC_MARKER in text, f"{cand.describe()}: the configuration did not apply"
        assert cand.tiles is not None
        wg = "workgroup = [" + ", ".join(str(t) for t in cand.tiles["workgroup"]) + "]"
        assert re.search(rf"{SPEC_MARKER}.*{re.escape(wg)}", text), f"{cand.describe()}: not its workgroup tiles"
        assert f"mma_layout<{cand.tiles['mma']}>" in text
        assert f"workgroup_size = [{cand.tiles['workgroup_size']}, 1, 1]" in text


def test_a_shared_memory_overflow_is_refused_and_iree_agrees(roots, pool, tmp_path):
    root = roots["hip:gfx942", "gemm"]
    space = gpu_space(root)
    assert space is not None
    params = {**space.baseline_params(), **TOO_BIG}
    why = space.candidate("k", GlobalChoice("default"), params)
    assert isinstance(why, str) and why.startswith("shared memory"), why
    assert "131072 bytes" in why and "65536" in why and "gfx942" in why
    # the same tiles with half the K step fit (64 KiB exactly)
    assert isinstance(space.candidate("k", GlobalChoice("default"), {**params, "k_tiles": 8}), Candidate)
    # sm_80 has 163 KiB: 192 KiB is refused there, 96 KiB (which gfx942 could not hold) fits
    nv = gpu_space(roots["cuda:sm_80", "gemm"])
    assert nv is not None
    nv_params = {**nv.baseline_params(), "k_tiles": 16}
    assert "196608 bytes" in str(nv.candidate("k", GlobalChoice("default"), {**nv_params, "m": "4x4", "n": "4x4"}))
    fits = nv.configuration({**nv_params, "m": "4x2", "n": "4x2"})
    assert not isinstance(fits, str), fits
    assert nv.shared_memory(fits.mma, list(fits.workgroup), list(fits.reduction))[0] == 98304
    # IREE's own check agrees with the refusal: the same choice forced through a spec fails to compile
    roomy = dataclasses.replace(space, target=dataclasses.replace(space.target, shared_memory_bytes=1 << 30))
    forced = roomy.candidate("k", GlobalChoice("default"), params)
    assert isinstance(forced, Candidate)
    sig = parse_command(GEMM)
    with pytest.raises(CompileError, match="shared memory"):
        pool.submit(sig, "hip:gfx942", variant_for("hip:gfx942", root, forced, sig.func_name, tmp_path)).result()


def test_broken_choices_are_refused_with_the_reason(roots):
    space = gpu_space(roots["hip:gfx942", "gemm"])
    assert space is not None
    base = space.baseline_params()
    choice = GlobalChoice("default")
    # the M tile (4 subgroups x 8 tiles x 16) is 512: larger than M = 256
    assert "does not divide M" in str(space.candidate("k", choice, {**base, "m": "4x8"}))
    # 4 x 4 subgroups of 64 threads on the 16x16x16 intrinsic: 1024 threads fit, 4 x 4 x 2 (outer) would not
    assert isinstance(space.candidate("k", choice, {**base, "m": "4x1", "n": "4x1"}), Candidate)
    assert "not compute" in str(space.candidate("k", choice, {**base, "mma": "MFMA_F32_16x16x4_F32"}))
    conv = gpu_space(roots["hip:gfx942", "conv"])
    assert conv is not None
    cbase = conv.baseline_params()
    # output rows (d2) 4 spread over 4 subgroups, with 4 x 2 more along M and N: 32 subgroups of 64 threads
    assert "workgroup size 2048" in str(conv.candidate("k", choice, {**cbase, "m": "4x1", "n": "2x1", "tile_d2": "4/4"}))
    # one subgroup computing 4 (M) x 2 (N) x 4 (rows) intrinsic tiles
    assert "subgroup tile" in str(conv.candidate("k", choice, {**cbase, "m": "1x4", "n": "1x2", "tile_d2": "4/1"}))


def test_no_space_without_an_intrinsic_for_the_types(pool):
    """An f32 matmul on sm_80 has no MMA intrinsic (IREE configures it without one): no MMA space."""
    root = read_root(pool.submit(parse_command("gemm --a_w 64 --a_h 64 --b_w 64"), "cuda:sm_80").result().configs_dir)
    assert root is not None and root.gpu_target
    assert gpu_space(root) is None
