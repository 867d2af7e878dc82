"""Aligned workgroup tiles (the best column on the CPU): the rule, and real compiles that take it, show it, and fall
back to IREE's own configuration when IREE refuses it."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from best_support import boo_beside_best

from boo_engine.commands import parse_command
from boo_engine.compile import aligned as aligned_mod
from boo_engine.compile.build import ALIGNED_BUILD, compile_signature
from boo_engine.compile.cache import KernelCache
from boo_engine.cpu_defaults.rules import rule_aligned_distribution
from boo_engine.targets import parse_target
from boo_engine.variants.best import best_variant
from boo_engine.variants.common import SPEC_MARKER
from boo_engine.variants.root_op import read_root

CPU = parse_target("cpu")
#: a data gradient whose root matmul IREE 3.13 gives workgroup tiles of 56 of 784 output positions (vector tile 16)
DATA_GRAD = "conv -n 1 -c 16 -H 28 -W 28 -k 16 -y 3 -x 3 -p 1 -q 1 -F 2"


@pytest.mark.parametrize("bounds, parallel, dist, vec, expected", [
    ((2, 32, 784, 288), (0, 1, 2), (1, 32, 56, 0), (1, 8, 16, 0), (1, 32, 112, 0)),   # 112 divides 784
    ((8, 16, 196, 144), (0, 1, 2), (1, 16, 49, 0), (1, 8, 16, 0), (1, 16, 64, 0)),    # none divides 196: rounded up
    ((2, 64, 784, 576), (0, 1, 2), (1, 64, 112, 0), (1, 8, 16, 0), None),             # whole vector tiles already
    ((2, 64, 784, 576), (0, 1, 2), (1, 12, 784, 0), (1, 8, 16, 0), (1, 64, 784, 0)),  # M too: 64 divides 64
    ((2, 64, 40, 576), (0, 1, 2), (1, 64, 40, 0), (1, 8, 16, 0), None),               # the whole dimension
    ((2, 64, 784, 576), (0, 1, 2), (1, 64, 0, 0), (1, 8, 16, 0), None),               # not distributed
    ((64, 56), (0, 1), (64, 7), (1, 1), None),                                         # no vector tile
    ((4096, 4096, 64), (0, 1), (40, 40, 0), (8, 16, 0), (40, 128, 0)),               # at most 8 vector tiles
])
def test_the_rule_makes_workgroup_tiles_whole_vector_tiles(bounds, parallel, dist, vec, expected):
    assert rule_aligned_distribution(bounds, parallel, dist, vec) == expected


def _root_distribution(configs: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    root = read_root(configs)
    assert root is not None
    return root.bounds, root.tiles["distribution"], root.tiles["vector_common_parallel"]


def test_the_best_column_compiles_the_root_op_with_aligned_tiles(tmp_path):
    """A real compile: without the rule IREE leaves a remainder in every workgroup (the test's premise, checked);
    with it the root op has whole vector tiles, marked as set by the spec, the spec is kept in the entry (which
    compile_command.sh names) and the build says so."""
    cache = KernelCache(tmp_path / "cache")
    sig = parse_command(DATA_GRAD)
    best = best_variant(sig, CPU)
    assert best.aligned_tiles
    plain = compile_signature(sig, CPU, dataclasses.replace(best, aligned_tiles=False), cache=cache)
    bounds, dist, vec = _root_distribution(plain.configs_dir)
    assert dist[2] % vec[2] != 0, "premise: IREE's own tiles leave a remainder"
    assert ALIGNED_BUILD not in plain.meta["build"]
    art = compile_signature(sig, CPU, best, cache=cache)
    assert art.dir != plain.dir
    bounds, dist, vec = _root_distribution(art.configs_dir)
    assert dist[2] % vec[2] == 0 and bounds[2] % dist[2] == 0
    assert any(SPEC_MARKER in p.read_text() for p in Path(art.configs_dir).glob("*.mlir"))
    meta = json.loads((Path(art.dir) / "meta.json").read_text())
    assert art.meta["build"].endswith(ALIGNED_BUILD) and "->" in meta["aligned_tiles"]
    spec = Path(art.dir) / aligned_mod.ALIGNED_SPEC
    assert spec.is_file() and f"--iree-codegen-tuning-spec-path={spec}" in meta["command"]
    assert not list(Path(art.dir).glob("first-pass*"))
    again = compile_signature(sig, CPU, best, cache=cache)   # the cache finds it: no first pass, no compile
    assert again.cache_hit and again.dir == art.dir


def test_a_spec_iree_refuses_falls_back_to_iree_own_tiles(tmp_path, monkeypatch):
    """If IREE will not compile the aligned tiles, the kernel is built as IREE configures it, and says so by not
    saying 'aligned tiles'."""
    real = aligned_mod.aligned_tiles

    def broken(root):
        found = real(root)
        return None if found is None else dataclasses.replace(found, spec="module { this is not a spec }\n")

    monkeypatch.setattr(aligned_mod, "aligned_tiles", broken)
    sig = parse_command(DATA_GRAD)
    art = compile_signature(sig, CPU, best_variant(sig, CPU), cache=KernelCache(tmp_path / "cache"))
    meta = json.loads((Path(art.dir) / "meta.json").read_text())
    assert meta["aligned_tiles"] == "" and ALIGNED_BUILD not in art.meta["build"]
    assert not (Path(art.dir) / aligned_mod.ALIGNED_SPEC).exists()
    assert "--iree-codegen-tuning-spec-path" not in " ".join(meta["command"])


def test_kernels_with_aligned_tiles_run_and_pass_numerics(tmp_path):
    """BOO's build beside the best column: a data gradient, a grouped conv and a strided conv with a bias, whose
    root ops all get aligned tiles here, run and pass the numerics check against torch."""
    jobs = boo_beside_best(tmp_path, DATA_GRAD, "conv -n 2 -c 32 -H 14 -W 14 -k 32 -y 3 -x 3 -p 1 -q 1 -g 4",
                           "conv -n 1 -c 8 -H 56 -W 56 -k 16 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -b 1")
    best = [r for r in jobs if r.variant == "best"]
    assert all(r.compile.build.endswith(ALIGNED_BUILD) for r in best), [r.compile.build for r in best]
