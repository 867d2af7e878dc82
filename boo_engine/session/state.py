"""What the session's threads share, and the one lock that guards it.

The caller's thread (add, start, cancel, close) and the runner thread (compile, measure, finalise) both read and
change jobs, the queue and the measurement in flight. All of that lives in one `SessionState`, and `lock` is
the only lock over it: whoever changes a job's status, the queue, or which measurement is in flight holds
`lock` (an RLock: a stage may call back into a helper that takes it again). The stages and the facade are
handed this object; none keeps a copy of what is in it.

It also owns the way out to the front ends: `emit` (the listener) and `set_status`.
"""
from __future__ import annotations

import atexit
import contextlib
import gc
import sys
import threading
import time
from collections.abc import Callable, Iterator

from .. import events as ev
from ..results import DONE, FAILED, FINAL_STATUSES, JobResult, Status
from .plan import Plan, PlannedJob

Listener = Callable[[ev.Event], None]

_gc_lock = threading.Lock()
_gc_paused = 0                 # threads inside collector_paused()
_gc_was_enabled = False
_gc_exit_registered = False
#: objects made (net) in a pause from which what is alive at its end is frozen: ~700 lines of a commands file
FREEZE_AFTER = 20_000


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while many long-lived objects are made at once (the jobs of a big
    commands file, their rows): every collection walks every object alive, so 200,000 lines spent 20-25% of their
    time in collections that found nothing (what is made there has no cycles; refcounting frees the rest). Nests,
    and across threads: the collector is on again once the last one leaves, if it was on before, with what is
    alive then frozen (`gc.freeze`) when the pause made FREEZE_AFTER objects or more: the first collection after
    the pause walked every object made in it (1.4 s after 200,000 lines), and each full one after that again; a
    frozen object is still freed by refcounting, only a cycle among them waits. `release_frozen` (a session
    closing) hands them back to the collector. The process leaves with everything frozen (atexit): the
    interpreter's last collections walked every object alive (4.5 s after a 200,000-line file), and an exit frees
    no cycle anyway."""
    global _gc_paused, _gc_was_enabled, _gc_exit_registered
    with _gc_lock:
        if not _gc_exit_registered:
            atexit.register(gc.freeze)
            _gc_exit_registered = True
        if _gc_paused == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_paused += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_paused -= 1
            if _gc_paused == 0 and _gc_was_enabled:
                if gc.get_count()[0] >= FREEZE_AFTER:   # (a pause that made little, a rerun, freezes nothing)
                    gc.freeze()
                gc.enable()


def release_frozen() -> None:
    """What `collector_paused` froze may die now (a session closed): the collector sees it again, so a cycle
    among it is freed."""
    with _gc_lock:
        if _gc_paused == 0:
            gc.unfreeze()


class SessionState:
    def __init__(self, plan: Plan, listener: Listener | None) -> None:
        self.lock = threading.RLock()
        self.plan = plan
        self.queued: list[str] = []          # job ids waiting for the runner
        self.active: set[str] = set()        # job ids of the batch the runner works on
        self.wake = threading.Event()        # set when there is new work for the runner
        self.stop = threading.Event()        # set once, when the session closes
        # The measurements in flight (one per device: session/device_stages.py), job id -> the event it watches:
        # cancel() and close() set it; the measure stage makes a fresh one (under `lock`) for each measurement so
        # that a stale cancel never stops the next one.
        self.in_flight: dict[str, threading.Event] = {}
        self.idle_reported = False           # the run was marked finished since the last batch
        #: some of the run's jobs are only in the database (session/spool.py): a stop ends their rows there
        self.spooled = False
        #: more of them wait to be read back and measured: going idle between two windows does not end the run
        self.spooling = False
        # Why the run stopped by itself (the results database cannot be written, nothing can be compiled into
        # the cache): one line for the front ends. Once set, nothing more is measured or started.
        self.halted: str | None = None
        #: the halt came from the results database (it takes no writes): False when the Ray cluster went away
        self.store_broken = False
        self.halt_reason = ""                # the same, short, for the jobs it leaves unmeasured
        self._listener = listener

    @property
    def jobs(self) -> dict[str, JobResult]:
        return self.plan.jobs

    def job(self, job_id: str) -> PlannedJob:
        return self.plan.planned[job_id]

    def busy(self) -> bool:
        """True while a job is queued or the runner's batch has an unfinished job."""
        with self.lock:
            return bool(self.queued) or any(self.jobs[j].status not in FINAL_STATUSES for j in self.active)

    def wait_idle(self, timeout: float | None = None, poll_s: float = 0.05) -> bool:
        """Wait until no job is queued or running. True when idle, False when `timeout` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.busy():
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(poll_s)
        return True

    def counts(self) -> tuple[int, int]:
        """(done, failed) jobs so far."""
        with self.lock:
            ok = sum(1 for r in self.jobs.values() if r.status == DONE) + self.plan.retired.get(DONE, 0)
            failed = sum(1 for r in self.jobs.values() if r.status == FAILED) + self.plan.retired.get(FAILED, 0)
        return ok, failed

    def halt(self, line: str, reason: str, *, store_broken: bool = True) -> bool:
        """Stop the run (the first call wins): `line` for the front ends, `reason` (short) for the jobs left
        unmeasured. The measurement in flight is stopped and the runner woken, without taking the lock (a store
        thread calls this). True for the first call."""
        if self.halted is not None:
            return False
        self.halt_reason = reason
        self.store_broken = store_broken
        self.halted = line
        self.cancel_measurements()
        self.wake.set()
        return True

    def cancel_measurements(self, *, only_cancelled_jobs: bool = False) -> None:
        """Stop the measurements in flight (on every device), or only those of jobs marked cancelled. Safe
        without the lock (a store thread halting the run): the dict is copied in one step."""
        for job_id, event in list(self.in_flight.items()):
            if not only_cancelled_jobs or self.plan.planned[job_id].cancelled:
                event.set()

    def emit(self, event: ev.Event) -> None:
        if self._listener is None:
            return
        try:
            self._listener(event)
        except Exception as e:  # noqa: BLE001 - a front end's bug must not stop a measurement
            print(f"boo-tui: event listener failed: {e!r}", file=sys.stderr)

    def set_status(self, result: JobResult, status: Status, detail: str | None = None) -> None:
        """Move a job to a non-final status (final ones go through RunRecorder.finish, which stores them)."""
        result.status = status
        self.emit(ev.JobStatus(job_id=result.job_id, status=status, detail=detail))


def halted_error(result: JobResult, reason: str) -> str:
    """What an unfinished job of a halted run says: "not measured" only when it has no sample. A job measuring
    when the Ray head died had 1.25 M samples stored and read "not measured"; its samples are kept, but they are
    no result (the measurement did not finish its rounds)."""
    n = len(result.samples_us)
    if n:
        return f"stopped while measuring ({n:,} samples kept, no result): {reason}"
    return f"not measured: {reason}"
