"""`bench_model`: the whole measurement of one model (see bench.py for the rules), as JobResults."""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..errors import BooError
from ..results import FAILED, INTERRUPTED, JobResult
from ..variants import Variant
from .bench import (
    Column,
    ModelBenchError,
    ModelJob,
    _one_pass,
    _snapshot,
    compile_column,
    finish,
    load_model,
    make_result,
    measure_interleaved,
)
from .breakdown import measure_breakdown
from .judge import compare_tensors, copy_for_reference, rounding_reference

Progress = Callable[[str], None]


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _root_message(e: BaseException) -> str:
    """The first line of what went wrong: Dynamo wraps a backend's error in BackendCompilerFailed ("backend=...
    raised:" then the error on the next lines); ours (a BooError naming the op and the kernel) is in the chain."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, BooError):
            return (str(cur).splitlines() or [""])[0]
        cur = getattr(cur, "inner_exception", None) or cur.__cause__ or cur.__context__
    lines = [ln for ln in str(e).splitlines() if ln.strip()]
    return lines[-1] if lines else type(e).__name__


def _default_backend(variant: Variant) -> Any:
    from ..nn import backend

    return backend(nested_backend="eager", variant=variant)


def bench_model(job: ModelJob, variants: Sequence[Variant], *, iters: int = 50, min_time_s: float | None = 1.0,
                rounds: int = 5, numerics: bool = True, progress: Progress | None = None,
                make_backend: Callable[[Variant], Any] = _default_backend) -> list[JobResult]:
    """Eager, then iree_boo with each of `variants` (the baseline first, as given). A column whose compile or
    first pass fails is a failed result naming why; the others are still measured."""
    import torch

    from ..nn import use_target
    from ..targets import Target

    say = progress or (lambda _m: None)
    if job.threads < 1:
        raise ModelBenchError(f"--threads {job.threads}: give at least 1")
    target = Target("cpu", threads=job.threads)
    with _torch_threads(job.threads), use_target(target):
        model, inputs = load_model(job)
        params = [p for p in model.parameters() if p.requires_grad]
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        columns = [Column("eager", None)] + [Column(v.name, v) for v in variants]
        for col in columns:
            col.result = make_result(job, col, target.name)
            col.result.started_at = time.time()
        eager = columns[0]
        eager.run_pass = _one_pass(model, inputs, params, job.backward)
        say("eager: reference pass")
        model64 = copy_for_reference(model) if numerics else None    # before any pass changes its buffers
        rng_state = torch.random.get_rng_state()
        try:
            ref = _snapshot(eager.run_pass(), inputs, named, job.backward)
        except BooError:
            raise
        except Exception as e:  # noqa: BLE001 - the user's model: one line
            raise ModelBenchError(f"{job.model}: eager pass failed: {(str(e).splitlines() or [''])[0]}") from None
        rounding = None
        if numerics:
            say("eager: float64 reference and its rounding noise (numerics floors)")
            rounding = rounding_reference(model64, inputs, [n for n, _ in named], job.backward, ref, rng_state)
            del model64
        backends: dict[str, Any] = {}
        for col in columns[1:]:
            r = col.result
            assert r is not None
            say(f"iree_boo {col.label}: compiling (torch.compile + our kernels)")
            try:
                be, out = compile_column(col, model, inputs, params, job.backward, make_backend)
            except Exception as e:  # noqa: BLE001 - one column fails, the others go on
                r.status, r.error = FAILED, f"compile failed: {_root_message(e)}"[:400]
                say(f"iree_boo {col.label}: {r.error}")
                continue
            backends[col.label] = be
            say(f"iree_boo {col.label}: compiled in {r.compile.seconds:.1f} s"
                f" ({len(getattr(be, 'kernels', []) or [])} ops ours)" if r.compile else "")
            if numerics:
                r.numerics = compare_tensors(ref, _snapshot(out, inputs, named, job.backward), rounding)
        say(f"measuring {sum(1 for c in columns if c.result and c.result.status != FAILED)} columns in "
            f"{rounds} interleaved rounds")
        interrupted = False
        try:
            measure_interleaved(columns, iters=iters, min_time_s=min_time_s, rounds=rounds,
                                on_round=lambda k, n: say(f"round {k}/{n} done"))
        except KeyboardInterrupt:   # Ctrl-C: the rounds already taken are kept, the columns marked interrupted
            interrupted = True
            say("interrupted: keeping the samples of the rounds already taken")
        for col in columns:
            r = col.result
            assert r is not None
            if interrupted and r.status != FAILED:
                if col.samples:
                    finish(col)     # statistics over the rounds taken
                r.status, r.error = INTERRUPTED, "interrupted (Ctrl-C): samples of the rounds taken before it"
                continue
            finish(col)
            if col.variant is not None and col.label in backends and r.status != FAILED:
                say(f"iree_boo {col.label}: where the time goes")
                r.breakdown = measure_breakdown(col.run_pass, backend=backends[col.label])
                if r.compile is not None:
                    r.breakdown["compile_s"] = r.compile.seconds
        torch._dynamo.reset()   # our compiled graphs hold the model: let it go
    return [c.result for c in columns if c.result is not None]
