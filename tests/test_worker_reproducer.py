"""The reproducer: inputs saved beside the artifact and an iree-benchmark-module command that really runs and
times the same kernel as the worker did (same ballpark; the close comparison is benchmarks/bench_timing_fidelity.py)."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import statistics
import subprocess

import numpy as np
import pytest
import torch
from worker_kernels import MatmulSig, compile_sig

from boo_engine.bench.reproducer import ReproducerError, write_reproducer
from boo_engine.bench.worker import BenchSpec, BenchWorker

pytestmark = pytest.mark.skipif(shutil.which("iree-benchmark-module") is None,
                                reason="iree-benchmark-module is not on PATH")


def _run_json(cmd: str) -> dict:
    proc = subprocess.run(shlex.split(cmd) + ["--benchmark_format=json"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout[proc.stdout.index("{"):])


def _median_us(report: dict, column: str = "cpu_time") -> float:
    """Median per-call time. CPU time by default: iree-benchmark-module's real time is a repetition's wall time
    / iterations, which on a busy shared host includes every preemption (seen: 2.5x the kernel), while our
    median of per-call samples is not; local-sync runs on one thread, so its CPU time is the kernel's time."""
    for b in report["benchmarks"]:
        if b.get("aggregate_name") == "median":
            unit = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b["time_unit"]]
            return b[column] * unit
    raise AssertionError("no median in the benchmark report")


def test_command_reproduces_the_measurement(tmp_path):
    sig = MatmulSig(n=128)
    art = tmp_path / "art"
    vmfb = compile_sig(sig, str(art))
    cmd = write_reproducer(str(art), sig, seed=3, driver="local-sync", threads=1, min_time_s=0.05)
    assert cmd.startswith("iree-benchmark-module ")
    assert "--device=local-sync" in cmd and f"--module={os.path.abspath(vmfb)}" in cmd

    # the saved inputs are exactly the harness's inputs for that seed
    saved = [np.load(art / "inputs_seed3" / f"arg{i}.npy") for i in range(2)]
    for got, want in zip(saved, sig.get_sample_args(3)):
        assert np.array_equal(got, want.numpy())

    # Same ballpark on a noisy shared host: each side measured in turn, up to three rounds, the best median of
    # each compared (CI once read ours at 2.2x theirs in one round: a burst of host noise during ours only).
    # A command that ran another kernel or other inputs stays far off in every round.
    theirs: list[float] = []
    ours: list[float] = []

    def same_ballpark() -> bool:
        return 0.5 < min(ours) / min(theirs) < 2.0

    with BenchWorker() as w:
        for _ in range(3):
            theirs.append(_median_us(_run_json(cmd)))
            run = w.run(BenchSpec("r", "iree", sig, vmfb_path=vmfb, seed=3, iters=200))
            ours.append(statistics.median(run.samples_us))
            if same_ballpark():
                break
    assert same_ballpark(), (ours, theirs)


def test_bf16_inputs_as_raw_bytes_and_threads(tmp_path):
    sig = MatmulSig(n=16, dtype_name="bfloat16")
    art = tmp_path / "art"
    compile_sig(sig, str(art))
    cmd = write_reproducer(str(art), sig, seed=0, driver="local-task", threads=2, min_time_s=0.02,
                           repetitions=2)
    assert "--input=16x16xbf16=@" in cmd
    assert "--device=local-task" in cmd and "--task_topology_max_group_count=2" in cmd
    raw = (art / "inputs_seed0" / "arg0.bin").read_bytes()
    want = sig.get_sample_args(0)[0]
    assert torch.equal(torch.frombuffer(bytearray(raw), dtype=torch.bfloat16).view(16, 16), want)
    assert _median_us(_run_json(cmd)) > 0
    # written once: a second call reuses the files
    mtime = os.stat(art / "inputs_seed0" / "arg0.bin").st_mtime_ns
    assert write_reproducer(str(art), sig, 0, "local-task", 2, min_time_s=0.02, repetitions=2) == cmd
    assert os.stat(art / "inputs_seed0" / "arg0.bin").st_mtime_ns == mtime


def test_missing_artifact_is_one_line(tmp_path):
    with pytest.raises(ReproducerError, match="no .vmfb"):
        write_reproducer(str(tmp_path), MatmulSig(n=8), 0, "local-sync", 1)
