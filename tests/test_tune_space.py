"""The tuner's search space, compiled for real: for each op class, every global choice and a seeded sample of tile
configurations either compiles (and then its spec really configured the op: the marker is in the dumped
configuration) or is pruned with the compiler's own reason. Also the pieces that need no compiler: the root op
read from a dump, the dimension groups a matcher pins, and the spec text."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from boo_engine.commands import parse_command
from boo_engine.compile.pool import CompilePool
from boo_engine.cpu_defaults.machine import host_cpu
from boo_engine.errors import BooError
from boo_engine.targets import parse_target
from boo_engine.tune.space import Candidate, GlobalChoice, global_choices, tile_space
from boo_engine.variants import Variant
from boo_engine.variants.common import SPEC_MARKER
from boo_engine.variants.root_op import parse_dispatch, read_root
from boo_engine.variants.tile_spec import SpecEntry, spec_module, symbol

#: one small kernel per op class the tuner treats differently
CLASSES = {
    "gemm": "gemm --a_w 32 --a_h 64 --b_w 48 -F 1",
    "gemm_transB": "gemm --a_w 32 --a_h 64 --b_w 48 --transB 1 -F 1",
    "conv_nchw_3x3": "conv -n 2 -c 8 -H 10 -W 10 -k 16 -y 3 -x 3 -p 1 -q 1 -F 1",
    "conv_nhwc_1x1": "conv -n 2 -c 16 -H 6 -W 6 -k 24 -y 1 -x 1 --in_layout NHWC --out_layout NHWC --fil_layout NHWC -F 1",
    "conv_grouped": "conv -n 2 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -p 1 -q 1 -g 2 -F 1",
    "conv_bwd_data": "conv -n 2 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2",
    "conv_bwd_weight": "conv -n 2 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -p 1 -q 1 -F 4",
    "layernorm": "layernorm --input 4x16x64 --eps 1e-5 --mode 1 --normalized_dim 2 -F 1",
}
TILE_SAMPLES = 2
#: global choices compiled per class (the first ones: every kind of flag appears among them)
GLOBAL_SAMPLES = 3


@pytest.fixture(scope="module")
def compiled_space(tmp_path_factory):
    """Every class's baseline, global choices and sampled tile candidates, compiled once through the pool:
    {class: (baseline artifact, [(candidate, future)])}."""
    from boo_engine.compile.cache import KernelCache

    cache = KernelCache(tmp_path_factory.mktemp("kernels"))
    specs = tmp_path_factory.mktemp("specs")
    target = parse_target("cpu")
    out = {}
    with CompilePool(cache=cache) as pool:
        bases = {name: (parse_command(cmd), pool.submit(parse_command(cmd), target)) for name, cmd in CLASSES.items()}
        for name, (sig, fut) in bases.items():
            base = fut.result()
            root = read_root(base.configs_dir)
            cands = [Candidate(sig.func_name, ch) for ch in global_choices(sig, target)][:GLOBAL_SAMPLES]
            if root is not None:
                space = tile_space(root)
                rng = random.Random(0)
                for _ in range(TILE_SAMPLES):
                    params = {n: rng.choice(v) for n, v in space.choices.items()}
                    c = space.candidate(sig.func_name, GlobalChoice("default"), params)
                    assert not isinstance(c, str)
                    cands.append(c)
            futs = []
            for c in cands:
                spec_paths: tuple[str, ...] = ()
                if c.info is not None and c.root is not None:
                    p = Path(specs) / f"{c.key}.mlir"
                    p.write_text(spec_module([SpecEntry(symbol(f"m_{c.key}"), c.root, c.info)]))
                    spec_paths = (str(p),)
                v = Variant(name=f"t-{c.key}", tuning_specs=spec_paths, flags=c.choice.flags)
                futs.append((c, pool.submit(sig, target, v)))
            out[name] = (base, root, [(c, _outcome(f)) for c, f in futs])
    return out


def _outcome(fut):
    try:
        return fut.result()
    except BooError as e:
        return e


@pytest.mark.parametrize("name", list(CLASSES))
def test_every_candidate_compiles_and_applies_or_is_pruned_with_the_compilers_reason(compiled_space, name):
    base, root, outcomes = compiled_space[name]
    assert outcomes, f"{name}: no candidate at all"
    compiled = 0
    for cand, res in outcomes:
        if isinstance(res, BooError):
            line = str(res)
            assert "iree-compile" in line or "error" in line.lower(), line
            assert len(line.splitlines()) == 1 and len(line) > 20, line
            continue
        compiled += 1
        if cand.info is not None:
            dumped = "".join(p.read_text() for p in Path(res.configs_dir).glob("*.mlir"))
            assert SPEC_MARKER in dumped, f"{name}: spec of {cand.describe()} compiled but configured nothing"
    assert compiled >= 1, f"{name}: nothing of the space compiled"


def test_root_ops_of_the_classes(compiled_space):
    kinds = {name: (root.kind if root else None) for name, (_, root, _) in compiled_space.items()}
    assert kinds["gemm"] == "contraction" and kinds["gemm_transB"] == "contraction"
    # im2col (our default for an f32 NCHW 3x3 conv without AVX-512) makes it a matmul; with AVX-512, IREE's conv
    assert kinds["conv_nchw_3x3"] == ("convolution" if host_cpu().has("avx512f") else "contraction")
    assert kinds["conv_bwd_data"] == "convolution"
    assert kinds["conv_bwd_weight"] == "convolution"
    assert kinds["layernorm"] is None                       # nothing for a spec: flags only
    g = compiled_space["conv_grouped"][1]
    assert g is not None and g.dim_groups()["depth"], "the group dim of a grouped conv is a depth dim"


def test_global_choices_are_explicit_and_skip_the_baseline():
    target = parse_target("cpu")
    sig = parse_command(CLASSES["conv_nchw_3x3"])   # the baseline: im2col or not (per-op default), no data-tiling
    names = [c.name for c in global_choices(sig, target)]
    baseline = "direct" if host_cpu().has("avx512f") else "im2col"
    assert baseline not in names and {"direct", "im2col"} - {baseline} <= set(names) and "im2col+dt" in names
    for c in global_choices(sig, target):
        assert all("=" in f for f in c.flags), c   # on/off written out: independent of the defaults
    assert [c.name for c in global_choices(parse_command(CLASSES["gemm"]), target)] == ["dt", "dt+uk"]


MATMUL_DUMP = """
func.func @main$async_dispatch_0_matmul() attributes {translation_info = #iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<DoubleTilingExpert>>} {
  %7 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%3, %4 : tensor<64x576xf32>, tensor<2x576x784xf32>) outs(%6 : tensor<2x64x784xf32>) attrs =  {lowering_config = #iree_cpu.lowering_config<distribution = [2, 64, 56, 0], vector_common_parallel = [1, 8, 8, 0], vector_reduction = [0, 0, 0, 8]>} {
"""


def test_parse_dispatch_reads_the_root_and_groups_its_dims():
    (op,) = parse_dispatch(MATMUL_DUMP, dispatch="d0")
    assert op.kind == "contraction" and op.bounds == (2, 64, 784, 576)
    assert op.dim_groups() == {"batch": [], "m": [1], "n": [0, 2], "k": [3]}
    assert op.tiles["distribution"] == (2, 64, 56, 0) and op.pipeline == "DoubleTilingExpert"
    space = tile_space(op)
    assert space.inner == 2 and space.outer == 1 and space.red == 3 and space.lanes == 8  # default 32-byte vectors
    text = spec_module([SpecEntry("m0", op, "#iree_codegen.compilation_info<x>")])
    assert "transform.iree.match.dims_equal %n, [2, 784]" in text and SPEC_MARKER in text
