"""A model end to end: eager vs `iree_boo` (vs `iree_boo` with each variant), measured with the rules a kernel is.

- **Columns**: eager torch (backend `torch`), then the model under `torch.compile(backend=iree_boo)` for the
  baseline and for each variant (backend `iree`). All columns share the model's parameters and inputs.
- **Compile apart from run**: each compiled column's first pass (Dynamo's trace, aot_autograd, our kernels built
  or taken from the cache) is timed on its own and reported as its compile time; it is never a sample.
- **Samples**: `bench.harness.measure` on one pass (forward; with `backward`, forward + backward of the sum of the
  floating outputs, gradients reset first): warm-up discarded, gc off, raw samples kept. The columns are measured
  in interleaved rounds (the order rotating each round), so a slow phase of the machine hits every column alike.
- **Threads**: eager torch runs with as many threads as our kernels (`threads`, default 1), or the comparison
  would be of thread counts.
- **Numerics**: every output (and, with `backward`, the gradient of every input and parameter) of a compiled
  column against eager's on the same inputs: relative L2 error per tensor, the worst one judged against a
  per-dtype tolerance, with an absolute floor at the tensor's rounding noise (judge.py says why and how).
- **Where the time goes**: for each compiled column, passes run with `nn.record_calls()`; per kernel of ours its
  calls and microseconds per pass, and the rest ("other": the nested backend's ops, the glue, Python).
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..bench.harness import measure
from ..bench.stats import compute_stats
from ..capture.live import InputSpec, _call_user, _leaves, _make_input, load_factory
from ..errors import BooError
from ..results import DONE, FAILED, IREE, TORCH, CompileInfo, JobResult
from ..variants import BASELINE, Variant

if TYPE_CHECKING:
    import torch

    from ..nn.backend import BooBackend

#: worst relative L2 error allowed per dtype of the compared tensor
TOLERANCES = {"float32": 1e-4, "float64": 1e-9, "float16": 2e-2, "bfloat16": 3e-2}


class ModelBenchError(BooError, ValueError):
    """A model that cannot be measured (one line)."""


@dataclass(frozen=True)
class ModelJob:
    """What to measure: `model` as in `boo-tui capture` (file.py:factory or module:factory) and its inputs."""

    model: str
    inputs: tuple[InputSpec, ...]
    backward: bool = False
    eval_mode: bool = False
    threads: int = 1
    seed: int = 0

    @property
    def command(self) -> str:
        """The row's command text: what a user would type after `boo-tui model`."""
        parts = ["model", self.model, *(f"--input {s}" for s in self.inputs)]
        if self.backward:
            parts.append("--backward")
        if self.eval_mode:
            parts.append("--eval")
        return " ".join(parts)

    @property
    def func_name(self) -> str:
        name = self.model.rpartition(":")[2]
        return f"model_{name}" + ("_fwd_bwd" if self.backward else "_fwd")


@dataclass
class Column:
    """One measured column: eager (variant None) or iree_boo with a variant."""

    label: str
    variant: Variant | None
    run_pass: Callable[[], object] = field(repr=False, default=lambda: None)
    """one pass of the model: its output (whatever the model returns)"""
    samples: list[float] = field(default_factory=list)
    result: JobResult | None = None


def _one_pass(module: Callable[..., object], inputs: Sequence[torch.Tensor], params: Sequence[torch.Tensor],
              backward: bool) -> Callable[[], object]:
    """One pass of `module` (the model or its compiled form) on `inputs`, returning its output."""
    import torch

    if not backward:
        def forward() -> object:
            with torch.no_grad():
                return module(*inputs)
        return forward

    def forward_backward() -> object:
        for p in params:
            p.grad = None
        for x in inputs:
            if x.requires_grad:
                x.grad = None
        out = module(*inputs)
        leaves = _leaves(out)
        if not leaves:
            raise ModelBenchError("--backward: the model returned no floating tensor to differentiate")
        loss = sum(t.float().sum() for t in leaves)
        assert isinstance(loss, torch.Tensor)   # leaves is not empty
        loss.backward()
        return out
    return forward_backward


def _snapshot(out: object, inputs: Sequence[torch.Tensor], named_params: Sequence[tuple[str, torch.Tensor]],
              backward: bool) -> dict[str, torch.Tensor]:
    """The tensors numerics compares: outputs, then (backward) the grads of inputs and parameters."""
    got = {f"output {i}": t.detach().clone() for i, t in enumerate(_leaves(out))}
    if backward:
        for i, x in enumerate(inputs):
            if x.grad is not None:
                got[f"grad of input {i}"] = x.grad.detach().clone()
        for name, p in named_params:
            if p.grad is not None:
                got[f"grad of {name}"] = p.grad.detach().clone()
    return got


def load_model(job: ModelJob) -> tuple[torch.nn.Module, list[torch.Tensor]]:
    """The user's module (eval() if asked) and its inputs (seeded), or a ModelBenchError naming the cause."""
    import torch

    from ..capture.errors import CaptureError

    try:
        factory, where = load_factory(job.model)
        model = _call_user(f"{where}()", factory)
    except CaptureError as e:
        raise ModelBenchError(str(e)) from None
    if not isinstance(model, torch.nn.Module):
        raise ModelBenchError(f"{job.model} returned {type(model).__name__}, not a torch.nn.Module")
    if job.eval_mode:
        model.eval()
    torch.manual_seed(job.seed)
    inputs = [_make_input(s) for s in job.inputs]
    if job.backward:
        inputs = [x.requires_grad_(True) if x.is_floating_point() else x for x in inputs]
    return model, inputs


def make_result(job: ModelJob, col: Column, target: str) -> JobResult:
    return JobResult(job_id=f"model:{col.label}", command=job.command, func_name=job.func_name, op="model",
                     variant=col.variant.name if col.variant is not None else BASELINE.name, target=target,
                     backend=TORCH if col.variant is None else IREE, device="cpu")


def finish(col: Column, flops: int | None = None) -> None:
    r = col.result
    assert r is not None
    if r.status == FAILED:
        return
    if not col.samples:
        r.status, r.error = FAILED, r.error or "no samples"
        return
    r.samples_us = list(col.samples)
    r.stats = compute_stats(col.samples, flops=flops)
    r.status = DONE
    r.finished_at = time.time()


def measure_interleaved(columns: Sequence[Column], *, iters: int, min_time_s: float | None, rounds: int,
                        on_round: Callable[[int, int], None] | None = None) -> None:
    """Samples for every live column, in `rounds` rounds of iters/rounds samples each, the order rotating."""
    live = [c for c in columns if c.result is not None and c.result.status != FAILED]
    per = max(1, math.ceil(iters / rounds))
    per_time = None if min_time_s is None else min_time_s / rounds
    for k in range(rounds):
        order = live[k % len(live):] + live[:k % len(live)] if live else []
        for col in order:
            m = measure(col.run_pass, iters=per, min_time_s=per_time, warmup_s=0.2 if k == 0 else 0.05,
                        max_time_s=120.0)
            col.samples.extend(m.samples_us)
            r = col.result
            assert r is not None
            r.block_k = m.block_k
            r.sample_lists()[2].append(len(m.samples_us))   # the verdicts take their confidence from the rounds
            r.warmup_calls = (r.warmup_calls or 0) + m.warmup_calls
            if m.host_load is not None:
                r.host_load = max(r.host_load or 0.0, m.host_load)
        if on_round is not None:
            on_round(k + 1, rounds)


def compile_column(col: Column, module: torch.nn.Module, inputs: Sequence[torch.Tensor], params: Sequence[torch.Tensor],
                   backward: bool, make_backend: Callable[[Variant], BooBackend]) -> tuple[BooBackend, object]:
    """torch.compile the module with iree_boo and this column's variant; the first pass is the compile."""
    import torch

    be = make_backend(col.variant or BASELINE)
    compiled = torch.compile(module, backend=be, dynamic=False)
    col.run_pass = _one_pass(compiled, inputs, params, backward)
    t0 = time.perf_counter()
    out = col.run_pass()
    seconds = time.perf_counter() - t0
    r = col.result
    assert r is not None
    kernels = list(getattr(be, "kernels", []) or [])
    r.compile = CompileInfo(seconds=seconds, cache_hit=False, num_dispatches=len(kernels))
    return be, out
