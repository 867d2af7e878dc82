"""Kernels for the harness / worker / reproducer tests: a helper module, not a test module (pytest does not collect
it), imported by those tests and by the worker's spawned child.

The signatures are real OpSignatures (a square matmul) compiled by real iree-compile. The misbehaving ones
(raise, crash, hang) misbehave inside their eager `reference`, which the worker runs as the torch backend: that
exercises the worker's real failure paths without any test hook in the worker itself. They live in a module
of their own so the worker's spawned child can unpickle them. `stale_answers_child` stands in for the worker's
child where a test needs the child to misbehave in the protocol itself.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import ClassVar

import torch

from boo_engine.bench.messages import BenchOutcome, Close, JobCancelled, JobDone, JobFailed, Ready, RunJob, Samples
from boo_engine.ops.base import OpSignature

CPU_FLAGS = [
    "--iree-input-type=torch",
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=host",
]


@dataclass(frozen=True)
class MatmulSig(OpSignature):
    """C = A @ B with A (n x n) and B (n x n)."""

    op: ClassVar[str] = "gemm"
    n: int = 16
    dtype_name: str = "float32"

    @property
    def func_name(self) -> str:
        return f"test_mm_{self.dtype_name}_{self.n}"

    @property
    def mode(self) -> str:
        return "forward"

    def input_shapes(self):
        return [(self.n, self.n), (self.n, self.n)]

    def output_shapes(self):
        return [(self.n, self.n)]

    def reference(self, a, b):
        return torch.mm(a, b)

    @property
    def flops(self) -> int:
        return 2 * self.n ** 3

    def describe(self):
        return {"op": self.op, "dtype": self.dtype_name, "mode": self.mode,
                "input_shapes": self.input_shapes(), "output_shapes": self.output_shapes()}


@dataclass(frozen=True)
class RaiseSig(MatmulSig):
    """Its eager kernel raises on every call."""

    def reference(self, a, b):
        raise ValueError("boom from the kernel")


@dataclass(frozen=True)
class CrashSig(MatmulSig):
    """Its eager kernel kills the process that runs it with SIGSEGV (what a faulting kernel does)."""

    def reference(self, a, b):
        os.kill(os.getpid(), signal.SIGSEGV)
        time.sleep(10)


@dataclass(frozen=True)
class HangSig(MatmulSig):
    """Its eager kernel never returns."""

    def reference(self, a, b):
        while True:
            time.sleep(1.0)


def compile_sig(sig: OpSignature, out_dir: str) -> str:
    """torch.export -> torch-dialect MLIR -> iree-compile for this CPU; returns the .vmfb path."""
    import iree.compiler.ir as ir
    from iree.compiler.extras.fx_importer import FxImporter

    prog = torch.export.export(sig.as_module(), sig.get_sample_args(0))
    importer = FxImporter(context=ir.Context())
    importer.import_frozen_program(prog, func_name="main")
    os.makedirs(out_dir, exist_ok=True)
    mlir = os.path.join(out_dir, f"{sig.func_name}.mlir")
    vmfb = os.path.join(out_dir, f"{sig.func_name}.vmfb")
    with open(mlir, "w") as f:
        f.write(str(importer.module))
    subprocess.run(["iree-compile", mlir, *CPU_FLAGS, "-o", vmfb], check=True, capture_output=True, timeout=300)
    return vmfb


def stale_answers_child(inbox, outbox, threads: int) -> None:
    """A stand-in for the worker's child process that answers every job first with every kind of message of the
    PREVIOUS job (what late answers look like), then properly with two samples: the parent must see only those."""
    outbox.send(Ready(os.getpid()))
    while True:
        msg = inbox.recv()
        if isinstance(msg, Close):
            return
        if isinstance(msg, RunJob):
            old = msg.seq - 1
            outbox.send(Samples(old, (999.0,)))
            outbox.send(JobFailed(old, "a late failure of an earlier job"))
            outbox.send(JobCancelled(old))
            outbox.send(JobDone(old, BenchOutcome([999.0], block_k=1, warmup_calls=0, wall_s=0.0, host_load=None)))
            outbox.send(Samples(msg.seq, (1.0, 2.0)))
            outbox.send(JobDone(msg.seq, BenchOutcome([1.0, 2.0], block_k=1, warmup_calls=3, wall_s=0.1,
                                                      host_load=None)))
