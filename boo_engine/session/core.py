"""The `Session` facade: the one object both front ends drive.

It builds the parts (plan, shared state, recorder, the compile / measure / finalise stages, the runner) and
forwards the public API to them; the work itself happens in those modules. What stays here is what the
caller's thread does: taking inputs, queueing, cancelling and closing (all quick, under the state lock), plus
the read-side helpers (export, comparisons, environment). No export, compile or measurement ever runs on the
caller's (e.g. the UI's) thread.
"""
from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from .. import events as ev
from ..commands import Command
from ..config import SessionConfig
from ..errors import BooError
from ..results import (
    CANCELLED,
    FAILED,
    FINAL_STATUSES,
    MEASURING,
    QUEUED,
    JobResult,
)
from ..targets import Target
from ..variants import BASELINE, Variant
from .compiling import CompileStage
from .device_stages import DeviceStages
from .finalize import Finalizer, compare_columns, model_lines_of
from .intake import Intake
from .plan import Plan
from .recording import RunRecorder, store_halt_reason
from .runner import Runner
from .setup import join_cluster, run_environment, session_target, tuned_lookup
from .spool import Spool
from .state import Listener, SessionState, collector_paused, release_frozen

if TYPE_CHECKING:
    from ..bench.worker import BenchWorker
    from ..compare import Comparison
    from ..weights import ModelLine

#: how often wait() looks whether the session went idle
WAIT_POLL_S = 0.05
#: how long close() gives the runner to notice it must stop
RUNNER_JOIN_S = 10.0
#: jobs start() hands the store at a time: their rows go in bulk, one transaction (a commit, which may checkpoint
#: the WAL) and a few statements for all. 400,000 rows of a 200,000-line file: 2,000 a time spent 4.8 s of the
#: writer's 12 s in 200 commits (each rewrites the index pages it touched), 10,000-20,000 ~1 s. The price: the
#: chunks in flight (one being written, the next being made) raise the peak of a 20,000-line file 110 -> 133-137
#: MiB (a 200,000-line one's stays ~640 MiB) (benchmarks/bench_many_lines.py). The first chunk is
#: RECORD_FIRST_CHUNK and each next one twice the last, up to RECORD_CHUNK: a file's first rows are in the database
#: as soon as before.
RECORD_CHUNK = 10000
RECORD_FIRST_CHUNK = 2000


class Session:
    """Inputs (commands files, command strings) x variants x backends on one target, as jobs: compiled in a
    process pool through the cache, measured in a benchmark worker process, numerics-checked, stored with
    every raw sample, and reported as events (see events.py) to `listener`."""

    def __init__(self, config: SessionConfig | None = None, listener: Listener | None = None, *,
                 worker: BenchWorker | None = None) -> None:
        """`worker`: a BenchWorker started early (its torch import overlapped the caller's); the session owns it."""
        from ..compile.cache import open_cache
        from ..store import Store, default_db_path

        self.config = config or SessionConfig()
        self.target: Target = session_target(self.config)
        self._plan = Plan(self.target.name, self.config.backends, self.config.iters)
        self._state = SessionState(self._plan, listener)
        self.jobs: dict[str, JobResult] = self._plan.jobs
        self._cache = open_cache(self.config.cache_dir)  # a root that cannot be used: CacheRootError
        #: said once when the cache is not what was asked for (a read-only cache and its overlay)
        self.cache_notice: str | None = self._cache.notice
        if self.cache_notice:
            self._state.emit(ev.Log(level="warning", message=self.cache_notice))
        self._closed = False
        self._stopped = False       # the work stopped (interrupt() or close()): no job runs any more
        self._interrupted = False   # interrupt(): the run ends INTERRUPTED even if it was idle
        self._environment: dict[str, Any] = {}
        self._tmp = tempfile.TemporaryDirectory(prefix="boo-session-")   # (--ray: the cluster, below; None: here)
        self.cluster, pools, workers = join_cluster(self.config, self.target, self._cache, self._state, self._tmp)
        self.store = Store(self.config.db_path or default_db_path(), on_failure=self._store_failed)
        # `iree-compile --version` and friends take ~0.3 s: done while the inputs are parsed.
        self._environment_thread = threading.Thread(target=self._collect_environment, name="boo-env", daemon=True)
        self._environment_thread.start()
        self._recorder = RunRecorder(self.store, self._state, self.config, self.target.name)
        self._intake = Intake(self._plan, self._state, self._recorder, self.config,
                              list(self.config.variants) or [BASELINE])
        if self.config.resume is not None:   # (a resumed run keeps the build it was measured with: its target)
            self._plan.resumed = self._recorder.resume(self.config.resume, self.environment)
        self.target = session_target(self.config)
        cfg, target = self.config, self.target
        self.compile_stage = CompileStage(self._state, self._recorder, cfg, target, self._cache, pools)
        self.compile_stage.tuned = tuned_lookup(target, self.store)
        self._measuring = DeviceStages(self._state, self._recorder, cfg, target, self._tmp.name, worker, workers)
        self._finalizer = Finalizer(self._state, self._recorder, self.config, self.target)
        self._runner = Runner(self._state, self._recorder, self.target, self.compile_stage, self._measuring,
                              self._finalizer)
        #: a run too big to hold: its jobs in the database, measured a window at a time (spool.py)
        self.spool = Spool(self.config, self._state, self._recorder, self._intake, self.environment,
                           self._measuring, self._runner)

    @property
    def failure(self) -> str | None:
        """Why the run stopped by itself (the results database cannot be written), as one line, or None."""
        return self._state.halted

    def _store_failed(self, error: BooError) -> None:
        """The store's writer thread: no more writes. Stop the run (no lock: the caller may be that thread)."""
        if self._state.halt(str(error), store_halt_reason(error)):
            self._state.emit(ev.Log(level="error", message=str(error)))

    @property
    def run_id(self) -> int | None:
        """The run in the store: set by the first start() (or by a resume), None before."""
        return self._recorder.run_id

    # ------------------------------------------------------------------ inputs (intake.py)
    @property
    def variants(self) -> list[Variant]:
        """The session's variants: the configured ones, a resumed run's own, and any added since."""
        return self._intake.variants

    @property
    def driver_flags_note(self) -> str | None:
        """Said once per run, for the first command carrying MIOpenDriver flags that change nothing here."""
        return self._intake.driver_flags_note

    def add_inputs(self, inputs: Sequence[str]) -> list[JobResult]:
        """Commands files and command strings (`Intake.add_inputs`); a bad command string or a missing file
        raises CommandError, a bad line of a file becomes a FAILED job naming file:line."""
        return self._intake.add_inputs(inputs)

    def add_file(self, path: str, extra_args: Sequence[str] = ()) -> list[tuple[str, list[JobResult]]]:
        """Every line of a commands file, as (line text, its jobs)."""
        return list(self._intake.lines(path, extra_args))

    def add_command(self, text: str | Sequence[str], *, source: str | None = None) -> list[JobResult]:
        """One command string; raises CommandError (one line) when it does not parse."""
        return self._intake.add_command(text, source=source)

    def add_resumed_commands(self) -> list[JobResult]:
        """`--resume` given no inputs: the resumed run's own commands, backends, variants and --iter."""
        return self._intake.add_resumed_commands()

    def add_variant(self, variant: Variant) -> list[JobResult]:
        """Add a variant mid-session: it gets a (queued, not started) job for every command so far it applies to."""
        return self._intake.add_variant(variant)

    # ------------------------------------------------------------------ control
    def start(self, job_ids: Iterable[str] | None = None, *, iters: int | None = None,
              min_time_s: float | None = None) -> None:
        """Run the queued jobs (all, or the given ones) in engine threads; returns at once. `iters` / `min_time_s`:
        this measurement's goal (e.g. a tuner's short screening), instead of --iter / --min-time."""
        if self._closed or self._stopped:
            raise BooError("session is closed" if self._closed else "session was interrupted")
        state = self._state
        if state.halted is not None:
            raise BooError(state.halted)
        with state.lock, collector_paused():
            # The worker process starts first: importing torch there (~1 s) overlaps everything below.
            if any(r.status == QUEUED for r in self.jobs.values()):
                self._measuring.ensure_worker()
            if self.run_id is None:
                self._recorder.start_run(self.environment(), self.variants)
            ids = list(job_ids) if job_ids is not None else list(self.jobs)
            if queue_and_store(state, self._recorder, ids, iters, min_time_s):
                self._runner.ensure_running()

    def rerun(self, job_ids: Iterable[str], *, iters: int | None = None, min_time_s: float | None = None,
              fresh: bool = False) -> bool:
        """Measure finished jobs again (compiled kernels reused) and queued ones in the same batch (interleaved).
        `fresh`: in new worker processes, as a new session would; returns whether (a Ray node's is kept)."""
        with self._state.lock:
            renewed = fresh and not self._state.in_flight and self._measuring.fresh_workers()
            ids = requeue_finished(self._state, job_ids)
        self.start(ids, iters=iters, min_time_s=min_time_s)
        return renewed

    def cancel(self, job_ids: Iterable[str] | None = None) -> None:
        """Cancel jobs (all when None): queued ones end CANCELLED at once, the one measuring within moments."""
        state = self._state
        with state.lock:
            ids = list(job_ids) if job_ids is not None else list(self.jobs)
            for job_id in ids:
                job = self._plan.planned.get(job_id)
                result = self.jobs.get(job_id)
                if job is None or result is None or result.status in FINAL_STATUSES:
                    continue
                self._plan.cancel([job_id])
                if result.status != MEASURING:
                    self._recorder.finish(result, CANCELLED, error="cancelled")
            if job_ids is None:
                state.queued.clear()
            state.cancel_measurements(only_cancelled_jobs=True)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until no job is queued or running. True when idle."""
        return self._state.wait_idle(timeout, WAIT_POLL_S)

    def interrupt(self) -> None:
        """Stop now: the user asked the whole run to stop (Ctrl-C, SIGTERM, SIGHUP). Unfinished jobs (the one in
        flight too; not ones cancelled before) and the run end INTERRUPTED, so `--resume` measures them again; the
        jobs stay readable, close() releases the rest. Call it from a normal thread, not a signal handler."""
        self._interrupted = True
        self._stop()

    def kill_children(self) -> None:
        """Last resort (a second Ctrl-C, just before the process exits): SIGKILL the benchmark worker and the
        compile workers with their compilers, taking no lock (the caller may interrupt a thread holding one)."""
        self._measuring.kill_now()
        self.compile_stage.kill_now()

    def close(self) -> None:
        """Stop everything; unfinished jobs are marked interrupted, the run is closed, the DB is flushed.
        Safe to call at any moment and more than once."""
        if self._closed:
            return
        self._closed = True
        self._stop()
        self._measuring.close()
        self.compile_stage.shutdown()
        self.store.close()
        self._tmp.cleanup()
        release_frozen()

    def _stop(self) -> None:
        """Stop the runner, the measurement and the compiles in flight; mark what did not finish INTERRUPTED and
        close the run in the store (once)."""
        if self._stopped:
            return
        self._stopped = True
        state = self._state
        state.stop.set()         # first: a start() storing the rows of a big file holds the lock until it sees this
        was_busy = state.busy()  # work in flight now means the run is interrupted, however the jobs end
        state.cancel_measurements()
        with state.lock:
            self._plan.cancel(list(self._plan.planned))
        state.wake.set()
        self.compile_stage.cancel_all()
        self._runner.join(timeout=RUNNER_JOIN_S)
        with state.lock:
            self._recorder.interrupt_unfinished()
        if self.run_id is not None and (was_busy or not state.idle_reported):
            self._recorder.end_run(self._recorder.run_status(was_busy or self._interrupted))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # ------------------------------------------------------------------ reading
    def command_of(self, job_id: str) -> Command | None:
        """The parsed command a job measures (None for a bad input line)."""
        return self._plan.planned[job_id].command

    def export(self, path: str | os.PathLike[str], *,
               comparisons: dict[tuple[str, str, str], Comparison] | None = None,
               model: list[ModelLine] | None = None) -> None:
        """Write every job to `path` (.csv, .json, .md); `comparisons` / `model`: the caller's, computed once."""
        from ..exporters import export_results

        results = self._results()
        comparisons = self.comparisons(results) if comparisons is None else comparisons
        export_results(path, results, environment=self.environment(),
                       run=self.store.run_info(self.run_id) if self.run_id is not None else None,
                       comparisons=comparisons, min_effect=self.config.min_effect,
                       model=model_lines_of(results, comparisons, self.config) if model is None else model)

    def model_lines(self, results: list[JobResult] | None = None,
                    comparisons: dict[tuple[str, str, str], Comparison] | None = None) -> list[ModelLine]:
        """Every column's model line with the session's settings (`finalize.model_lines_of`); [] without weights."""
        return model_lines_of(self._results(results), comparisons, self.config)

    def comparisons(self, results: list[JobResult] | None = None) -> dict[tuple[str, str, str], Comparison]:
        """Every finished variant (and the torch reference) against the baseline of the same command:
        {(target, command, column): compare.Comparison}."""
        return compare_columns(self._results(results), self.config)

    def _results(self, given: list[JobResult] | None = None) -> list[JobResult]:
        """`given`, or a snapshot of every job taken under the lock."""
        if given is not None:
            return given
        with self._state.lock:
            return list(self.jobs.values())

    #: the machine's peaks the rooflines use (`limits.Peaks`, set on the engine's thread with the first result)
    peaks = property(lambda self: self._finalizer.roofline.peaks)

    def environment(self) -> dict[str, Any]:
        """Host, CPU, GPU, compiler and torch versions (collected in the background since construction)."""
        self._environment_thread.join()
        return self._environment

    def _collect_environment(self) -> None:
        self._environment = run_environment(self.target, self._cache, self._state.emit, self.cluster)


def requeue_finished(state: SessionState, job_ids: Iterable[str]) -> list[str]:
    """rerun()'s work under the state lock: the given jobs that can run again, finished ones reset to QUEUED (and
    said), queued ones as they are (started with the others, in the same batch); bad input lines never."""
    ids = []
    for job_id in job_ids:
        result = state.jobs.get(job_id)
        if result is None or state.job(job_id).command is None:
            continue
        if result.status == QUEUED:
            ids.append(job_id)
        if result.status not in FINAL_STATUSES:
            continue
        state.plan.requeue(job_id)
        ids.append(job_id)
        state.emit(ev.JobStatus(job_id=job_id, status=QUEUED))
    return ids


def queue_and_store(state: SessionState, recorder: RunRecorder, ids: list[str], iters: int | None,
                    min_time_s: float | None) -> bool:
    """start()'s work under the state lock: queue the given jobs that are queued and store their rows (and those
    of bad input lines, failed rows), in chunks growing from RECORD_FIRST_CHUNK to RECORD_CHUNK (each in bulk:
    `record_many`). False when interrupt() stopped it (from another thread, which waits for the lock: storing
    200,000 rows takes seconds): the run never gets the jobs after that."""
    rows: list[JobResult] = []
    chunk = RECORD_FIRST_CHUNK
    for i, job_id in enumerate(ids):
        if state.stop.is_set():
            recorder.record_many(rows)
            state.plan.skipped(ids[i:])
            return False
        result = state.jobs.get(job_id)
        if result is not None and result.status == QUEUED:
            state.job(job_id).prepare(iters, min_time_s)
            state.queued.append(job_id)
            rows.append(result)
        elif result is not None and result.status == FAILED and state.job(job_id).command is None:
            rows.append(result)  # bad input lines are stored as failed rows too
        if len(rows) >= chunk:
            recorder.record_many(rows)
            rows = []
            chunk = min(2 * chunk, RECORD_CHUNK)
    recorder.record_many(rows)
    return True
