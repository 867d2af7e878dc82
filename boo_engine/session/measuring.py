"""The measure stage: one group of jobs (a command's variants and backends) measured in the benchmark worker.

Owns the benchmark worker process (started on first need unless the caller handed one in) and how a group is
measured:
- interleaved: with several jobs, each job's iterations are split over `rounds` rounds and every round measures
  each job in turn (A B A B ...), so a drift of the machine (clock, heat, other load) hits all columns alike;
- baseline first in the first round (it saves its outputs there, for the variants' numerics checks in the last),
  then the order rotates round by round; every round of a CPU job is a fresh placement of its inputs;
- one measurement at a time on its device, cancellable: the measurement in flight watches its event in
  `state.in_flight`, which cancel() and close() set.

One stage per device (session/device_stages.py spreads the groups over them); each owns its worker and records the
device in every result it measures (`JobResult.device`).

Samples stream to the front ends as the worker sends them (`SamplesAdded`). What a measurement leaves (samples,
block size, host load, numerics, saved outputs) is absorbed into the job here; turning it into a final result
is finalize.py's job.

The worker module is imported lazily: it is the one that talks to the torch-importing child process.
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import events as ev
from ..config import SessionConfig
from ..errors import BooError, ClusterLost, first_line
from ..results import (
    CACHED,
    CANCELLED,
    FAILED,
    FINAL_STATUSES,
    INTERRUPTED,
    IREE,
    MEASURING,
    QUEUED,
    TORCH,
    JobResult,
)
from ..targets import Target
from .compiling import cluster_lost
from .recording import RunRecorder
from .state import SessionState, halted_error

if TYPE_CHECKING:
    from ..bench.messages import BenchOutcome, BenchSpec, MeasuringWorker


class GroupMoved(BooError):
    """The device's worker was lost mid-group and the group goes to another device (session/device_stages.py)."""


#: Warm-up (discarded) before the first samples of a job, and before each later interleaving round of it.
FIRST_WARMUP_S = 0.1
LATER_WARMUP_S = 0.02


class MeasureStage:
    def __init__(self, state: SessionState, recorder: RunRecorder, config: SessionConfig, target: Target,
                 scratch_dir: str, worker: MeasuringWorker | None = None, *, device: str = "cpu") -> None:
        """`scratch_dir`: where baselines save their outputs for the variants' numerics checks. `worker`: one the
        caller started early for `device`; this stage owns it from now on. `device`: where this stage measures
        ("cpu", "cuda:1"; bench/devices.py)."""
        self._state = state
        self._recorder = recorder
        self._config = config
        self._target = target
        self._scratch_dir = scratch_dir
        self._worker = worker
        self.device = device
        #: set by DeviceStages: may a group whose worker was lost move to another device? (Ray nodes)
        self.move_lost: Callable[[list[str], str], bool] | None = None

    def ensure_worker(self) -> MeasuringWorker:
        """Start the worker now (its torch import, ~1 s, then overlaps the compiles)."""
        if self._worker is None:
            from ..bench.worker import BenchWorker

            self._worker = BenchWorker(threads=self._config.threads, device=self.device)
        return self._worker

    def fresh_worker(self) -> bool:
        """The next measurement in a new benchmark process (a new heap: another placement of everything, the way
        a later session would measure). Only between measurements; False for a Ray node's worker, kept."""
        if self._worker is None:
            return True
        if self._worker.remote:   # a Ray actor: the node's, not ours to replace
            return False
        self.close()
        self._worker = None
        return True

    @property
    def node(self) -> str | None:
        """The cluster node this stage measures on (a Ray worker's), None when local."""
        return self._worker.node if self._worker is not None else None

    def close(self) -> None:
        if self._worker is not None:
            try:
                self._worker.close()
            except Exception:  # noqa: BLE001 - closing: a dead worker is as good as a closed one
                pass

    def kill_now(self) -> None:
        """SIGKILL the worker process, taking no lock (see Session.kill_children)."""
        if self._worker is not None:   # (a Ray actor: Ray kills it)
            self._worker.kill_now()

    def measurable(self, job_id: str) -> bool:
        job, result = self._state.job(job_id), self._state.jobs[job_id]
        if job.cancelled or result.status in FINAL_STATUSES:
            return False
        return job.backend == TORCH or job.artifact is not None

    def measure_group(self, group: list[str]) -> list[str]:
        """Measure the group's measurable jobs; returns them in the order they were measured (baseline first),
        empty when none could be measured. Jobs still MEASURING afterwards have all their samples."""
        state = self._state
        live = [j for j in group if self.measurable(j)]
        if not live:
            return []
        worker = self.ensure_worker()
        # Several rounds even for a lone job: each round is a fresh placement of the inputs on the CPU
        # (bench/placement.py) and a later moment of the machine, and the comparisons take their confidence from
        # the rounds (compare.py); never more rounds than iterations.
        rounds = max(1, min(self._config.rounds, min(state.job(j).iters for j in live)))
        baseline_id = next((j for j in live if state.job(j).is_iree_baseline), None)
        # The baseline goes first in the first round: it saves its outputs there, and the variants' numerics are
        # checked against them in the last round. The order then rotates round by round, so no column is always
        # the one measured right after another (an A/A variant measured always second read 4-7% "slower").
        order = ([baseline_id] if baseline_id else []) + [j for j in live if j != baseline_id]
        for r in range(rounds):
            shift = r % len(order)
            for job_id in order[shift:] + order[:shift]:
                if self.measurable(job_id) and not self._stopping():
                    self._measure_round(worker, group, job_id, r, rounds, baseline_id)
        return order

    def _measure_round(self, worker: MeasuringWorker, group: list[str], job_id: str, r: int, rounds: int,
                       baseline_id: str | None) -> None:
        """Round `r` of one job: a chunk of its samples in the worker (its numerics in the round that checks them).
        A failure ends the job; a stop ends it interrupted; a lost Ray node moves the group (GroupMoved)."""
        from ..bench.worker import BenchCancelled

        state = self._state
        last = r == rounds - 1
        job, result = state.job(job_id), state.jobs[job_id]
        chunk = chunk_of(job.iters, rounds, r)
        if chunk <= 0 and not last:
            return
        if result.status != MEASURING:
            result.started_at = result.started_at or time.time()
            result.device = self.device
            state.set_status(result, MEASURING)
        spec = bench_spec(state, self._config, self._target, self._scratch_dir, job_id, max(chunk, 1),
                          rounds, last, baseline_id, first=r == 0, placement=r)
        chunk_start = len(result.samples_us)
        with state.lock:  # cancel() and close() set the event of the measurement in flight
            cancel = state.in_flight[job_id] = threading.Event()
            if job.cancelled or self._stopping():
                cancel.set()
        try:
            outcome = worker.run(spec, on_samples=self._sample_sink(job_id), cancel=cancel)
        except BenchCancelled:
            self._end_stopped(result)
            return
        except ClusterLost as e:   # the Ray cluster went away: the run stops, interrupted
            cluster_lost(state, e)
            self._end_stopped(result)
            return
        except BooError as e:  # BenchFailed (the kernel raised, crashed or hung) and the like
            lost = getattr(e, "node_alive", None) is not None   # a Ray actor died (WorkerLost)
            if lost and self.move_lost is not None and not (job.cancelled or state.stop.is_set()) \
                    and self.move_lost(group, str(e)):
                self._reset(group)   # measured again, all of it, on another node
                raise GroupMoved(str(e)) from None
            if job.cancelled or state.stop.is_set():  # e.g. the worker killed while stopping: not a failure
                self._end_stopped(result)
            else:
                self._recorder.finish(result, FAILED, error=first_line(str(e)))
            return
        finally:
            with state.lock:
                state.in_flight.pop(job_id, None)
        if job.cancelled or self._stopping():
            self._end_stopped(result)
            return
        result.node = self.node or result.node
        self._absorb(result, outcome, last, chunk_start)

    def _reset(self, group: list[str]) -> None:
        """The group's unfinished jobs as they were before this device measured them: an interleaved group is
        measured on ONE device, so what this one took is dropped when another measures the group."""
        state = self._state
        for job_id in group:
            job, result = state.job(job_id), state.jobs[job_id]
            if result.status in FINAL_STATUSES:
                continue
            result.clear_measurement()
            job.load_cpu_s = job.load_wall_s = job.steal_cpu_s = 0.0
            job.outputs_path = None    # a baseline's saved outputs lived on the lost node
            state.set_status(result, CACHED if job.backend == IREE else QUEUED, "moved to another node")

    def _stopping(self) -> bool:
        """The session is closing, or the run halted (the results database cannot be written)."""
        return self._state.stop.is_set() or self._state.halted is not None

    def _end_stopped(self, result: JobResult) -> None:
        """A measurement stopped on request: cancelled by the user, or interrupted by the session closing or
        the run halting."""
        if result.status not in FINAL_STATUSES:
            halted = self._state.halted
            if halted is not None:
                self._recorder.finish(result, INTERRUPTED, error=halted_error(result, self._state.halt_reason))
                return
            stopping = self._state.stop.is_set()
            self._recorder.finish(result, INTERRUPTED if stopping else CANCELLED,
                                  error="interrupted" if stopping else "cancelled")

    def _sample_sink(self, job_id: str) -> Callable[[list[float]], None]:
        """Where the worker's sample batches go, in the runner thread, as they arrive."""
        result = self._state.jobs[job_id]
        goal = self._state.job(job_id).iters
        emit = self._state.emit

        def sink(samples: list[float]) -> None:
            result.sample_lists()[0].extend(samples)
            emit(ev.SamplesAdded(job_id=job_id, samples_us=list(samples), total=len(result.samples_us),
                                 target_count=goal))

        return sink

    def _absorb(self, result: JobResult, outcome: BenchOutcome, last: bool, chunk_start: int) -> None:
        job = self._state.job(result.job_id)
        # Samples streamed through the sink as they came; the harness' own list is authoritative for the chunk.
        samples, cpu, rounds = result.sample_lists()
        streamed = len(samples) - chunk_start
        samples[chunk_start:] = list(outcome.samples_us)
        if outcome.samples_us:
            rounds.append(len(outcome.samples_us))
        # the thread's CPU time per sample, only while every round so far had it (parallel to samples_us)
        if outcome.cpu_us is not None and len(cpu) == chunk_start:
            cpu.extend(outcome.cpu_us)
        else:
            cpu.clear()
        if len(outcome.samples_us) > streamed:
            self._state.emit(ev.SamplesAdded(job_id=result.job_id, samples_us=list(outcome.samples_us[streamed:]),
                                             total=len(result.samples_us), target_count=job.iters))
        result.block_k = max(result.block_k or 0, int(outcome.block_k or 1))
        result.warmup_calls = (result.warmup_calls or 0) + int(outcome.warmup_calls or 0)
        if outcome.host_load is not None and outcome.wall_s:
            # Over the whole job, not the worst round: a round lasts tens of ms and /proc/stat counts 10 ms
            # ticks, so one round's figure is mostly tick noise; the total over all rounds is not.
            job.load_cpu_s += float(outcome.host_load) * float(outcome.wall_s)
            job.load_wall_s += float(outcome.wall_s)
            result.host_load = job.load_cpu_s / job.load_wall_s
            if outcome.steal is not None:
                job.steal_cpu_s += float(outcome.steal) * float(outcome.wall_s)
                result.steal = job.steal_cpu_s / job.load_wall_s
        result.cache_mode = outcome.cache_mode
        result.throttled = result.throttled or outcome.throttled
        if outcome.device_detail is not None:
            before = (result.device_detail or {}).get("gpu_state")
            result.device_detail = {**(result.device_detail or {}), **outcome.device_detail}
            if before is not None:   # the state over every round, not the last round's
                from ..bench.gpu_timing import merge_gpu_state

                result.device_detail["gpu_state"] = merge_gpu_state(before, outcome.device_detail.get("gpu_state"))
        if last and outcome.device_us is not None:
            result.device_us = outcome.device_us
        if outcome.numerics is not None:
            result.numerics = outcome.numerics
        if outcome.outputs_path:
            job.outputs_path = outcome.outputs_path
        if outcome.truncated:
            self._state.emit(ev.Log(
                job_id=result.job_id, level="warning",
                message=f"{result.func_name} [{result.variant}/{result.backend}]: --max-time stopped "
                        f"sampling early ({len(result.samples_us)} samples so far)"))


def bench_spec(state: SessionState, config: SessionConfig, target: Target, scratch_dir: str, job_id: str, iters: int,
               rounds: int, last: bool, baseline_id: str | None, *, first: bool = True, placement: int = 0
               ) -> BenchSpec:
    """What the benchmark worker runs for one round of job `job_id` (its numerics in the round that checks them)."""
    from ..bench.worker import BenchSpec

    job = state.job(job_id)
    assert job.command is not None and job.backend is not None, job_id   # bad input lines are never measured
    is_baseline = job_id == baseline_id
    # MIOpenDriver's -V 1 asks for this command's numerics even where they are off (--no-numerics) or opt-in
    # (boo-driver without --verify-numerics); -V 0 is its default, not a request, and changes nothing
    # (the baseline checks its numerics, and saves its outputs, in the first round; the others in the last)
    verify = (config.verify_numerics or job.command.verify == 1) and (first if is_baseline else last) \
        and job.backend == IREE
    outputs = None
    compare_with = None
    if verify and is_baseline:
        outputs = os.path.join(scratch_dir, f"{job_id}.outputs.pt")
    elif verify and baseline_id is not None:
        compare_with = state.job(baseline_id).outputs_path
    return BenchSpec(
        job_id=job_id,
        backend=job.backend,
        sig=job.command.signature,
        target_name=target.name,
        vmfb_path=str(job.artifact.vmfb_path) if job.artifact is not None else None,
        driver=target.driver,
        threads=config.threads,
        iters=iters,
        min_time_s=(min_time / rounds) if (min_time := job.min_time_s or config.min_time_s) else None,
        max_time_s=config.max_time_s / rounds,
        seed=config.seed,
        splat_value=config.splat_value,
        verify_numerics=verify,
        numerics=config.numerics,
        save_outputs_to=outputs,
        compare_outputs_with=compare_with,
        timeout_s=config.bench_timeout_s,
        # the first round warms the kernel up (loading, page faults); a later round only needs to bring
        # it back into the caches after the other jobs of the group ran
        warmup_s=FIRST_WARMUP_S if first else LATER_WARMUP_S,
        cache_mode=job.variant.cache_mode or config.cache_mode,   # a `cache=cold` variant: its own
        device_timing=last and target.kind != "cpu",
        placement=placement,
    )


def chunk_of(iters: int, rounds: int, r: int) -> int:
    """Round r's share of a job's `iters` iterations over `rounds` rounds (the first rounds take the rest)."""
    base = iters // rounds
    return base + (1 if r < iters % rounds else 0)
