"""The one orchestrator. A Session turns inputs (commands files, command strings) x variants x backends on one
target into jobs, compiles them in a process pool through the cache, measures them in a benchmark worker
process, checks numerics, stores every result and raw sample, and emits events for the front ends.

Threads: the caller's thread only queues work and reads state. A runner thread drives compiles and
measurements; compiles run in child processes and measurements in the benchmark worker process, so no export,
compile or measurement ever runs on the caller's (e.g. the UI's) thread. The store has its own writer thread.

CPU discipline: on the `cpu` target nothing else runs while a measurement runs: all compiles of a batch finish
before its first measurement, and the measurements run one at a time.
"""
from __future__ import annotations

import hashlib
import os
import shlex
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from . import __version__
from . import events as ev
from .commands import Command, looks_like_commands_file, parse_invocation, read_commands_file
from .errors import BooError, CommandError, CompileError, first_line
from .results import (
    CACHED,
    CANCELLED,
    COMPILING,
    DONE,
    EXPORTING,
    FAILED,
    FINAL_STATUSES,
    INTERRUPTED,
    IREE,
    MEASURING,
    QUEUED,
    TORCH,
    CompileInfo,
    JobResult,
)
from .targets import Target, default_target, parse_target
from .config import SessionConfig
from .variants import BASELINE, Variant

Listener = Callable[[ev.Event], None]

#: Warm-up (discarded) before the first samples of a job, and before each later interleaving round of it.
FIRST_WARMUP_S = 0.1
LATER_WARMUP_S = 0.02
#: /proc/stat counts CPU time in 10 ms ticks: other processes' load only flags a result as noisy once it
#: amounts to two ticks over the job's measuring time (below that it cannot be told from the quantisation).
HOST_LOAD_RESOLUTION_S = 0.02


@dataclass
class _Job:
    """What the runner needs about a job beyond its public JobResult record."""

    command: Command | None
    variant: Variant
    backend: str
    iters: int
    artifact: object | None = None            # compile.pool.Artifact once compiled
    future: Future | None = None
    outputs_path: str | None = None
    cancelled: bool = False
    # other processes' CPU over this job's measuring rounds: sum of host_load * wall_s, and sum of wall_s
    load_cpu_s: float = 0.0
    load_wall_s: float = 0.0


class Session:
    def __init__(self, config: SessionConfig | None = None, listener: Listener | None = None, *,
                 worker=None):
        """`worker`: a BenchWorker the caller started early (so its torch import overlapped the caller's); the
        session owns and closes it."""
        from .compile.cache import KernelCache
        from .store import Store, default_db_path

        self.config = config or SessionConfig()
        self._listener = listener
        self.target: Target = parse_target(self.config.target) if self.config.target else default_target()
        self.variants: list[Variant] = list(self.config.variants) or [BASELINE]
        self.jobs: dict[str, JobResult] = {}
        self._plan: dict[str, _Job] = {}
        self._commands: list[tuple[str | None, str, Command | None, str | None]] = []
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._runner: threading.Thread | None = None
        self._pool = None
        self._worker = worker
        self._cache = KernelCache(self.config.cache_dir)
        self._closed = False
        self._environment: dict = {}
        self._tmp = tempfile.TemporaryDirectory(prefix="boo-session-")
        self.store = Store(self.config.db_path or default_db_path())
        self.run_id: int | None = None
        # `iree-compile --version` and friends take ~0.3 s: done while the inputs are parsed.
        self._environment_thread = threading.Thread(target=self._collect_environment, name="boo-env", daemon=True)
        self._environment_thread.start()
        self._queued: list[str] = []          # job ids waiting for the runner
        self._active: set[str] = set()        # job ids of the batch the runner works on
        self._measure_cancel = threading.Event()
        self._current: str | None = None      # job being measured
        self._idle_reported = False
        self._registered_commands: set[str] = set()
        self._resumed_done_results: dict[str, JobResult] = {}
        if self.config.resume is not None:
            self._prepare_resume(self.config.resume)

    # ------------------------------------------------------------------ inputs
    def add_inputs(self, inputs: Sequence[str]) -> list[JobResult]:
        """Commands files (a path to an existing file, or any *.txt / *.tsv) and command strings. A bad line of a
        file becomes a FAILED job naming file:line; a bad command string or a missing file raises CommandError."""
        added: list[JobResult] = []
        for item in inputs:
            if looks_like_commands_file(item):
                for _, jobs in self.add_file(item):
                    added += jobs
            else:
                added += self.add_command(item)
        return added

    def add_file(self, path: str, extra_args: Sequence[str] = ()) -> list[tuple[str, list[JobResult]]]:
        """Every line of a commands file, as (line text, its jobs); a bad line gets one FAILED job naming
        file:line. A missing or unreadable file raises CommandError."""
        extra = list(extra_args) + list(self.config.extra_args)
        return [
            (line.text, self._add_entry(line.source, line.text, line.command, line.message))
            for line in read_commands_file(path, extra, errors="collect")
        ]

    def add_command(self, text: str | Sequence[str], *, source: str | None = None) -> list[JobResult]:
        """One command string; raises CommandError (one line) when it does not parse."""
        if isinstance(text, str):
            try:
                tokens = shlex.split(text)
            except ValueError as e:  # an unbalanced quote
                raise CommandError(f"cannot split command {text!r}: {e}") from None
        else:
            tokens = list(text)
        command = parse_invocation(tokens + list(self.config.extra_args))
        return self._add_entry(source, command.text, command, None)

    def add_variant(self, variant: Variant) -> list[JobResult]:
        with self._lock:
            if any(v.name == variant.name for v in self.variants):
                raise BooError(f"variant {variant.name!r} already exists")
            self.variants.append(variant)
            self._register_variant(variant)
            added = []
            for source, text, command, error in self._commands:
                if command is not None and IREE in self.config.backends and self._applies(variant, command):
                    added.append(self._new_job(source, text, command, variant, IREE))
            return added

    def _add_entry(self, source, text, command, error) -> list[JobResult]:
        with self._lock:
            self._commands.append((source, text, command, error))
            if command is None:
                return [self._failed_entry(source, text, error or "invalid command")]
            added = []
            if IREE in self.config.backends:
                for variant in self.variants:
                    if self._applies(variant, command):
                        added.append(self._new_job(source, text, command, variant, IREE))
            if TORCH in self.config.backends:
                added.append(self._new_job(source, text, command, BASELINE, TORCH))
            return added

    @staticmethod
    def _applies(variant: Variant, command: Command) -> bool:
        """Edited-dispatch variants are made for one kernel (every kernel's dispatches share names, so an edited
        dispatch would be substituted into unrelated kernels): they get no job for other commands."""
        return variant.applies_to(command.signature.func_name)

    def _job_id(self, text: str, variant: str, backend: str) -> str:
        base = hashlib.sha1(f"{text}\0{variant}\0{backend}\0{self.target.name}".encode()).hexdigest()[:12]
        job_id, n = base, 1
        while job_id in self.jobs:
            n += 1
            job_id = f"{base}-{n}"
        return job_id

    def _new_job(self, source, text, command: Command, variant: Variant, backend: str) -> JobResult:
        sig = command.signature
        job_id = self._job_id(text, variant.name, backend)
        iters = self.config.iters or command.iters or 100
        if job_id in self._resumed_done_results:
            result = self._resumed_done_results[job_id]
        else:
            result = JobResult(
                job_id=job_id, command=text, func_name=sig.func_name, op=sig.op, variant=variant.name,
                target=self.target.name, backend=backend, status=QUEUED, source=source,
            )
        self.jobs[job_id] = result
        self._plan[job_id] = _Job(command=command, variant=variant, backend=backend, iters=iters)
        self._emit(ev.JobQueued(job_id=job_id, result=result))
        return result

    def _failed_entry(self, source, text, error: str) -> JobResult:
        job_id = self._job_id(text, "-", "-")
        result = JobResult(
            job_id=job_id, command=text, func_name="", op=(text.split() or ["?"])[0], variant="-",
            target=self.target.name, backend="-", status=FAILED, error=error, source=source,
        )
        self.jobs[job_id] = result
        self._plan[job_id] = _Job(command=None, variant=BASELINE, backend="-", iters=0)
        self._emit(ev.JobQueued(job_id=job_id, result=result))
        return result

    # ------------------------------------------------------------------ control
    def start(self, job_ids: Iterable[str] | None = None) -> None:
        """Run the queued jobs (all, or the given ones) in engine threads; returns at once."""
        if self._closed:
            raise BooError("session is closed")
        with self._lock:
            # The worker process starts first: importing torch there (~1 s) overlaps everything below.
            if any(r.status == QUEUED for r in self.jobs.values()):
                self._ensure_worker()
            self._ensure_run()
            ids = list(job_ids) if job_ids is not None else list(self.jobs)
            for job_id in ids:
                result = self.jobs.get(job_id)
                if result is not None and result.status == QUEUED:
                    self._plan[job_id].cancelled = False
                    self._queued.append(job_id)
                    self._record(result)
                elif result is not None and result.status == FAILED and self._plan[job_id].command is None:
                    self._record(result)  # bad input lines are stored as failed rows too
            if self._runner is None or not self._runner.is_alive():
                self._stop.clear()
                self._runner = threading.Thread(target=self._run_loop, name="boo-session", daemon=True)
                self._runner.start()
            self._wake.set()

    def rerun(self, job_ids: Iterable[str]) -> None:
        with self._lock:
            ids = []
            for job_id in job_ids:
                result = self.jobs.get(job_id)
                if result is None or self._plan[job_id].command is None:
                    continue
                if result.status not in FINAL_STATUSES:
                    continue
                self._reset(result)
                ids.append(job_id)
                self._emit(ev.JobStatus(job_id=job_id, status=QUEUED))
        self.start(ids)

    def cancel(self, job_ids: Iterable[str] | None = None) -> None:
        with self._lock:
            ids = list(job_ids) if job_ids is not None else list(self.jobs)
            for job_id in ids:
                job = self._plan.get(job_id)
                result = self.jobs.get(job_id)
                if job is None or result is None or result.status in FINAL_STATUSES:
                    continue
                job.cancelled = True
                if job.future is not None:
                    job.future.cancel()
                if result.status != MEASURING:
                    self._finish(result, CANCELLED, error="cancelled")
            if job_ids is None:
                self._queued.clear()
            if self._current is not None and self._plan[self._current].cancelled:
                self._measure_cancel.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until no job is queued or running. True when idle."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if not self._busy():
                return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.05)

    def close(self) -> None:
        """Stop everything; unfinished jobs are marked interrupted, the run is closed, the DB is flushed.
        Safe to call at any moment and more than once."""
        if self._closed:
            return
        self._closed = True
        was_busy = self._busy()  # work in flight now means the run is interrupted, however the jobs end
        self._stop.set()
        self._measure_cancel.set()
        with self._lock:
            for job in self._plan.values():
                job.cancelled = True
                if job.future is not None:
                    job.future.cancel()
        self._wake.set()
        if self._pool is not None:
            try:
                self._pool.cancel_all()
            except Exception:
                pass
        if self._runner is not None:
            self._runner.join(timeout=10)
        with self._lock:
            for result in self.jobs.values():
                if result.status not in FINAL_STATUSES:
                    self._finish(result, INTERRUPTED, error="interrupted: the session closed before this job finished")
        if self.run_id is not None and (was_busy or not self._idle_reported):
            status = self._run_status(was_busy)
            self.store.finish_run(self.run_id, status)
            self._emit(ev.RunFinished(run_id=self.run_id, status=status, **self._counts()))
        if self._worker is not None:
            try:
                self._worker.close()
            except Exception:
                pass
        if self._pool is not None:
            try:
                self._pool.shutdown(wait=False, cancel=True)
            except Exception:
                pass
        self.store.close()
        self._tmp.cleanup()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def export(self, path: str | os.PathLike, *, comparisons: dict | None = None) -> None:
        """Write every job to `path` (.csv, .json, .md). `comparisons`: from comparisons(), when the caller
        already has them (a bootstrap per variant and command: worth computing once for several exports)."""
        from .exporters import export_results

        with self._lock:
            results = list(self.jobs.values())
        export_results(
            path, results, environment=self.environment(),
            run=self.store.run_info(self.run_id) if self.run_id is not None else None,
            comparisons=self.comparisons(results) if comparisons is None else comparisons,
            min_effect=self.config.min_effect,
        )

    def comparisons(self, results: list[JobResult] | None = None) -> dict:
        """Every finished variant (and the torch reference) against the baseline of the same command:
        {(target, command, column): compare.Comparison}."""
        from .compare import compare_results

        with self._lock:
            results = list(self.jobs.values()) if results is None else results
        return compare_results(results, min_effect=self.config.min_effect, seed=self.config.seed)

    def environment(self) -> dict:
        """Host, CPU, GPU, compiler and torch versions (collected in the background since construction)."""
        self._environment_thread.join()
        return self._environment

    def _collect_environment(self) -> None:
        from .environment import collect_environment

        try:
            version = self._cache.compiler_version  # remembered in the cache per compiler build
        except Exception:  # noqa: BLE001 - the environment is best effort
            version = None
        self._environment = collect_environment(self.target.name, compiler_version=version)

    # ------------------------------------------------------------------ internals: state
    def _busy(self) -> bool:
        with self._lock:
            return bool(self._queued) or any(self.jobs[j].status not in FINAL_STATUSES for j in self._active)

    def _reset(self, result: JobResult) -> None:
        for name in ("error", "stats", "block_k", "warmup_calls", "noise_reason", "host_load", "numerics",
                     "reproducer", "started_at", "finished_at"):
            setattr(result, name, None)
        result.samples_us = []
        result.noisy = False
        result.status = QUEUED
        job = self._plan[result.job_id]
        job.cancelled = False
        job.load_cpu_s = job.load_wall_s = 0.0

    def _ensure_run(self) -> None:
        if self.run_id is not None:
            return
        env = self.environment()
        self.run_id = self.store.start_run(
            command_line=self.config.command_line or " ".join(shlex.quote(a) for a in sys.argv),
            target=self.target.name,
            config=_config_dict(self.config, self.variants),
            environment=env,
        )
        for variant in self.variants:
            self._register_variant(variant)
        self._emit(ev.RunStarted(run_id=self.run_id, total_jobs=len(self.jobs)))

    def _register_variant(self, variant: Variant) -> None:
        if self.run_id is None:
            return
        spec_text = "\n".join(Path(s).read_text(errors="replace") for s in variant.tuning_specs) or None
        self.store.register_variant(self.run_id, variant.name, flags=variant.compile_flags(), spec_text=spec_text,
                                    details=variant.describe())

    def _prepare_resume(self, run_id: int | str) -> None:
        if run_id == "last":
            run_id = self.store.last_run_id()
            if run_id is None:
                raise BooError(f"--resume: no run to resume in {self.store.path}")
        self.store.run_info(run_id)  # StoreError (one line) when there is no such run
        self.store.mark_interrupted(run_id)  # repair a run whose process was killed
        done = self.store.finished_job_ids(run_id)
        self._resumed_done_results = {r.job_id: r for r in self.store.load_results(run_id) if r.job_id in done}
        self.store.resume_run(run_id)
        self.run_id = run_id

    def _counts(self) -> dict:
        ok = sum(1 for r in self.jobs.values() if r.status == DONE)
        failed = sum(1 for r in self.jobs.values() if r.status == FAILED)
        return {"ok": ok, "failed": failed}

    def _run_status(self, interrupted: bool) -> str:
        if interrupted:
            return INTERRUPTED
        return FAILED if self._counts()["failed"] else DONE

    def _emit(self, event: ev.Event) -> None:
        if self._listener is None:
            return
        try:
            self._listener(event)
        except Exception as e:  # a front end's bug must not stop a measurement
            print(f"boo-tui: event listener failed: {e!r}", file=sys.stderr)

    def _status(self, result: JobResult, status: str, detail: str | None = None) -> None:
        result.status = status
        self._emit(ev.JobStatus(job_id=result.job_id, status=status, detail=detail))

    def _finish(self, result: JobResult, status: str, *, error: str | None = None) -> None:
        result.status = status
        if error is not None:
            result.error = error
        result.finished_at = time.time()
        self._emit(ev.JobFinished(job_id=result.job_id, result=result))
        self._record(result)

    def _record(self, result: JobResult) -> None:
        if self.run_id is None:
            return
        job = self._plan.get(result.job_id)
        if job is not None and job.command is not None and result.command not in self._registered_commands:
            self._registered_commands.add(result.command)
            sig = job.command.signature
            self.store.register_command(result.command, op=sig.op, func_name=sig.func_name, signature=sig.describe())
        self.store.record_result(self.run_id, result)

    # ------------------------------------------------------------------ internals: the runner
    def _run_loop(self) -> None:
        try:
            while not self._stop.is_set():
                with self._lock:
                    batch = [j for j in self._queued if self.jobs[j].status == QUEUED and not self._plan[j].cancelled]
                    self._queued = []
                    self._active = set(batch)
                if not batch:
                    with self._lock:
                        self._active = set()
                        if not self._queued:
                            self._wake.clear()
                    self._finish_run_if_idle()
                    if not self._wake.wait(timeout=0.2):
                        if self._stop.is_set():
                            return
                    continue
                self._run_batch(batch)
        except Exception as e:  # never die silently: fail what was running and tell the front end
            import traceback

            traceback.print_exc(file=sys.stderr)
            self._emit(ev.Log(level="error", message=f"session runner crashed: {e!r}"))
            with self._lock:
                for job_id in list(self._active) + list(self._queued):
                    r = self.jobs[job_id]
                    if r.status not in FINAL_STATUSES:
                        self._finish(r, FAILED, error=f"internal error: {e!r}")
                self._active = set()
                self._queued = []

    def _finish_run_if_idle(self) -> None:
        """Mark the run done/failed in the DB whenever the session goes idle (a later start reopens it)."""
        if self.run_id is None or self._stop.is_set():
            return
        with self._lock:
            if self._queued or self._active or self._idle_reported:
                return
            self._idle_reported = True
            status = self._run_status(False)
            counts = self._counts()
        self.store.finish_run(self.run_id, status)
        self.store.flush()
        self._emit(ev.RunFinished(run_id=self.run_id, status=status, **counts))

    def _run_batch(self, batch: list[str]) -> None:
        with self._lock:
            self._idle_reported = False
        iree_jobs = [j for j in batch if self._plan[j].backend == IREE]
        for job_id in iree_jobs:
            self._submit_compile(job_id)
        groups = self._groups(batch)
        if self.target.kind == "cpu":
            # CPU discipline: no compile may run beside a measurement.
            for job_id in iree_jobs:
                self._await_compile(job_id)
        for group in groups:
            if self._stop.is_set():
                return
            for job_id in group:
                if self._plan[job_id].backend == IREE:
                    self._await_compile(job_id)
            if self.target.kind == "cpu":
                self.store.flush()  # our own DB writes of the last group must not run beside this measurement
            self._measure_group(group)

    def _groups(self, batch: list[str]) -> list[list[str]]:
        """Jobs of the same command (its variants and backends) form a group measured interleaved."""
        groups: dict[str, list[str]] = {}
        for job_id in batch:
            groups.setdefault(self.jobs[job_id].command, []).append(job_id)
        return list(groups.values())

    # compile -----------------------------------------------------------------
    def _ensure_pool(self):
        if self._pool is None:
            from .compile.pool import CompilePool

            self._pool = CompilePool(
                workers=self.config.compile_workers, timeout_s=self.config.compile_timeout_s, cache=self._cache
            )
        return self._pool

    def _submit_compile(self, job_id: str) -> None:
        job, result = self._plan[job_id], self.jobs[job_id]
        if job.artifact is not None or job.cancelled:
            return
        from .compile.pool import lookup_cached

        pool = self._ensure_pool()
        # A cache hit costs a few file reads and no export: cached kernels never wait for a worker.
        hit = lookup_cached(job.command.signature, self.target, job.variant, cache=self._cache)
        if hit is not None:
            job.artifact = hit
            self._compiled(result, hit)
            return
        self._status(result, EXPORTING, "waiting for a compile worker")
        job.future = pool.submit(job.command.signature, self.target, job.variant,
                                 on_start=lambda: self._status(result, COMPILING))

    def _await_compile(self, job_id: str) -> None:
        job, result = self._plan[job_id], self.jobs[job_id]
        if job.artifact is not None or job.future is None or result.status in FINAL_STATUSES:
            return
        while True:
            if job.cancelled or self._stop.is_set():
                job.future.cancel()
                return
            try:
                artifact = job.future.result(timeout=0.2)
                break
            except TimeoutError:
                continue
            except CompileError as e:
                result.compile = CompileInfo(error=e.stderr or str(e), command=list(e.command))
                self._emit(ev.CompileFinished(job_id=job_id, ok=False, error=str(e)))
                self._finish(result, FAILED, error=f"compile failed: {first_line(str(e))}")
                return
            except Exception as e:  # a cancelled future, a broken pool: a failed job, never a dead session
                if job.future.cancelled():
                    return
                self._emit(ev.CompileFinished(job_id=job_id, ok=False, error=repr(e)))
                self._finish(result, FAILED, error=f"compile failed: {first_line(str(e) or repr(e))}")
                return
        job.artifact = artifact
        self._compiled(result, artifact)

    def _compiled(self, result: JobResult, artifact) -> None:
        result.compile = artifact.to_compile_info()
        self._emit(ev.CompileFinished(
            job_id=result.job_id, ok=True, seconds=result.compile.seconds, cache_hit=result.compile.cache_hit))
        self._status(result, CACHED)

    def _spec_applied(self, result: JobResult, artifact) -> bool | None:
        from .variants import spec_applied

        baseline = next(
            (self._plan[j].artifact for j, r in self.jobs.items()
             if r.command == result.command and r.backend == IREE and self._plan[j].variant.is_baseline
             and self._plan[j].artifact is not None),
            None,
        )
        check = spec_applied(
            artifact.configs_dir, getattr(baseline, "configs_dir", None), self._plan[result.job_id].variant.tuning_specs
        )
        if not check.applied:
            self._emit(ev.Log(job_id=result.job_id, level="warning",
                              message=f"{result.func_name} [{result.variant}]: {check.detail}"))
        return check.applied

    # measure -----------------------------------------------------------------
    def _ensure_worker(self):
        if self._worker is None:
            from .bench.worker import BenchWorker

            self._worker = BenchWorker(threads=self.config.threads)
        return self._worker

    def _measure_group(self, group: list[str]) -> None:
        from .bench.worker import BenchCancelled

        live = [j for j in group if self._measurable(j)]
        if not live:
            return
        worker = self._ensure_worker()
        rounds = 1 if len(live) == 1 else max(1, self.config.rounds)
        baseline_id = next((j for j in live if self._plan[j].backend == IREE and self._plan[j].variant.is_baseline), None)
        # The baseline goes first so the variants' numerics can be checked against its outputs.
        order = ([baseline_id] if baseline_id else []) + [j for j in live if j != baseline_id]
        for r in range(rounds):
            last = r == rounds - 1
            for job_id in order:
                if not self._measurable(job_id) or self._stop.is_set():
                    continue
                job, result = self._plan[job_id], self.jobs[job_id]
                chunk = _chunk(job.iters, rounds, r)
                if chunk <= 0 and not last:
                    continue
                if result.status != MEASURING:
                    result.started_at = result.started_at or time.time()
                    self._status(result, MEASURING)
                spec = self._bench_spec(job_id, max(chunk, 1), rounds, last, baseline_id, first=r == 0)
                chunk_start = len(result.samples_us)
                with self._lock:  # cancel() and close() set the event of the measurement in flight
                    self._current = job_id
                    self._measure_cancel = threading.Event()
                    if job.cancelled or self._stop.is_set():
                        self._measure_cancel.set()
                try:
                    outcome = worker.run(spec, on_samples=self._sample_sink(job_id), cancel=self._measure_cancel)
                except BenchCancelled:
                    self._end_stopped(result)
                    continue
                except BooError as e:  # BenchFailed (the kernel raised, crashed or hung) and the like
                    self._finish(result, FAILED, error=first_line(str(e)))
                    continue
                finally:
                    with self._lock:
                        self._current = None
                if job.cancelled or self._stop.is_set():
                    self._end_stopped(result)
                    continue
                self._absorb(result, outcome, last, chunk_start)
        for job_id in order:
            result = self.jobs[job_id]
            if result.status == MEASURING:
                self._complete(job_id)
        if len(group) > 1:
            self._emit_comparisons(self.jobs[group[0]].command)

    def _emit_comparisons(self, command: str) -> None:
        """The verdicts of one command's columns, as the exports will give them (same function, same settings)."""
        with self._lock:
            results = [r for r in self.jobs.values() if r.command == command]
        comparisons = self.comparisons(results)
        self._emit(ev.ComparisonsUpdated(
            target=self.target.name, command=command,
            comparisons={label: c for (_, _, label), c in comparisons.items()}))

    def _end_stopped(self, result: JobResult) -> None:
        """A measurement stopped on request: cancelled by the user, or interrupted by the session closing."""
        if result.status not in FINAL_STATUSES:
            stopping = self._stop.is_set()
            self._finish(result, INTERRUPTED if stopping else CANCELLED,
                         error="interrupted" if stopping else "cancelled")

    def _measurable(self, job_id: str) -> bool:
        job, result = self._plan[job_id], self.jobs[job_id]
        if job.cancelled or result.status in FINAL_STATUSES:
            return False
        return job.backend == TORCH or job.artifact is not None

    def _bench_spec(self, job_id: str, iters: int, rounds: int, last: bool, baseline_id: str | None, *,
                    first: bool = True):
        from .bench.worker import BenchSpec

        job = self._plan[job_id]
        cfg = self.config
        is_baseline = job_id == baseline_id
        verify = cfg.verify_numerics and last and job.backend == IREE
        outputs = None
        compare_with = None
        if verify and is_baseline:
            outputs = os.path.join(self._tmp.name, f"{job_id}.outputs.pt")
        elif verify and baseline_id is not None:
            compare_with = self._plan[baseline_id].outputs_path
        return BenchSpec(
            job_id=job_id,
            backend=job.backend,
            sig=job.command.signature,
            target_name=self.target.name,
            vmfb_path=str(job.artifact.vmfb_path) if job.artifact is not None else None,
            driver=self.target.driver,
            threads=cfg.threads,
            iters=iters,
            min_time_s=(cfg.min_time_s / rounds) if cfg.min_time_s else None,
            max_time_s=cfg.max_time_s / rounds,
            seed=cfg.seed,
            splat_value=cfg.splat_value,
            verify_numerics=verify,
            save_outputs_to=outputs,
            compare_outputs_with=compare_with,
            timeout_s=cfg.bench_timeout_s,
            # the first round warms the kernel up (loading, page faults); a later round only needs to bring
            # it back into the caches after the other jobs of the group ran
            warmup_s=FIRST_WARMUP_S if first else LATER_WARMUP_S,
        )

    def _sample_sink(self, job_id: str):
        result = self.jobs[job_id]
        goal = self._plan[job_id].iters

        def sink(samples: list[float]) -> None:
            result.samples_us.extend(samples)
            self._emit(ev.SamplesAdded(job_id=job_id, samples_us=list(samples), total=len(result.samples_us),
                                       target_count=goal))

        return sink

    def _absorb(self, result: JobResult, outcome, last: bool, chunk_start: int) -> None:
        # Samples streamed through the sink as they came; the harness' own list is authoritative for the chunk.
        streamed = len(result.samples_us) - chunk_start
        result.samples_us[chunk_start:] = list(outcome.samples_us)
        if len(outcome.samples_us) > streamed:
            self._emit(ev.SamplesAdded(job_id=result.job_id, samples_us=list(outcome.samples_us[streamed:]),
                                       total=len(result.samples_us), target_count=self._plan[result.job_id].iters))
        result.block_k = max(result.block_k or 0, int(outcome.block_k or 1))
        result.warmup_calls = (result.warmup_calls or 0) + int(outcome.warmup_calls or 0)
        if outcome.host_load is not None and outcome.wall_s:
            # Over the whole job, not the worst round: a round lasts tens of ms and /proc/stat counts 10 ms
            # ticks, so one round's figure is mostly tick noise; the total over all rounds is not.
            job = self._plan[result.job_id]
            job.load_cpu_s += float(outcome.host_load) * float(outcome.wall_s)
            job.load_wall_s += float(outcome.wall_s)
            result.host_load = job.load_cpu_s / job.load_wall_s
        if last and outcome.numerics is not None:
            result.numerics = outcome.numerics
        if last and outcome.outputs_path:
            self._plan[result.job_id].outputs_path = outcome.outputs_path
        if outcome.truncated:
            self._emit(ev.Log(job_id=result.job_id, level="warning",
                              message=f"{result.func_name} [{result.variant}/{result.backend}]: --max-time stopped "
                                      f"sampling early ({len(result.samples_us)} samples so far)"))

    def _complete(self, job_id: str) -> None:
        from .bench.stats import compute_stats, noise_check

        job, result = self._plan[job_id], self.jobs[job_id]
        sig = job.command.signature
        if not result.samples_us:
            self._finish(result, FAILED, error="no samples were measured")
            return
        result.stats = compute_stats(result.samples_us, flops=sig.flops, bytes_=sig.bytes)
        load = result.host_load if job.load_cpu_s >= HOST_LOAD_RESOLUTION_S else None
        result.noisy, result.noise_reason = noise_check(result.stats, load)
        if job.backend == IREE and job.artifact is not None:
            try:
                from .bench.reproducer import write_reproducer

                result.reproducer = write_reproducer(
                    job.artifact.dir, sig, self.config.seed, self.target.driver, self.config.threads,
                    splat_value=self.config.splat_value,
                )
            except Exception as e:  # a missing reproducer must not lose a measurement
                self._emit(ev.Log(job_id=job_id, level="warning", message=f"reproducer not written: {e}"))
        error = None
        if job.variant.tuning_specs and result.compile is not None:
            result.compile.spec_applied = self._spec_applied(result, job.artifact)
            if result.compile.spec_applied is False:
                error = "spec not applied: the tuning spec matched no dispatch, this is NOT a tuned result"
        if result.numerics is not None and result.numerics.verdict == "fail":
            error = "numerics check failed" + (f"; {error}" if error else "")
        self._finish(result, DONE, error=error)


def warm_imports() -> None:
    """Import now what a run would import lazily (compile pool, benchmark worker client, statistics, comparison,
    exports). Headless runs skip this to start fast; a front end with a UI calls it while it opens, so that no
    import holds the GIL (and freezes the UI) in the middle of a run."""
    import scipy.stats  # noqa: F401  (compare's Mann-Whitney U)

    from . import compare, environment, exporters, variants  # noqa: F401
    from .bench import reproducer, stats, worker  # noqa: F401
    from .compile import cache, pool  # noqa: F401


def _chunk(iters: int, rounds: int, r: int) -> int:
    base = iters // rounds
    return base + (1 if r < iters % rounds else 0)


def _config_dict(cfg: SessionConfig, variants: list[Variant]) -> dict:
    return {
        "target": cfg.target,
        "variants": [v.describe() for v in variants],
        "backends": list(cfg.backends),
        "iters": cfg.iters,
        "min_time_s": cfg.min_time_s,
        "max_time_s": cfg.max_time_s,
        "threads": cfg.threads,
        "seed": cfg.seed,
        "splat_value": cfg.splat_value,
        "verify_numerics": cfg.verify_numerics,
        "rounds": cfg.rounds,
        "min_effect": cfg.min_effect,
        "extra_args": list(cfg.extra_args),
        "tool_version": __version__,
    }
