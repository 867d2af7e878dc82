"""The last stage: from a measured job to its final result, then the verdicts of its command.

Owns what is decided once a job has all its samples: statistics, the noise check (with the other processes'
load over the whole job), the reproducer script, whether a tuning spec really applied, whether the numerics
check failed, and then DONE (with an error that says why the result must not be trusted, when it must not).
Once a command's group is final, `publish_comparisons` emits the engine's verdicts for it (`compare_columns()`:
the same function and settings the exports use).

Statistics, reproducer and comparison modules are imported lazily (scipy and friends cost startup time).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .. import events as ev
from ..config import SessionConfig
from ..limits import Roofline
from ..results import DONE, FAILED, IREE, CacheMode, JobResult
from ..targets import Target
from .compiling import check_spec_applied
from .recording import RunRecorder
from .state import SessionState

if TYPE_CHECKING:
    from ..compare import Comparison
    from ..ops.base import OpSignature
    from ..weights import ModelLine

#: /proc/stat counts CPU time in 10 ms ticks: other processes' load only flags a result as noisy once it
#: amounts to two ticks over the job's measuring time (below that it cannot be told from the quantisation).
HOST_LOAD_RESOLUTION_S = 0.02


def compare_columns(results: Iterable[JobResult],
                    config: SessionConfig) -> dict[tuple[str, str, str], Comparison]:
    """Every finished variant (and the torch reference) against the baseline of the same command, with the
    session's --min-effect and seed: {(target, command, column): Comparison}."""
    from ..comparisons import compare_results

    return compare_results(results, min_effect=config.min_effect, seed=config.seed)


def model_lines_of(results: list[JobResult], comparisons: dict[tuple[str, str, str], Comparison] | None,
                   config: SessionConfig) -> list[ModelLine]:
    """Every column's model line (`weights.model_lines`: sum of calls x median of the weighted commands, its ratio
    to the baseline with a CI and a verdict) with the session's --min-effect and seed; [] without weights.
    `comparisons` None: computed here (compare_columns)."""
    from ..weights import has_weights, model_lines

    if not has_weights(results):
        return []
    if comparisons is None:
        comparisons = compare_columns(results, config)
    return model_lines(results, comparisons, min_effect=config.min_effect, seed=config.seed)


class Finalizer:
    def __init__(self, state: SessionState, recorder: RunRecorder, config: SessionConfig, target: Target) -> None:
        self._state = state
        self._recorder = recorder
        self._config = config
        self._target = target
        #: the run's peaks (looked up, or measured, on the first result: on this, the engine's thread)
        self.roofline = Roofline(target, config.threads, recorder.store, lambda: recorder.run_id)

    def complete(self, job_id: str) -> None:
        """Turn a job's samples into its final result (DONE, or FAILED when nothing was measured)."""
        from ..bench.stats import compute_stats, noise_check
        from ..disturbance import disturbed_count

        job, result = self._state.job(job_id), self._state.jobs[job_id]
        assert job.command is not None, job_id   # bad input lines are never measured
        sig = job.command.signature
        if not result.samples_us:
            self._recorder.finish(result, FAILED, error="no samples were measured")
            return
        # The headline is the time the kernel ran: a sample whose thread lost its core counts its CPU time
        # (boo_engine/disturbance.py); the raw wall samples stay in samples_us.
        result.disturbed = disturbed_count(result.samples_us, result.cpu_us)
        result.stats = compute_stats(result.timed_us, flops=sig.flops or None, bytes_=sig.bytes)  # 0: no formula
        load = result.host_load if job.load_cpu_s >= HOST_LOAD_RESOLUTION_S else None
        result.noisy, result.noise_reason = noise_check(result.stats, load)
        if result.disturbed:
            note = (f"{result.disturbed} of {len(result.samples_us)} samples lost their core (counted at the "
                    f"thread's CPU time)")
            result.noise_reason = "; ".join(filter(None, [result.noise_reason, note]))
        if result.throttled:   # the GPU slowed itself while measuring (bench/gpu_timing.py): flag, keep samples
            state = (result.device_detail or {}).get("gpu_state") or {}
            why = ", ".join(state.get("throttle_reasons") or []) or "throttled"
            note = f"GPU {why} during {state.get('throttled_share', 0) * 100:.0f}% of the measurement"
            result.noisy, result.noise_reason = True, "; ".join(filter(None, [result.noise_reason, note]))
        self._roofline(result, sig)
        if job.backend == IREE and job.artifact is not None:
            try:
                from ..bench.reproducer import write_reproducer

                result.reproducer = write_reproducer(
                    job.artifact.dir, sig, self._config.seed, self._target.driver, self._config.threads,
                    vmfb_path=job.artifact.vmfb_path, splat_value=self._config.splat_value,
                    scratch_dir=job.artifact.scratch_dir or None,
                )
                if result.cache_mode == CacheMode.COLD:   # the reproducer cannot flush between its calls
                    result.reproducer += "  # warm caches: iree-benchmark-module does not flush between calls"
            except Exception as e:  # noqa: BLE001 - a missing reproducer must not lose a measurement
                self._state.emit(ev.Log(job_id=job_id, level="warning", message=f"reproducer not written: {e}"))
        error = None
        if job.variant.tuning_specs and result.compile is not None:
            result.compile.spec_applied = check_spec_applied(self._state, job_id)
            if result.compile.spec_applied is False:
                error = "spec not applied: the tuning spec matched no dispatch, this is NOT a tuned result"
        if result.numerics is not None and result.numerics.failed:
            error = "numerics check failed" + (f"; {error}" if error else "")
        self._recorder.finish(result, DONE, error=error)

    def _roofline(self, result: JobResult, sig: OpSignature) -> None:
        """The result's roofline_us and pct_roofline on the run's peaks; when a result beat them the peaks
        changed, and the run's finished results get theirs again."""
        version = self.roofline.version
        for notice in self.roofline.apply(result, sig.flops, sig.bytes, sig.dtype_name):
            self._state.emit(ev.Log(job_id=result.job_id, level="warning", message=notice))
        if self.roofline.version == version:
            return
        with self._state.lock:
            done = [r for r in self._state.jobs.values() if r.status == DONE and r is not result]
        for other in done:
            job = self._state.plan.planned.get(other.job_id)
            if job is not None and job.command is not None:
                s = job.command.signature
                self.roofline.apply(other, s.flops, s.bytes, s.dtype_name)
                self._recorder.record(other)

    def publish_comparisons(self, command: str) -> None:
        """The verdicts of one command's columns, as the exports will give them (same function, same settings)."""
        with self._state.lock:
            results = [r for r in self._state.jobs.values() if r.command == command]
        comparisons = compare_columns(results, self._config)
        self._state.emit(ev.ComparisonsUpdated(
            target=self._target.name, command=command,
            comparisons={label: c for (_, _, label), c in comparisons.items()}))
