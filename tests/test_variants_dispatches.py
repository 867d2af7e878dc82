"""Edited dispatches end to end, with real compiles and real runs: dump a small gemm's dispatch, edit its source so
the result changes detectably, measure the folder as a variant, and see the changed result; the same with a
configuration edit (a valid one still computes the right result, an impossible one proves it was used)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from boo_engine.commands import parse_command
from boo_engine.compile.cache import KernelCache
from boo_engine.compile.dump import dump_dispatches
from boo_engine.compile.pool import compile_signature
from boo_engine.errors import CompileError, VariantError
from boo_engine.runtime.launchable import get_launchable
from boo_engine.variants import DUMP_MANIFEST, parse_variant_arg, preflight_variant

GEMM = "gemm --a_w 64 --a_h 256 --b_w 64 -F 1"  # M=64, K=256, N=64: one dispatch, compiles in well under a second
EXE = "main$async_dispatch_0"

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> KernelCache:
    return KernelCache(tmp_path_factory.mktemp("dispatch-cache"))


@pytest.fixture(scope="module")
def sig():
    return parse_command(GEMM)


@pytest.fixture()
def dumped(sig, tmp_path) -> Path:
    files = dump_dispatches(sig, "cpu", tmp_path / "dump")
    folder = tmp_path / "dump" / sig.func_name
    assert sorted(f.name for f in files) == [f"configured_module_{EXE}.mlir", f"module_{EXE}.mlir"]
    assert all(f.parent == folder for f in files)
    return folder


def test_dump_writes_sources_configurations_and_a_manifest(sig, dumped):
    manifest = json.loads((dumped / DUMP_MANIFEST).read_text())
    assert manifest["func_name"] == sig.func_name and manifest["target"] == "cpu"
    assert manifest["files"][f"module_{EXE}.mlir"]["kind"] == "source"
    assert manifest["files"][f"configured_module_{EXE}.mlir"]["kind"] == "configuration"
    assert all(f["executable"] == EXE for f in manifest["files"].values())
    assert "lowering_config" in (dumped / f"configured_module_{EXE}.mlir").read_text()
    with pytest.raises(VariantError) as e:  # nothing edited yet: nothing to measure
        parse_variant_arg(f"edited={dumped}/")
    assert "no file differs" in str(e.value)


def test_edited_source_changes_the_result(sig, dumped, cache):
    src = dumped / f"module_{EXE}.mlir"
    text = src.read_text()
    zero = "arith.constant 0.000000e+00 : f32"
    assert text.count(zero) == 1  # the accumulator's initial value
    src.write_text(text.replace(zero, "arith.constant 1.000000e+00 : f32"))

    v = parse_variant_arg(f"plus_one={dumped}/")
    assert v.substitutions == (("source", EXE, str(src)),)  # only the edited file: the configuration is unchanged
    assert v.kernels == (sig.func_name,) and not v.applies_to("gemm_float32_forward_8x8x8")
    preflight_variant(v)

    args = sig.get_sample_args(0)
    expected = sig.reference(*args)
    base = get_launchable(sig, "cpu", cache=cache)(*args)
    edited = get_launchable(sig, "cpu", v, cache=cache)(*args)
    torch.testing.assert_close(base, expected, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(edited, expected + 1.0, rtol=1e-4, atol=1e-3)


def test_edited_configuration_is_used(sig, dumped, cache):
    cfg = dumped / f"configured_module_{EXE}.mlir"
    text = cfg.read_text()
    start = text.index("linalg.matmul")
    old = text[text.index("lowering_config = ", start):text.index(">", text.index("lowering_config = ", start)) + 1]

    # a valid different configuration: compiles and gives the right answer (comparing binaries proves nothing:
    # substituting even an UNCHANGED configuration changes the vmfb's bytes)
    cfg.write_text(text.replace(old, "lowering_config = #iree_cpu.lowering_config<distribution = [32, 32, 0], "
                                     "vector_common_parallel = [4, 16, 0], vector_reduction = [0, 0, 1]>"))
    v = parse_variant_arg(f"retiled={dumped}/")
    assert v.substitutions == (("configuration", EXE, str(cfg)),)
    args = sig.get_sample_args(0)
    out = get_launchable(sig, "cpu", v, cache=cache)(*args)
    torch.testing.assert_close(out, sig.reference(*args), rtol=1e-4, atol=1e-3)

    # proof that the substituted configuration (not the compiler's own) is what gets built: an impossible one fails
    cfg.write_text(text.replace(old, "lowering_config = #iree_cpu.lowering_config<distribution = [64, 64, 0], "
                                     "vector_common_parallel = [64, 64, 0], vector_reduction = [0, 0, 256]>"))
    with pytest.raises(CompileError) as e:
        compile_signature(sig, "cpu", parse_variant_arg(f"impossible={dumped}/"), cache=cache)
    assert "large vector sizes" in str(e.value)


def test_dump_refuses_to_overwrite_edits(sig, dumped):
    dump_dispatches(sig, "cpu", dumped.parent)  # unchanged folder: re-dumping is fine
    src = dumped / f"module_{EXE}.mlir"
    src.write_text(src.read_text() + "// my edit\n")
    with pytest.raises(VariantError) as e:
        dump_dispatches(sig, "cpu", dumped.parent)
    assert "was edited" in str(e.value) and src.name in str(e.value)
    assert src.read_text().endswith("// my edit\n")


def test_a_dump_job_of_the_pool_refuses_to_overwrite_edits_as_a_variant_error(sig, dumped, tmp_path):
    """The pool's dump job reports a folder holding edits as the user's problem (VariantError), like the plain
    function, and leaves the edit alone."""
    from boo_engine.compile.pool import CompilePool

    src = dumped / f"module_{EXE}.mlir"
    src.write_text(src.read_text() + "// my edit\n")
    with CompilePool(workers=1, cache=KernelCache(tmp_path / "cache")) as pool:
        with pytest.raises(VariantError) as e:
            pool.submit_dump(sig, "cpu", dumped.parent).result(timeout=300)
    assert "was edited" in str(e.value) and src.name in str(e.value)
    assert src.read_text().endswith("// my edit\n")


def test_both_source_and_configuration_edited_is_refused(dumped):
    for name in (f"module_{EXE}.mlir", f"configured_module_{EXE}.mlir"):
        p = dumped / name
        p.write_text(p.read_text() + "// edited\n")
    with pytest.raises(VariantError) as e:
        parse_variant_arg(f"both={dumped}/")
    assert "both source and configuration" in str(e.value)
