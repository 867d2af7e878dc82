"""A GPU target on a machine without that GPU, and a target iree-compile cannot build: one line, up front, before
anything is exported or compiled; --compile-only fills the cache for a machine that has the GPU."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from boo_engine.targets import parse_target

GEMM = "gemm -m 16 -n 16 -k 16 --iter 20"


def _cli(*args, env, timeout=300):
    return subprocess.run([sys.executable, "-m", "boo_tui", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_a_target_iree_cannot_build_is_one_line_before_any_compile(tmp_path, cli_env):
    """hip:gfx9999 failed each job after ~10 s of export and compile."""
    p = _cli(GEMM, "--target", "hip:gfx9999", "--headless", "--db", str(tmp_path / "r.db"), env=cli_env)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [
        "boo-tui: error: --target hip:gfx9999: iree-compile cannot build for it: Unknown ROCM target 'gfx9999'"]
    assert not (tmp_path / "r.db").exists()


def test_a_gpu_target_without_its_gpu_says_so_and_compile_only_fills_the_cache(tmp_path, cli_env):
    """hip:gfx942 here failed both jobs with `AssertionError: Torch not compiled with CUDA enabled`."""
    if parse_target("hip:gfx942").can_run():
        pytest.skip("this machine has a gfx942")
    p = _cli(GEMM, "--target", "hip:gfx942", "--headless", "--db", str(tmp_path / "r.db"), env=cli_env)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "no HIP GPU to measure it on" in lines[0] and "--compile-only" in lines[0], lines
    assert not (tmp_path / "r.db").exists()

    cache = tmp_path / "cache"
    first = _cli(GEMM, "--target", "hip:gfx942", "--compile-only", "--cache-dir", str(cache), env=cli_env)
    assert first.returncode == 0, first.stderr
    # (its kernels: the baseline's and the best column's, which on a GPU target may be one and the same)
    assert re.search(r": [12] compiled, [01] already cached, 0 failed", first.stderr), first.stderr
    assert list(cache.rglob("kernel.vmfb")) and not (tmp_path / "r.db").exists()
    again = _cli(GEMM, "--target", "hip:gfx942", "--compile-only", "--cache-dir", str(cache), env=cli_env)
    assert again.returncode == 0 and re.search(r": 0 compiled, [12] already cached, 0 failed", again.stderr), \
        again.stderr


def test_boo_driver_says_it_up_front_too(cli_env):
    if parse_target("hip:gfx942").can_run():
        pytest.skip("this machine has a gfx942")
    for target, needle in (("hip:gfx942", "add --preload to compile"), ("hip:gfx9999", "Unknown ROCM target")):
        p = subprocess.run([sys.executable, "-m", "boo_engine.cli.driver", "gemm", "-m", "16", "-n", "16", "-k", "16",
                            "--target", target], env=cli_env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 2 and needle in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
