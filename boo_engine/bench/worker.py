"""Benchmark worker: ONE child process per device that runs measurements, so a kernel that crashes or hangs
costs a failed result, never the caller.

Why a process:
- a kernel can segfault (GPU memory faults, miscompiles) or never return; only a process can be killed;
- the measurement must own its CPU and its runtime state: the child imports torch and IREE once, keeps loaded
  modules warm between jobs, and sets process-global runtime flags (IREE's task topology, torch's thread count)
  before anything else runs;
- the caller (a session thread) keeps streaming samples out while the child measures.

This module is the parent's side. The child's side is `child.py`; what crosses the two one-way pipes is in
`messages.py` (every message about a job carries its sequence number, so late messages of an earlier job are
ignored).

A failure in the job (the kernel raises, a file is missing) is reported by the child, which stays up. A death
(signal, exit) or a hang past the timeout makes the parent kill the child if needed, raise `BenchFailed` and
start a fresh child, so the next `run` works.
"""
from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess

from ..errors import BooError
from ..results import Backend
from ..targets import runtime_driver
from .child import IreeCall, RuntimeCache, _child_main
from .devices import CPU, device_child_main, device_env
from .ireeprof import CAPTURE_TIMEOUT_S, READ_TIMEOUT_S
from .messages import (
    BenchOutcome,
    BenchSpec,
    CancelJob,
    Close,
    FromChild,
    JobCancelled,
    JobDone,
    JobFailed,
    Ready,
    RunJob,
    Samples,
)

__all__ = ["BenchCancelled", "BenchFailed", "BenchOutcome", "BenchSpec", "BenchWorker", "IreeCall", "RuntimeCache",
           "default_timeout_s", "resolve_driver"]

# How long a started child may take to import torch + IREE and say it is ready.
STARTUP_TIMEOUT_S = 120.0
# After cancel is sent, how long the child gets to stop by itself before it is killed.
CANCEL_GRACE_S = 0.5
# How often the parent wakes up to check cancel / timeout while waiting for the child.
_POLL_S = 0.05


class BenchFailed(BooError):
    """A measurement failed: the kernel raised, the worker process died, or it hung past its timeout."""


class BenchCancelled(BooError):
    """The measurement was cancelled by the caller (not a failure of the kernel)."""


def default_timeout_s(spec: BenchSpec) -> float:
    """Generous: a minute for loading, warm-up and numerics, plus twice the measurement bound.

    Without max_time_s the measurement has no bound of its own; allow the minimum time plus one second per
    requested sample (kernels slower than that are unusual enough to need an explicit timeout).
    """
    # device timing may run the kernel once more under IREE's profiler (a process of its own, bounded)
    extra = CAPTURE_TIMEOUT_S + READ_TIMEOUT_S if spec.device_timing else 0.0
    if spec.max_time_s is not None:
        return 60.0 + 2.0 * spec.max_time_s + extra
    return 60.0 + 2.0 * (spec.min_time_s or 0.0) + 1.0 * spec.iters + extra


def resolve_driver(spec: BenchSpec) -> str:
    """The driver the child loads `spec`'s kernel on: `targets.runtime_driver`'s rule (on the CPU, local-sync for
    one thread, local-task otherwise)."""
    return runtime_driver(spec.driver, spec.threads)


@dataclass(frozen=True)
class _Gone:
    """What `_receive` returns once the child is dead (or its pipe broke): never sent by a child."""


@dataclass
class _Child:
    """A started child process and the parent's ends of its two pipes."""

    proc: BaseProcess
    inbox: Connection      # the child's messages to us
    outbox: Connection     # our messages to the child
    ready: bool = False


class BenchWorker:
    """A benchmark child process on one device, replaced transparently after a crash or hang.

    `run` is blocking and meant for one session thread at a time (a lock serialises callers). The child's
    thread count is fixed when it starts (IREE's task topology can only be set once per process), so a spec
    asking for another thread count restarts the child.
    """

    def __init__(self, *, threads: int = 1, start: bool = True, device: str = CPU) -> None:
        """`device`: the one device this worker measures on ("cpu", "cuda:1", "hip:0"; devices.py): its child
        is started seeing only that GPU, and so is every child replacing it."""
        self._ctx = mp.get_context("spawn")
        self._lock = threading.Lock()
        self._threads = threads
        self.device = device
        self._env = device_env(device)
        self._child: _Child | None = None
        self._seq = 0
        if start:
            self._start()

    #: a process of ours on this machine (bench.messages.MeasuringWorker)
    remote = False
    node: str | None = None

    @property
    def pid(self) -> int | None:
        return self._child.proc.pid if self._child is not None else None

    def start(self) -> None:
        """Start the child now if it is not running (a worker made with start=False)."""
        with self._lock:
            if self._child is None:
                self._start()

    def kill_now(self) -> None:
        """SIGKILL the child, taking no lock (Session.kill_children: the lock's holder may be stuck)."""
        pid = self.pid
        if pid:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    # ---- public -------------------------------------------------------------------------------------
    def run(
        self,
        spec: BenchSpec,
        on_samples: Callable[[list[float]], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> BenchOutcome:
        """Measure `spec` in the child. Samples reach `on_samples` in this thread as they arrive.

        Raises BenchFailed (kernel raised, worker died, timeout) or BenchCancelled.
        """
        _check_spec(spec)
        with self._lock:
            child = self._child
            if child is None or spec.threads != self._threads or not child.proc.is_alive():
                child = self._replace(threads=spec.threads)
            try:
                self._wait_ready(child, cancel)
                return self._run_job(child, spec, on_samples, cancel)
            except (BenchFailed, BenchCancelled):
                raise
            except BaseException:
                # The caller's callback raised or we were interrupted mid-job: the child's state is unknown.
                self._replace(threads=self._threads)
                raise

    def close(self) -> None:
        """Stop the child (politely, then by force)."""
        with self._lock:
            self._stop()

    def __enter__(self) -> BenchWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- process management -------------------------------------------------------------------------
    def _start(self) -> _Child:
        to_child_r, to_child_w = self._ctx.Pipe(duplex=False)
        from_child_r, from_child_w = self._ctx.Pipe(duplex=False)
        proc = self._ctx.Process(
            target=device_child_main, args=(self._env, _child_main, to_child_r, from_child_w, self._threads),
            name=f"boo-bench-worker-{self.device}", daemon=True,
        )
        proc.start()
        # Keep only our ends; closing the child's ends here lets EOF signal the child's death.
        to_child_r.close()
        from_child_w.close()
        self._child = _Child(proc=proc, inbox=from_child_r, outbox=to_child_w)
        return self._child

    def _stop(self, *, force: bool = False) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        proc = child.proc
        if not force and proc.is_alive():
            try:
                child.outbox.send(Close())
            except OSError:
                pass
            proc.join(2.0)
        if proc.is_alive():
            proc.kill()
            proc.join(5.0)
        for conn in (child.outbox, child.inbox):
            try:
                conn.close()
            except OSError:
                pass

    def _replace(self, *, threads: int) -> _Child:
        self._stop(force=True)
        self._threads = threads
        return self._start()

    @staticmethod
    def _death_reason(child: _Child) -> str:
        child.proc.join(2.0)
        code = child.proc.exitcode
        if code is None:
            return "worker stopped responding"
        if code < 0:
            try:
                return f"worker died with {signal.Signals(-code).name}"
            except ValueError:
                return f"worker died with signal {-code}"
        return f"worker exited with status {code}"

    def _wait_ready(self, child: _Child, cancel: threading.Event | None) -> None:
        if child.ready:
            return
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if cancel is not None and cancel.is_set():
                raise BenchCancelled("cancelled")
            msg = self._receive(child, _POLL_S)
            if isinstance(msg, _Gone):
                reason = self._death_reason(child)
                self._replace(threads=self._threads)
                raise BenchFailed(f"{reason} while starting")
            if isinstance(msg, Ready):
                child.ready = True
                return
            if time.monotonic() > deadline:
                self._replace(threads=self._threads)
                raise BenchFailed(f"worker did not start within {STARTUP_TIMEOUT_S:g} s")

    @staticmethod
    def _receive(child: _Child, timeout: float) -> FromChild | _Gone | None:
        """The next message, None when none came within `timeout`, _Gone when the child is gone."""
        conn, sentinel = child.inbox, child.proc.sentinel
        ready = wait([conn, sentinel], timeout)
        if conn in ready or (sentinel in ready and conn.poll(0)):   # if gone, first drain what it managed to send
            try:
                msg: FromChild = conn.recv()
                return msg
            except (EOFError, OSError):
                return _Gone()
        if sentinel in ready:
            return _Gone()
        return None

    # ---- one job --------------------------------------------------------------------------------------
    def _run_job(self, child: _Child, spec: BenchSpec, on_samples: Callable[[list[float]], None] | None,
                 cancel: threading.Event | None) -> BenchOutcome:
        self._seq += 1
        seq = self._seq
        timeout = spec.timeout_s if spec.timeout_s is not None else default_timeout_s(spec)
        child.outbox.send(RunJob(seq, spec))
        start = time.monotonic()
        cancel_sent: float | None = None
        while True:
            msg = self._receive(child, _POLL_S)
            if isinstance(msg, _Gone):
                reason = self._death_reason(child)
                self._replace(threads=self._threads)
                raise BenchFailed(reason)
            if isinstance(msg, (Samples, JobDone, JobFailed, JobCancelled)) and msg.seq == seq:
                match msg:
                    case Samples(samples_us=batch):
                        if on_samples is not None and batch:
                            on_samples(list(batch))
                    case JobDone(outcome=outcome):
                        return outcome
                    case JobFailed(reason=reason):
                        raise BenchFailed(reason)
                    case JobCancelled():
                        raise BenchCancelled("cancelled")
            # anything else (nothing yet, a message of an earlier job) only lets us check the clock and cancel
            now = time.monotonic()
            if cancel is not None and cancel.is_set() and cancel_sent is None:
                child.outbox.send(CancelJob(seq))
                cancel_sent = now
            if cancel_sent is not None and now - cancel_sent > CANCEL_GRACE_S:
                self._replace(threads=self._threads)   # it did not stop in time (a long call): kill it
                raise BenchCancelled("cancelled")
            if now - start > timeout:
                self._replace(threads=self._threads)
                raise BenchFailed(f"timed out after {timeout:g} s")


def _check_spec(spec: BenchSpec) -> None:
    """Refuse what the child could only fail on, before any process is started for it."""
    if spec.backend not in tuple(Backend):
        raise BenchFailed(f"unknown backend {spec.backend!r} (expected 'iree' or 'torch')")
    if spec.backend == Backend.IREE and not spec.vmfb_path:
        raise BenchFailed("iree backend needs vmfb_path")
    if spec.backend == Backend.IREE and spec.vmfb_path and not os.path.isfile(spec.vmfb_path):
        raise BenchFailed(f"no such artifact: {spec.vmfb_path}")
    if spec.iters < 1:
        raise BenchFailed(f"iters must be >= 1, got {spec.iters}")
    if spec.threads < 1:
        raise BenchFailed(f"threads must be >= 1, got {spec.threads}")
