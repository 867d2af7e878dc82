"""The compile stage: from a planned IREE job to a compiled artifact, or to a FAILED job with the compiler's
error.

Owns the compile pool (child processes, started on first need: a run over cached kernels never starts it).
A kernel already in the cache is taken from there at submit time (a few file reads, no export, no waiting for a
worker). The runner submits every IREE job of a batch at once, then awaits each before it is measured.

Also here: the check that a variant's tuning spec really changed the kernel (`check_spec_applied`), decided
from the executable configurations the compile dumped.

The pool and worker modules are imported lazily: the headless front end must start without their imports.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import events as ev
from ..config import SessionConfig
from ..errors import ClusterLost, CompileError, first_line
from ..results import (
    CACHED,
    COMPILING,
    EXPORTING,
    FAILED,
    FINAL_STATUSES,
    IREE,
    CompileInfo,
    JobResult,
)
from ..targets import Target
from ..variants.best import TunedLookup, best_variant, is_unresolved
from .recording import RunRecorder
from .state import SessionState

if TYPE_CHECKING:
    from ..compile.cache import KernelCache
    from ..compile.interface import CompilingPool
    from ..compile.pool import Artifact

#: how often a wait for a compile looks whether the job was cancelled or the session is closing
POLL_S = 0.2


class CompileStage:
    def __init__(self, state: SessionState, recorder: RunRecorder, config: SessionConfig, target: Target,
                 cache: KernelCache, pool_factory: Callable[[], CompilingPool] | None = None) -> None:
        """`pool_factory`: makes the pool on first need instead of a local CompilePool (the Ray pool:
        cluster/compiling.py; both are a compile.interface.CompilingPool)."""
        self._state = state
        self._recorder = recorder
        self._config = config
        self._target = target
        self._cache = cache
        self._pool: CompilingPool | None = None
        self._pool_factory = pool_factory
        #: a compile of this session made it into the cache (so the cache can take writes)
        self._stored = False
        #: said once per run, at the first cached kernel that was not trusted (and so compiled anew)
        self.untrusted_note: str | None = None
        #: why BOO's build of some kernel is our export with BOO's flags, each reason said once per run
        self.boo_notes: list[str] = []
        #: a finished tune's winner of a kernel on this machine, for the best column (the session sets it)
        self.tuned: TunedLookup | None = None
        self._note_lock = threading.Lock()

    def _ensure_pool(self) -> CompilingPool:
        if self._pool is None and self._pool_factory is not None:
            self._pool = self._pool_factory()
        if self._pool is None:
            from ..compile.pool import CompilePool

            self._pool = CompilePool(
                workers=self._config.compile_workers, timeout_s=self._config.compile_timeout_s, cache=self._cache
            )
        return self._pool

    def submit(self, job_id: str) -> None:
        """Take the job's kernel from the cache, or queue its compile (returns at once)."""
        job, result = self._state.job(job_id), self._state.jobs[job_id]
        if job.artifact is not None or job.cancelled or job.command is None:
            return
        from ..compile.pool import lookup_cached

        if is_unresolved(job.variant):   # the best column: this kernel's best known configuration, now
            resolved = best_variant(job.command.signature, self._target, self.tuned)
            with self._state.lock:
                job.variant = resolved

        pool = self._ensure_pool()
        # A cache hit costs a few file reads and no export: cached kernels never wait for a worker.
        # --flags: every IREE job of the run, the baseline included, compiles with them (and keys the cache on them)
        extra = self._config.compile_flags
        hit = lookup_cached(job.command.signature, self._target, job.variant, cache=self._cache, extra_flags=extra)
        if hit is not None:
            job.artifact = hit
            self._compiled(result, hit)
            return
        self._state.set_status(result, EXPORTING, "waiting for a compile worker")
        try:
            job.future = pool.submit(job.command.signature, self._target, job.variant, extra_flags=extra,
                                     on_start=lambda: self._state.set_status(result, COMPILING))
        except ClusterLost as e:
            self.cluster_lost(e)

    def await_(self, job_id: str) -> None:
        """Wait for the job's compile; a failed compile finishes the job FAILED. Returns early when the job is
        cancelled or the session closes (the compile is then cancelled too)."""
        job, result = self._state.job(job_id), self._state.jobs[job_id]
        future = job.future
        if job.artifact is not None or future is None or result.status in FINAL_STATUSES:
            return
        while True:
            if job.cancelled or self._state.stop.is_set() or self._state.halted is not None:
                future.cancel()
                return
            try:
                artifact = future.result(timeout=POLL_S)
                break
            except TimeoutError:
                continue
            except Exception as e:  # noqa: BLE001 - a cancelled future, a broken pool: a failed job, not a dead session
                if job.cancelled or self._state.stop.is_set() or future.cancelled():
                    return  # stopped on request, not a failed compile: cancel() / close() give the job its status
                if isinstance(e, CompileError) and self._not_stored(job_id, e):
                    return
                if isinstance(e, ClusterLost):   # the run stops as interrupted: --resume compiles it again
                    self.cluster_lost(e)
                    return
                if isinstance(e, CompileError):
                    result.compile = CompileInfo(error=e.stderr or str(e), command=list(e.command))
                    self._state.emit(ev.CompileFinished(job_id=job_id, ok=False, error=str(e)))
                    self._recorder.finish(result, FAILED, error=f"compile failed: {first_line(str(e))}")
                    return
                self._state.emit(ev.CompileFinished(job_id=job_id, ok=False, error=repr(e)))
                self._recorder.finish(result, FAILED, error=f"compile failed: {first_line(str(e) or repr(e))}")
                return
        self._stored = True
        job.artifact = artifact
        self._compiled(result, artifact)

    def cluster_lost(self, e: ClusterLost) -> None:
        """The Ray cluster went away: the run stops as interrupted (said once), for --resume to continue."""
        cluster_lost(self._state, e)

    def _not_stored(self, job_id: str, e: CompileError) -> bool:
        """A compile whose kernel the cache could not take (compile.storage): True when handled here. The job
        fails with the one line naming the cache. When nothing was stored in this session and no cached kernel
        waits to be measured, nothing can be done: the run stops (`state.halt`), said once."""
        from ..compile.storage import CacheStoreError

        if not isinstance(e, CacheStoreError):
            return False
        result, state = self._state.jobs[job_id], self._state
        result.compile = CompileInfo(error=e.stderr or str(e), command=list(e.command))
        with state.lock:
            hits_waiting = any(state.job(j).artifact is not None and state.jobs[j].status not in FINAL_STATUSES
                               for j in state.active)
        self._state.emit(ev.CompileFinished(job_id=job_id, ok=False, error=str(e)))
        if not self._stored and not hits_waiting and state.halt(
                str(e), f"the run stopped: nothing can be stored in the kernel cache ({e.reason})"):
            state.emit(ev.Log(level="error", message=str(e)))
        if state.halted is not None:   # the run's one line says it all
            self._recorder.finish(result, FAILED,
                                  error=f"compile failed: the kernel cache takes no writes ({e.reason})")
        else:
            self._recorder.finish(result, FAILED, error=str(e))
        return True

    def _compiled(self, result: JobResult, artifact: Artifact) -> None:
        if artifact.untrusted:
            with self._note_lock:
                first = self.untrusted_note is None
                if first:
                    self.untrusted_note = untrusted_notice(artifact.untrusted)
            if first:
                self._state.emit(ev.Log(level="warning", message=str(self.untrusted_note)))
        info = result.compile = artifact.to_compile_info()
        best = self._state.job(result.job_id).variant.best
        info.chosen_by = best or None
        self._boo_note(result, info.build)
        self._state.emit(ev.CompileFinished(job_id=result.job_id, ok=True, seconds=info.seconds,
                                            cache_hit=info.cache_hit))
        self._state.set_status(result, CACHED)

    def _boo_note(self, result: JobResult, build: str | None) -> None:
        """A kernel BOO's build could not take from iree-turbine: one line per reason and run (the kernel named
        for the first), e.g. `iree-turbine is not installed`, `bnorm is not an op BOO has`."""
        why = boo_fallback(build)
        if why is None:
            return
        with self._note_lock:
            if why in self.boo_notes:
                return
            self.boo_notes.append(why)
        self._state.emit(ev.Log(job_id=result.job_id, level="warning",
                                message=f"{result.func_name}: the {result.variant} column is our export compiled "
                                        f"with BOO's flags here: {why}"))

    def cancel_all(self) -> None:
        """Cancel every queued and running compile (closing). Best effort: the pool may already be broken."""
        if self._pool is None:
            return
        try:
            self._pool.cancel_all()
        except Exception:  # noqa: BLE001 - closing: nothing left to tell anyone
            pass

    def kill_now(self) -> None:
        """SIGKILL the compile workers and their compilers, taking no lock (see Session.kill_children)."""
        if self._pool is not None:
            self._pool.kill_now()

    def shutdown(self) -> None:
        """Stop the pool's processes without waiting for them. Best effort, like cancel_all."""
        if self._pool is None:
            return
        try:
            self._pool.shutdown(wait=False, cancel=True)
        except Exception:  # noqa: BLE001 - closing: nothing left to tell anyone
            pass


def check_spec_applied(state: SessionState, job_id: str) -> bool | None:
    """Did the job's tuning spec change its kernel? Compared with the same command's IREE baseline when that was
    compiled; a spec that did nothing is logged as a warning (the caller also marks the result). None: cannot
    tell."""
    from ..variants import spec_applied

    result, job = state.jobs[job_id], state.job(job_id)
    with state.lock:
        baseline = next(
            (state.job(j).artifact for j, r in state.jobs.items()
             if r.command == result.command and r.backend == IREE and state.job(j).variant.is_baseline
             and state.job(j).artifact is not None),
            None,
        )
    check = spec_applied(
        job.artifact.configs_dir if job.artifact is not None else None,
        baseline.configs_dir if baseline is not None else None,
        job.variant.tuning_specs,
    )
    if not check.applied:
        state.emit(ev.Log(job_id=job_id, level="warning",
                          message=f"{result.func_name} [{result.variant}]: {check.detail}"))
    return check.applied


def cluster_lost(state: SessionState, e: ClusterLost) -> None:
    """Stop the run because its Ray cluster went away (the first caller says so): what was measured is kept,
    every unfinished job ends interrupted, and --resume continues (locally or on a cluster)."""
    if state.halt(f"{e}: the run stopped (--resume continues it)", str(e), store_broken=False):
        state.emit(ev.Log(level="error", message=f"{e}: the run stopped (--resume continues it)"))


def boo_fallback(build: str | None) -> str | None:
    """Why a kernel of BOO's build is our export ("boo: our export (WHY)" -> WHY), else None."""
    prefix = "boo: our export ("
    if build is None or not build.startswith(prefix):
        return None
    return build[len(prefix):].removesuffix(")")


def untrusted_notice(untrusted: str) -> str:
    """The run's one line for the cache entries it did not trust (compile/trust.py), from the first one's."""
    return f"kernel cache entry {untrusted}: not loaded, compiled anew (so is every such entry of this run)"
