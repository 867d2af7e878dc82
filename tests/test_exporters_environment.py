"""collect_environment: the facts recorded next to every run. Real probes of this machine, plus stand-in GPU
tools on PATH (scripts printing what nvidia-smi prints) for the GPU paths this CPU-only machine cannot take."""
from __future__ import annotations

import json
import os
import stat
import time

import pytest

from boo_engine import __version__, environment
from boo_engine.environment import collect_environment


@pytest.fixture(autouse=True)
def fresh_caches():
    for fn in (environment._iree_compile_version, environment._gpu_info):
        fn.cache_clear()
    yield
    for fn in (environment._iree_compile_version, environment._gpu_info):
        fn.cache_clear()


def test_this_machine():
    env = collect_environment("cpu")
    json.dumps(env)   # JSON-able
    assert env["target"] == "cpu" and env["host"] and env["python"].count(".") == 2
    assert env["cores_logical"] >= 1 and env["memory_gb"] > 0 and env["cpu"]
    assert "3.13" in env["iree_compile_version"] and "version" in env["iree_compile_version"]
    assert env["iree_runtime_version"].startswith("3.13")
    assert env["torch_version"] and env["tool_version"] == __version__
    # external tools are probed once per process: a second call runs none of them
    calls = []
    real_run = environment._run
    environment._run = lambda cmd: calls.append(cmd) or real_run(cmd)
    try:
        assert collect_environment("cpu") == env
    finally:
        environment._run = real_run
    assert calls == []


def test_torch_threads_when_torch_is_loaded():
    import torch

    assert collect_environment("cpu")["torch_threads"] == torch.get_num_threads()


def _tool(dir_, name: str, body: str) -> None:
    p = dir_ / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(p.stat().st_mode | stat.S_IEXEC)


def test_no_tools_on_path_never_raises(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    env = collect_environment("hip:gfx942")
    assert env["gpu"] is None and env["host"]
    # the compiler is the installed wheel's, which is not looked up on PATH
    assert "3.13" in env["iree_compile_version"]


def test_compiler_version_is_the_wheels_not_an_iree_compile_on_path(monkeypatch, tmp_path):
    """The version recorded next to a run is the one of the compiler that built the kernels (the wheel's, which
    the kernel cache keys on), not of whatever iree-compile comes first on PATH."""
    _tool(tmp_path, "iree-compile", 'echo "IREE compiler version 0.0.1-some-other-build"')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    from boo_engine.compile.cache import KernelCache

    env = collect_environment("cpu")
    assert "0.0.1" not in env["iree_compile_version"] and "3.13" in env["iree_compile_version"]
    assert env["iree_compile_version"] == KernelCache(tmp_path / "cache").compiler_version


def test_nvidia_gpu(monkeypatch, tmp_path):
    _tool(tmp_path, "nvidia-smi", 'echo "NVIDIA H100 80GB HBM3, 550.54.15, 9.0"\necho "NVIDIA H100 80GB HBM3, 550.54.15, 9.0"')
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + os.environ["PATH"])
    env = collect_environment("cuda:sm_90")
    assert (env["gpu"], env["driver"], env["gpu_arch"], env["gpu_count"]) == ("NVIDIA H100 80GB HBM3", "550.54.15",
                                                                             "sm_90", 2)


def test_amd_gpu(monkeypatch, tmp_path):
    _tool(tmp_path, "rocminfo", """cat <<'EOF'
*******
Agent 1
*******
  Name:                    AMD EPYC 9534
  Marketing Name:          AMD EPYC 9534
  Device Type:             CPU
*******
Agent 2
*******
  Name:                    gfx942
  Marketing Name:          AMD Instinct MI300X
  Device Type:             GPU
EOF""")
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + os.environ["PATH"])
    env = collect_environment("hip:gfx942")
    assert (env["gpu"], env["gpu_arch"], env["gpu_count"]) == ("AMD Instinct MI300X", "gfx942", 1)


def test_hanging_tool_times_out(monkeypatch, tmp_path):
    _tool(tmp_path, "nvidia-smi", "sleep 20\necho late")   # a grandchild holding stdout open
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + os.environ["PATH"])
    monkeypatch.setattr(environment, "PROBE_TIMEOUT_S", 0.3)
    t0 = time.perf_counter()
    env = collect_environment("cuda:sm_80")
    assert env["gpu"] is None and time.perf_counter() - t0 < 5
