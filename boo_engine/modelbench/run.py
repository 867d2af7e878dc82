"""`bench_model`: the whole measurement of one model (see bench.py for the rules), as JobResults."""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

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
from .judge import RoundingReference, compare_tensors, copy_for_reference, rounding_reference

if TYPE_CHECKING:
    import torch

    from ..nn.backend import BooBackend

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


def _default_backend(variant: Variant) -> BooBackend:
    from ..nn import backend

    return backend(nested_backend="eager", variant=variant)


@dataclass(frozen=True)
class _Loaded:
    """The user's module and its inputs, with the parameters a pass differentiates."""

    model: torch.nn.Module
    inputs: list[torch.Tensor]
    named: list[tuple[str, torch.nn.Parameter]]   # the parameters that require grad, with their names
    backward: bool

    @property
    def params(self) -> list[torch.nn.Parameter]:
        """The parameters that require grad, in the model's order."""
        return [p for _, p in self.named]


def bench_model(job: ModelJob, variants: Sequence[Variant], *, iters: int = 50, min_time_s: float | None = 1.0,
                rounds: int = 5, numerics: bool = True, progress: Progress | None = None,
                make_backend: Callable[[Variant], BooBackend] = _default_backend) -> list[JobResult]:
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
        m = _load(job)
        columns = _columns(job, variants, target.name)
        eager = columns[0]
        eager.run_pass = _one_pass(m.model, m.inputs, m.params, m.backward)
        ref, rounding = _reference(job, m, eager, numerics, say)
        backends = _compile_columns(m, columns[1:], make_backend, numerics, ref, rounding, say)
        interrupted = _measure(columns, iters=iters, min_time_s=min_time_s, rounds=rounds, say=say)
        _finish_columns(columns, backends, interrupted, say)
        torch._dynamo.reset()   # our compiled graphs hold the model: let it go
    return [c.result for c in columns if c.result is not None]


def _load(job: ModelJob) -> _Loaded:
    """The job's model and inputs, and its parameters that require grad."""
    model, inputs = load_model(job)
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    return _Loaded(model, inputs, named, job.backward)


def _columns(job: ModelJob, variants: Sequence[Variant], target: str) -> list[Column]:
    """Eager's column then one per variant, each with its result started now."""
    columns = [Column("eager", None)] + [Column(v.name, v) for v in variants]
    for col in columns:
        col.result = make_result(job, col, target)
        col.result.started_at = time.time()
    return columns


def _reference(job: ModelJob, m: _Loaded, eager: Column, numerics: bool,
               say: Progress) -> tuple[dict[str, torch.Tensor], RoundingReference | None]:
    """Eager's reference pass (its snapshot), and with numerics the float64 reference's rounding noise."""
    import torch

    say("eager: reference pass")
    model64 = copy_for_reference(m.model) if numerics else None    # before any pass changes its buffers
    rng_state = torch.random.get_rng_state()
    try:
        ref = _snapshot(eager.run_pass(), m.inputs, m.named, m.backward)
    except BooError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's model: one line
        raise ModelBenchError(f"{job.model}: eager pass failed: {(str(e).splitlines() or [''])[0]}") from None
    rounding = None
    if numerics:
        say("eager: float64 reference and its rounding noise (numerics floors)")
        rounding = rounding_reference(model64, m.inputs, [n for n, _ in m.named], m.backward, ref, rng_state)
        del model64
    return ref, rounding


def _compile_columns(m: _Loaded, columns: Sequence[Column], make_backend: Callable[[Variant], BooBackend],
                     numerics: bool, ref: dict[str, torch.Tensor], rounding: RoundingReference | None,
                     say: Progress) -> dict[str, BooBackend]:
    """Compile each iree_boo column (its first pass), judging its numerics; label -> backend of those compiled."""
    backends: dict[str, BooBackend] = {}
    for col in columns:
        r = col.result
        assert r is not None
        say(f"iree_boo {col.label}: compiling (torch.compile + our kernels)")
        try:
            be, out = compile_column(col, m.model, m.inputs, m.params, m.backward, make_backend)
        except Exception as e:  # noqa: BLE001 - one column fails, the others go on
            r.status, r.error = FAILED, f"compile failed: {_root_message(e)}"[:400]
            say(f"iree_boo {col.label}: {r.error}")
            continue
        backends[col.label] = be
        say(f"iree_boo {col.label}: compiled in {r.compile.seconds:.1f} s"
            f" ({len(getattr(be, 'kernels', []) or [])} ops ours)" if r.compile else "")
        if numerics:
            r.numerics = compare_tensors(ref, _snapshot(out, m.inputs, m.named, m.backward), rounding)
    return backends


def _measure(columns: Sequence[Column], *, iters: int, min_time_s: float | None, rounds: int,
             say: Progress) -> bool:
    """Measure the live columns in interleaved rounds; True when Ctrl-C cut the rounds short."""
    say(f"measuring {sum(1 for c in columns if c.result and c.result.status != FAILED)} columns in "
        f"{rounds} interleaved rounds")
    try:
        measure_interleaved(columns, iters=iters, min_time_s=min_time_s, rounds=rounds,
                            on_round=lambda k, n: say(f"round {k}/{n} done"))
    except KeyboardInterrupt:   # Ctrl-C: the rounds already taken are kept, the columns marked interrupted
        say("interrupted: keeping the samples of the rounds already taken")
        return True
    return False


def _finish_columns(columns: Sequence[Column], backends: dict[str, BooBackend], interrupted: bool,
                    say: Progress) -> None:
    """Each column's statistics (interrupted ones marked so), and where the time goes in each compiled one."""
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
