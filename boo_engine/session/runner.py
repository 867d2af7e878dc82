"""The runner thread: takes the queued jobs as a batch, and drives them through the stages.

For each batch: submit every IREE compile, then measure the batch group by group (a group is one command's
jobs: its variants and backends, measured interleaved on one device), each group's compiles awaited just before
it, and finalise each measured job. With several devices (`--devices`) the groups are spread over them, a free
device taking the next group (session/devices.py). When the queue runs dry the run is marked finished in the
store (a later start() reopens it).

CPU discipline: on the `cpu` target nothing else runs while a measurement runs: all compiles of a batch finish
before its first measurement, our own pending DB writes are flushed before each group, and measurements run
one at a time.

The runner never dies silently: a crash fails what it was running and is reported as an error Log.
A halted run (`state.halt`: the results database cannot be written) measures nothing more: every job it had
not finished ends INTERRUPTED (not measured, so not failed), for --resume to pick up.
"""
from __future__ import annotations

import sys
import threading

from .. import events as ev
from ..results import FAILED, FINAL_STATUSES, INTERRUPTED, IREE, MEASURING, QUEUED, RunStatus, Status
from ..targets import Target
from .compiling import CompileStage
from .device_stages import DeviceStages, command_groups
from .finalize import Finalizer
from .measuring import MeasureStage
from .recording import RunRecorder, store_halt_reason
from .state import SessionState, halted_error

#: how often an idle runner looks whether the session is closing
IDLE_POLL_S = 0.2


class Runner:
    def __init__(self, state: SessionState, recorder: RunRecorder, target: Target, compiling: CompileStage,
                 measuring: DeviceStages, finalizer: Finalizer) -> None:
        self._state = state
        self._recorder = recorder
        self._target = target
        self._compiling = compiling
        self._measuring = measuring
        self._finalizer = finalizer
        self._thread: threading.Thread | None = None

    def ensure_running(self) -> None:
        """Start the runner thread unless it runs (call with the state lock held, after queueing)."""
        if self._thread is None or not self._thread.is_alive():
            self._state.stop.clear()
            self._thread = threading.Thread(target=self._loop, name="boo-session", daemon=True)
            self._thread.start()
        self._state.wake.set()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    def _loop(self) -> None:
        state = self._state
        try:
            while not state.stop.is_set():
                if state.halted is not None:
                    self._interrupt_unfinished()
                    if not state.wake.wait(timeout=IDLE_POLL_S) and state.stop.is_set():
                        return
                    state.wake.clear()
                    continue
                with state.lock:
                    batch = [j for j in state.queued
                             if state.jobs[j].status == QUEUED and not state.job(j).cancelled]
                    state.queued = []
                    state.active = set(batch)
                if not batch:
                    with state.lock:
                        state.active = set()
                        if not state.queued:
                            state.wake.clear()
                    self._finish_run_if_idle()
                    if not state.wake.wait(timeout=IDLE_POLL_S) and state.stop.is_set():
                        return
                    continue
                self._run_batch(batch)
        except Exception as e:  # noqa: BLE001 - never die silently: fail what was running and tell the front end
            import traceback

            traceback.print_exc(file=sys.stderr)
            state.emit(ev.Log(level="error", message=f"session runner crashed: {e!r}"))
            with state.lock:
                self._end_unfinished(FAILED, f"internal error: {e!r}")

    def _interrupt_unfinished(self) -> None:
        """The run halted: the jobs it had not finished were not measured, and end INTERRUPTED with the reason."""
        state = self._state
        with state.lock:
            self._end_unfinished(INTERRUPTED, state.halt_reason, halted=True)
            idle_reported, state.idle_reported = state.idle_reported, True
        if not idle_reported:
            self._recorder.end_run(RunStatus.INTERRUPTED)

    def _end_unfinished(self, status: Status, error: str, *, halted: bool = False) -> None:
        """Every job of the batch in hand and of the queue that is not final ends `status` with `error` (`halted`:
        the reason the run stopped, said as `halted_error` says it); the runner is left with nothing to do.
        Called with the state lock held."""
        state = self._state
        for job_id in list(state.active) + list(state.queued):
            r = state.jobs[job_id]
            if r.status not in FINAL_STATUSES:
                self._recorder.finish(r, status, error=halted_error(r, error) if halted else error)
        state.active = set()
        state.queued = []

    def _finish_run_if_idle(self) -> None:
        """Mark the run done/failed in the DB whenever the session goes idle (a later start reopens it)."""
        state = self._state
        if self._recorder.run_id is None or state.stop.is_set() or state.spooling:
            return
        with state.lock:
            if state.queued or state.active or state.idle_reported:
                return
            state.idle_reported = True
            status = self._recorder.run_status(False)
            counts = state.counts()
        self._recorder.end_run(status, counts=counts, flush=True)

    def _run_batch(self, batch: list[str]) -> None:
        state = self._state
        with state.lock:
            state.idle_reported = False
        iree_jobs = [j for j in batch if state.job(j).backend == IREE]
        for job_id in iree_jobs:
            if state.stop.is_set():   # (a batch of 400,000 jobs takes seconds to submit: a stop is not kept waiting)
                return
            self._compiling.submit(job_id)
        groups = command_groups(batch, {j: state.jobs[j].command for j in batch})
        if self._target.kind == "cpu":
            # CPU discipline: no compile may run beside a measurement.
            for job_id in iree_jobs:
                self._compiling.await_(job_id)
        self._measuring.run(groups, self._run_group, self._group_failed)

    def _run_group(self, stage: MeasureStage, group: list[str]) -> None:
        """One group on `stage`'s device: its compiles awaited, measured, finalised (a device's thread)."""
        state = self._state
        for job_id in group:
            if state.job(job_id).backend == IREE:
                self._compiling.await_(job_id)
        if self._target.kind == "cpu":
            self._flush()  # our own DB writes of the last group must not run beside this measurement
        self._measure(stage, group)

    def _group_failed(self, group: list[str], error: BaseException) -> None:
        """A bug hit one group: its unfinished jobs fail with it, said as an error Log; the device goes on."""
        import traceback

        traceback.print_exception(error, file=sys.stderr)
        self._state.emit(ev.Log(level="error", message=f"measuring crashed: {error!r}"))
        with self._state.lock:
            for job_id in group:
                r = self._state.jobs[job_id]
                if r.status not in FINAL_STATUSES:
                    self._recorder.finish(r, FAILED, error=f"internal error: {error!r}")

    def _flush(self) -> None:
        from ..store import StoreWriteError

        try:
            self._recorder.store.flush()
        except StoreWriteError as e:   # the writer told the session already; the batch loop sees the halt
            self._state.halt(str(e), store_halt_reason(e))

    def _measure(self, stage: MeasureStage, group: list[str]) -> None:
        """Measure one group on `stage`'s device, finalise its jobs, then publish the command's verdicts (a job
        re-run alone changes them too)."""
        order = stage.measure_group(group)
        if not order or self._state.halted is not None:   # halted: its unfinished jobs end interrupted
            return
        for job_id in order:
            if self._state.jobs[job_id].status == MEASURING:
                self._finalizer.complete(job_id)
        self._finalizer.publish_comparisons(self._state.jobs[group[0]].command)

