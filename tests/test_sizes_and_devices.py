"""Jobs too big for the machine and GPUs it does not have fail as one line (issue 16, items 5 and 6): the size
check runs before the benchmark worker allocates anything, and --gpu-id is never silently ignored."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from boo_engine.bench.memory import TooBig, check_fits, estimate, human_bytes
from boo_engine.commands import parse_command

ROOT = Path(__file__).resolve().parents[1]


def boo_driver(args, tmp_path, timeout=300):
    env = dict(os.environ, PYTHONPATH=str(ROOT), BOO_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("BOO_DB", None)
    return subprocess.run([sys.executable, "-m", "boo_engine.cli.driver", *args, "--db", str(tmp_path / "r.db")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=timeout)


def test_estimate_counts_inputs_outputs_and_workspace():
    sig = parse_command("gemm --a_w 1024 --a_h 512 --b_w 256")      # A 1024x512, B 512x256, C 1024x256 (f32)
    gpu = estimate(sig, gpu=True)
    assert (gpu.inputs, gpu.outputs, gpu.workspace) == ((1024 * 512 + 512 * 256) * 4, 1024 * 256 * 4, 0)
    cpu = estimate(sig, numerics=True)
    assert cpu.workspace == 1024 * 256 * 4 + (1024 * 512 + 512 * 256 + 1024 * 256) * 8
    assert check_fits(sig).total == cpu.inputs + 2 * cpu.outputs   # no numerics: the outputs' copy only
    assert human_bytes(3 * 2**40) == "3.0 TiB"


def test_too_big_names_the_size_without_allocating():
    with pytest.raises(TooBig, match=r"too big for this host: needs 36\.4 PiB \(inputs 36\.4 PiB"):
        check_fits(parse_command("conv -n 100000000 -c 100000"))


@pytest.mark.timeout(300)
def test_huge_command_is_a_failed_job_with_one_line(tmp_path):
    """torch backend (no compile): the job fails with the size line, never torch's allocator message."""
    out = boo_driver(["conv", "-n", "100000000", "-c", "100000", "--backend", "torch"], tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    failed = [ln for ln in out.stdout.splitlines() if "FAILED" in ln]
    assert len(failed) == 1 and "too big for this host: needs 36.4 PiB" in failed[0], out.stdout
    assert "allocate" not in out.stdout + out.stderr
    assert "internal error" not in out.stderr


@pytest.mark.parametrize("args, needle", [
    (["--gpu-id", "5"], "--gpu-id 5: the cpu target measures on this host's CPU"),
    (["--gpu-id", "5", "--target", "hip:gfx942"], "--gpu-id 5: this machine has no hip GPU"),
    (["--gpu-id", "-1", "--target", "cuda:sm_80"], "--gpu-id -1: this machine has no cuda GPU"),
    (["--gpu-id", "-3", "--target", "cuda:sm_80"], "--gpu-id expects a GPU index"),
])
def test_gpu_id_is_refused_with_one_line(tmp_path, args, needle):
    if "hip" in " ".join(args) or "cuda" in " ".join(args):
        from boo_engine.targets import gpu_device_count

        if gpu_device_count(args[-1].split(":")[0]):
            pytest.skip("this machine has such a GPU")
    out = boo_driver(["gemm", "--a_w", "16", "--a_h", "16", "--b_w", "16", *args], tmp_path, timeout=120)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr
    assert out.stdout == ""                            # nothing measured


def test_gpu_id_with_preload_is_said_to_have_no_effect(tmp_path):
    out = boo_driver(["gemm", "--a_w", "16", "--a_h", "16", "--b_w", "16", "--gpu-id", "0", "--target",
                      "hip:gfx942", "--preload"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "--gpu-id 0 has no effect with --preload" in out.stderr
