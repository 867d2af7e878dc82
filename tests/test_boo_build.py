"""The `boo` build reproduces iree-turbine's BOO kernel: the MLIR our cache compiles is the text turbine's own code
path emits for the same command (run in a separate process that imports only turbine, its parser and its export,
as iree-boo-driver's IREE launchable does), and the flags are the ones turbine's launch code gives a CPU device.
Where BOO has no such kernel the build is our export with BOO's flags, and says why; where turbine is missing,
too. Real exports, real compiles, real kernels."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from boo_engine.commands import parse_command
from boo_engine.compile.build import compile_signature, kernel_key_material
from boo_engine.compile.cache import KernelCache
from boo_engine.compile.flags import RUN_FLAGS
from boo_engine.compile.turbine import turbine_version
from boo_engine.targets import Target
from boo_engine.variants import BASELINE, Variant

pytestmark = pytest.mark.skipif(turbine_version() is None, reason="iree-turbine is not installed")

BOO = Target("cpu", build="boo")
ROOT = Path(__file__).resolve().parents[1]

#: (our command, the same kernel in turbine's own grammar). Turbine's layer-norm parser reads `--mode 0` as
#: "elementwise affine" (weight and bias), where MIOpen's grammar (ours) has weight and bias in `--mode 1`.
CASES = [
    ("conv -n 2 -c 8 -H 10 -W 10 -k 8 -y 3 -x 3 -p 1 -q 1", "conv -n 2 -c 8 -H 10 -W 10 -k 8 -y 3 -x 3 -p 1 -q 1"),
    ("gemm --a_w 32 --a_h 48 --b_w 16 --transB 1", "gemm --a_w 32 --a_h 48 --b_w 16 --transB 1"),
    ("layernorm --input 4x8x32 --normalized_dim 2 --mode 1", "layernorm --input 4x8x32 --normalized_dim 2 --mode 0"),
]

#: turbine's own path, in a process of its own: its parser, the launchable's export recipe
#: (kernel/boo/driver/launch.py get_launchable -> runtime get_module_asm), its flags for a CPU device
#: (runtime/device.py DEVICE_TARGET_COMPILE_FLAGS, then launch.py default_compiler_flags_callback). The MLIR
#: binding shim is applied first: turbine 3.9 does not run on IREE 3.13's bindings without it.
TURBINE_SIDE = textwrap.dedent("""
    import json, shlex, sys, types
    from boo_engine.compile.turbine import shim_mlir_bindings
    shim_mlir_bindings()
    from iree.turbine.kernel.boo.op_exports.registry import BooOpRegistry
    from iree.turbine.kernel.boo.runtime import get_module_asm
    from iree.turbine.kernel.boo.runtime.launch import default_compiler_flags_callback
    from iree.turbine.runtime.device import DEVICE_TARGET_COMPILE_FLAGS
    out = {}
    for command in json.loads(sys.argv[1]):
        sig = BooOpRegistry.parse_command(shlex.split(command))
        mlir = get_module_asm(lambda: sig.get_nn_module(use_custom=True),
                              lambda: sig.get_sample_args(splat_value=0), "main",
                              force_single_dispatch=sig.force_single_dispatch)
        out[command] = mlir
    device = types.SimpleNamespace(driver_id="local-sync")
    out["flags"] = list(DEVICE_TARGET_COMPILE_FLAGS["local-sync"]) + default_compiler_flags_callback(device, None)
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def turbine_side() -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", TURBINE_SIDE, json.dumps([t for _, t in CASES])], capture_output=True,
                       text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def boo_cache(tmp_path_factory) -> KernelCache:
    return KernelCache(tmp_path_factory.mktemp("boo-kernels"))


def _chosen(command: list[str]) -> list[str]:
    """The compile command's flags without the machinery (source, output, the configurations dump, RUN_FLAGS)."""
    out, args = [], iter(command[1:])
    for a in args:
        if a == "-o":
            next(args, None)
        elif a.startswith("-") and not a.startswith("--iree-hal-dump-executable-configurations-to=") \
                and a not in RUN_FLAGS:
            out.append(a)
    return out


@pytest.mark.parametrize("ours,theirs", CASES, ids=["conv", "gemm", "layernorm"])
def test_boo_build_is_turbines_kernel(ours, theirs, turbine_side, boo_cache):
    art = compile_signature(parse_command(ours), BOO, cache=boo_cache)
    assert Path(art.mlir_path).read_text() == turbine_side[theirs]       # the same MLIR, byte for byte
    assert _chosen(art.command) == turbine_side["flags"]                 # BOO's flags, in BOO's order
    assert art.build == f"boo: iree-turbine {turbine_version()}"
    assert art.to_compile_info().build == art.build


def test_boo_backward_conv_takes_our_arguments(boo_cache):
    """BOO's data-gradient kernel takes (dLdy, x, w) as ours does and reads dLdy and w only (x is never imported):
    called as ours is, its numerics are right."""
    import torch

    from boo_engine.runtime.launchable import get_launchable

    sig = parse_command("conv -n 2 -c 4 -H 6 -W 6 -k 4 -y 3 -x 3 -p 1 -q 1 -F 2")
    art = compile_signature(sig, BOO, cache=boo_cache)
    text = Path(art.mlir_path).read_text()
    assert "=> %arg0 :" in text and "=> %arg2 :" in text and "=> %arg1 :" not in text
    args = sig.get_sample_args(seed=3)
    got = get_launchable(sig, BOO, cache=boo_cache)(*args)
    want = sig.reference(*(a.double() for a in args))
    assert torch.allclose(got.double(), want, atol=1e-4)


def test_op_boo_lacks_is_our_export_with_boos_flags(boo_cache):
    sig = parse_command("bnorm -n 2 -c 4 -H 4 -W 4 -m 1 -F 2")
    art = compile_signature(sig, BOO, cache=boo_cache)
    assert art.build == "boo: our export (bnorm is not an op BOO has)"
    assert _chosen(art.command) == BOO.boo_flags()
    assert "torch.aten" in Path(art.mlir_path).read_text() or "torch.vtensor" in Path(art.mlir_path).read_text()


def test_boo_and_our_builds_are_distinct_kernels(boo_cache):
    sig = parse_command(CASES[1][0])
    boo = compile_signature(sig, BOO, cache=boo_cache)
    ours = compile_signature(sig, Target("cpu"), cache=boo_cache)
    assert boo.key != ours.key and ours.build == "ours"
    assert "--iree-llvmcpu-target-cpu=host" in ours.command and "--iree-opt-level=O1" not in ours.command
    # a variant based on ours in a boo run builds what the ours build does
    assert compile_signature(sig, BOO, Variant(name="o", base="ours"), cache=boo_cache).key == ours.key
    assert kernel_key_material(sig, BOO, BASELINE) != kernel_key_material(sig, Target("cpu"), BASELINE)


def test_without_turbine_the_boo_build_is_our_export(tmp_path):
    """iree-turbine missing (no private install where $BOO_TURBINE_DIR points, and its module hidden from the
    import system in a fresh process): the boo build still compiles, from our export with BOO's flags, and says
    why; its cache key is not the turbine build's."""
    code = textwrap.dedent(f"""
        import sys
        sys.modules["iree.turbine"] = None
        from boo_engine.commands import parse_command
        from boo_engine.compile.build import compile_signature
        from boo_engine.compile.cache import KernelCache
        from boo_engine.targets import Target
        art = compile_signature(parse_command({CASES[1][0]!r}), Target("cpu", build="boo"),
                                cache=KernelCache({str(tmp_path)!r}))
        print(art.build)
        print(art.key)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "BOO_TURBINE_DIR": str(tmp_path / "no-turbine")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    build, key = r.stdout.strip().splitlines()[-2:]
    assert build == "boo: our export (iree-turbine is not installed)"
    with_turbine = compile_signature(parse_command(CASES[1][0]), BOO, cache=KernelCache(tmp_path))
    assert with_turbine.key != key and with_turbine.build.startswith("boo: iree-turbine")
