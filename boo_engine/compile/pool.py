"""`CompilePool`: many compiles at once in worker processes (compile.worker), through a shared cache; also the
import point of the compile layer's public names (they live in compile.build, .flags, .artifact, .runner).

The pool's workers are spawned processes that each lead their own process group; cancelling a running job kills
the worker with every process under it (procs.kill_tree) and starts a new worker. A dispatch dump
(`submit_dump`) is a job like a compile: same workers, same timeout, same stall detection, same cancel.
"""
from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import CompileError
from ..ops.base import OpSignature
from ..targets import Target
from ..variants import BASELINE, Variant
from . import cache as cache_mod
from .artifact import Artifact, artifact_from_meta
from .build import DEFAULT_TIMEOUT_S, compile_signature, lookup_cached
from .cache import KernelCache
from .compiler_run import STALL_S
from .compiler_run import run_compiler as _run_compiler  # noqa: F401 - the name tests call the runner by
from .dump import dump_dispatches, sweep_dump_leftovers
from .flags import RUN_FLAGS, as_target, compile_flags, run_flags
from .messages import Compiled, CompileRequest, Dumped, DumpRequest, Failed, Request
from .procs import kill_tree
from .worker import COMPILE_NICENESS, PoolJob, Worker

__all__ = [
    "COMPILE_NICENESS",
    "DEFAULT_TIMEOUT_S",
    "RUN_FLAGS",
    "STALL_S",
    "Artifact",
    "CompileCancelled",
    "CompilePool",
    "artifact_from_meta",
    "as_target",
    "compile_flags",
    "compile_signature",
    "dump_dispatches",
    "lookup_cached",
    "run_flags",
]


class CompileCancelled(CompileError):
    """The job was cancelled (CompilePool.cancel_all / shutdown) before it finished."""


class CompilePool:
    """Compiles many kernels at once in worker processes (default: one per core), through a shared cache.

    `submit()` returns a Future[Artifact] (its exception is a CompileError); cached kernels resolve without
    touching a worker. `submit_dump()` returns a Future[list[Path]] of dumped dispatch files. Workers start lazily
    (a run whose kernels are all cached never spawns one, and nothing imports torch beside a CPU measurement), or
    all at once with `prestart=True` (hides the ~1-2 s worker start-up when compiles are certain). A job that
    exceeds `timeout_s` fails; `cancel_all()` fails every queued and running job with CompileCancelled and kills
    running compilers.
    """

    def __init__(self, workers: int | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                 cache: KernelCache | None = None, *, prestart: bool = False):
        self.max_workers = max(1, workers or os.cpu_count() or 1)
        self.timeout_s = timeout_s
        self.cache = cache or cache_mod.default_cache()
        self._ctx = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._pending: list[PoolJob] = []
        self._workers: list[Worker] = []
        self._closed = False
        self._dispatching: PoolJob | None = None
        self._wake_r, self._wake_w = multiprocessing.Pipe(duplex=False)
        self._thread = threading.Thread(target=self._loop, name="boo-compile-pool", daemon=True)
        self._thread.start()
        if prestart:  # start (and warm) every worker now rather than at the first cache miss
            with self._lock:
                self._workers = [Worker(self._ctx, self.cache, self.timeout_s) for _ in range(self.max_workers)]
        # at interpreter exit multiprocessing only SIGTERMs the workers; their iree-compile children would live
        # on, so kill each worker's whole process group
        atexit.register(self._kill_workers)

    # ---- public API ----------------------------------------------------------------------------------
    def submit(self, sig: OpSignature, target: Target | str = "cpu", variant: Variant = BASELINE, *,
               extra_flags: Sequence[str] = (), on_start: Callable[[], None] | None = None
               ) -> concurrent.futures.Future[Artifact]:
        """Queue one compile. `on_start` (optional) is called from the pool's thread when a worker takes it."""
        return self._queue(CompileRequest(sig, as_target(target), variant or BASELINE, tuple(extra_flags)),
                           on_start)

    def submit_dump(self, sig: OpSignature, target: Target | str, out_dir: str | os.PathLike[str],
                    variant: Variant = BASELINE, *, on_start: Callable[[], None] | None = None
                    ) -> concurrent.futures.Future[list[Path]]:
        """Queue a dispatch dump of `sig` into `out_dir/<func_name>/` (compile.dump.dump_dispatches, run by a
        worker under the pool's timeout). The future's result is the list of written files; its exception a
        CompileError, or a VariantError when the folder holds edits a dump would overwrite."""
        return self._queue(DumpRequest(sig, as_target(target), variant or BASELINE, os.fspath(out_dir)), on_start)

    def _queue(self, request: Request, on_start: Callable[[], None] | None) -> concurrent.futures.Future[Any]:
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        job = PoolJob(request, fut, on_start)
        with self._lock:
            if self._closed:
                raise RuntimeError("CompilePool is shut down")
            self._pending.append(job)
        self._wake()
        return fut

    def cancel_all(self) -> None:
        """Fail every queued and running job with CompileCancelled; running compilers are killed."""
        with self._lock:
            pending, self._pending = self._pending, []
            if self._dispatching is not None:
                pending.append(self._dispatching)
            running = [w for w in self._workers if w.job is not None]
            for w in running:
                self._workers.remove(w)
        for job in pending:
            if not job.future.cancel():  # already running (being dispatched)
                _fail(job, _cancelled(job))
        for w in running:
            held, w.job = w.job, None
            w.kill()
            if held is not None:
                self._sweep(held, w)
                _fail(held, _cancelled(held))
        self._wake()

    def shutdown(self, wait: bool = True, *, cancel: bool = False) -> None:
        """Stop accepting jobs; with `cancel`, abandon queued/running ones, else (wait=True) finish them first."""
        if cancel:
            self.cancel_all()
        with self._lock:
            self._closed = True
        self._wake()
        if wait:
            self._thread.join()
        else:
            self.cancel_all()
        atexit.unregister(self._kill_workers)

    def kill_now(self) -> None:
        """SIGKILL every worker's process tree at once, taking no lock: the last thing a process does before it
        exits on a second Ctrl-C (the pool is unusable afterwards)."""
        for w in list(self._workers):
            pid = w.proc.pid
            if pid and w.proc.exitcode is None:
                kill_tree(pid)

    def _kill_workers(self) -> None:
        for w in list(self._workers):
            if w.proc.pid and w.proc.is_alive():
                kill_tree(w.proc.pid)

    def __enter__(self) -> CompilePool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self.shutdown(wait=exc_type is None, cancel=exc_type is not None)

    # ---- the dispatcher thread -----------------------------------------------------------------------
    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send_bytes(b"x")

    def _loop(self) -> None:
        try:
            while True:
                self._dispatch()
                with self._lock:
                    busy = [w for w in self._workers if w.job is not None]
                    if self._closed and not busy and not self._pending:
                        break
                ready = multiprocessing.connection.wait([self._wake_r] + [w.conn for w in busy], timeout=1.0)
                for conn in ready:
                    if conn is self._wake_r:
                        with contextlib.suppress(EOFError, OSError):
                            while self._wake_r.poll():
                                self._wake_r.recv_bytes()
                    else:
                        self._collect(conn)
                self._watchdog()
        finally:
            with self._lock:
                workers, self._workers = self._workers, []
            for w in workers:  # all idle here: nothing to lose, and a torch process can take seconds to exit
                w.kill()

    def _dispatch(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    return
                idle = next((w for w in self._workers if w.job is None), None)
                if idle is None and len(self._workers) >= self.max_workers:
                    return
                job = self._pending.pop(0)
                self._dispatching = job  # visible to cancel_all until a worker holds it
            try:
                self._dispatch_one(job, idle)
            finally:
                with self._lock:
                    self._dispatching = None

    def _dispatch_one(self, job: PoolJob, idle: Worker | None) -> None:
        if not job.future.set_running_or_notify_cancel() or self._resolve_from_cache(job):
            return
        if idle is None:
            try:
                idle = Worker(self._ctx, self.cache, self.timeout_s)
            except Exception as e:  # noqa: BLE001
                _fail(job, CompileError(f"{job.func_name}: cannot start a compile worker: {e}"))
                return
            with self._lock:
                self._workers.append(idle)
        with self._lock:
            if job.future.done():  # cancelled while we were starting the worker
                return
            idle.job = job
            job.started = time.monotonic()
        try:
            idle.conn.send(job.request)
        except (OSError, ValueError) as e:
            idle.job = None
            _fail(job, CompileError(f"{job.func_name}: compile worker unavailable: {e}"))
            self._replace(idle)
            return
        if job.on_start:
            with contextlib.suppress(Exception):
                job.on_start()

    def _resolve_from_cache(self, job: PoolJob) -> bool:
        r = job.request
        if not isinstance(r, CompileRequest):
            return False  # a dump always compiles: its files are not kept in the cache
        try:
            art = lookup_cached(r.sig, r.target, r.variant, cache=self.cache, extra_flags=r.extra_flags)
        except Exception as e:  # noqa: BLE001 - e.g. a spec file vanished: the job fails with that reason
            _fail(job, e)
            return True
        if art is None:
            return False
        _resolve(job, art)
        return True

    def _collect(self, conn: object) -> None:
        """Take the reply on `conn` (a ready connection, found by identity among the workers' ends)."""
        w = next((w for w in self._workers if w.conn is conn), None)
        if w is None or w.job is None:
            return
        job = w.job
        try:
            reply = w.conn.recv()
        except (EOFError, OSError):
            code = w.proc.exitcode
            w.job = None
            self._replace(w)
            self._sweep(job, w)
            _fail(job, CompileError(f"{job.func_name}: compile worker died (exit {code})"))
            return
        w.job = None
        if isinstance(reply, Compiled):
            _resolve(job, reply.artifact)
        elif isinstance(reply, Dumped):
            _resolve(job, reply.paths())
        elif isinstance(reply, Failed):
            _fail(job, reply.error())
        else:
            _fail(job, CompileError(f"{job.func_name}: compile worker sent {type(reply).__name__}"))

    def _watchdog(self) -> None:
        """Safety net above the per-compile timeout (which the worker enforces itself): an export that hangs."""
        limit = self.timeout_s * 1.5 + 60
        now = time.monotonic()
        for w in list(self._workers):
            if w.job is not None and now - w.job.started > limit:
                job, w.job = w.job, None
                self._replace(w)
                self._sweep(job, w)
                _fail(job, CompileError(f"{job.func_name}: compile job exceeded {limit:g} s and was killed"))

    def _sweep(self, job: PoolJob, w: Worker) -> None:
        """A worker killed mid-job leaves its staging (or dump) folder behind: remove it (the worker is dead)."""
        with contextlib.suppress(Exception):
            if isinstance(job.request, DumpRequest):
                if w.proc.pid:
                    sweep_dump_leftovers(w.proc.pid)
            else:
                self.cache.sweep_orphans(job.func_name)

    def _replace(self, w: Worker) -> None:
        with self._lock:
            if w in self._workers:
                self._workers.remove(w)
        w.kill()


def _cancelled(job: PoolJob) -> CompileCancelled:
    return CompileCancelled(f"{job.func_name}: {job.request.what} cancelled")


def _resolve(job: PoolJob, result: Artifact | list[Path]) -> None:
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        job.future.set_result(result)


def _fail(job: PoolJob, exc: BaseException) -> None:
    if not job.future.done():
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            job.future.set_exception(exc)
