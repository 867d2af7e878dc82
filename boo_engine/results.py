"""The data that flows from the session to the store, the exports and the dashboard.

Plain dataclasses, JSON-able through `to_dict()`, picklable across processes. One `JobResult` is one
(command, variant, target, backend) measurement, finished or failed.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """Where a job is, in the order a job moves through them. The values are what SQLite and the exports store."""

    QUEUED = "queued"
    EXPORTING = "exporting"
    COMPILING = "compiling"
    CACHED = "cached"            # compiled artifact found in the cache, waiting to be measured
    MEASURING = "measuring"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"      # the user cancelled this job
    INTERRUPTED = "interrupted"  # the run stopped (quit, kill) before this job finished

    @property
    def final(self) -> bool:
        return self in FINAL_STATUSES


class RunStatus(StrEnum):
    """What a whole run ended as (a run is never "cancelled": cancelling stops jobs, not the run)."""

    RUNNING = "running"
    DONE = "done"                # every job succeeded
    FAILED = "failed"            # some job failed
    INTERRUPTED = "interrupted"  # the session closed (quit, Ctrl-C, kill) with work in flight


class Backend(StrEnum):
    """Who runs the kernel: the IREE-compiled kernel, or the same signature in eager PyTorch on the same device."""

    IREE = "iree"
    TORCH = "torch"


class NumericsVerdict(StrEnum):
    """A kernel's outputs against the reference (boo_engine/numerics.py): BOO's criteria met or not."""

    PASS = "pass"
    FAIL = "fail"


class CacheMode(StrEnum):
    """Caches between timed calls (--cache-mode): left warm, or flushed before every call outside the timing."""

    WARM = "warm"
    COLD = "cold"


# Short names, used across the engine.
QUEUED, EXPORTING, COMPILING, CACHED = Status.QUEUED, Status.EXPORTING, Status.COMPILING, Status.CACHED
MEASURING, DONE, FAILED = Status.MEASURING, Status.DONE, Status.FAILED
CANCELLED, INTERRUPTED = Status.CANCELLED, Status.INTERRUPTED
FINAL_STATUSES: frozenset[Status] = frozenset({DONE, FAILED, CANCELLED, INTERRUPTED})
IREE, TORCH = Backend.IREE, Backend.TORCH
#: the variant and backend columns of a bad input line, which has neither
NO_VARIANT = "-"
NO_BACKEND = "-"


def is_bad_input(r: JobResult) -> bool:
    """A line of the input that is no command (failed as it was read): no variant, no backend, no kernel."""
    return r.backend == NO_BACKEND and r.variant == NO_VARIANT


@dataclass
class Stats:
    """Latency statistics of one measurement, in microseconds per kernel call."""

    n: int
    min_us: float
    max_us: float
    mean_us: float
    stddev_us: float
    median_us: float
    p10_us: float
    p90_us: float
    iqr_us: float
    gflops: float | None = None   # flops / median
    gbps: float | None = None     # bytes / median

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class CompileInfo:
    """How the kernel's artifact came to be (absent for the torch backend)."""

    seconds: float = 0.0            # compile (and export) wall time; 0 on a cache hit
    cache_hit: bool = False
    command: list[str] = field(default_factory=list)   # exact iree-compile command line
    artifact: str | None = None     # path of the .vmfb
    key: str | None = None          # cache key
    compiler_version: str | None = None
    num_dispatches: int | None = None
    error: str | None = None        # compiler stderr on failure
    spec_applied: bool | None = None  # variants with a tuning spec: did it change the kernel?
    decompositions: list[str] = field(default_factory=list)  # ops torch decomposed for IREE (compile/lowering.py)
    #: how the kernel was built, one line: "ours" (our export, this machine's per-op defaults), "boo:
    #: iree-turbine 3.9.0" (BOO's export and flags) or "boo: our export (why BOO's is not used)"; None: unknown
    #: (a kernel cached before builds were recorded)
    build: str | None = None
    #: the `best` column: what chose this kernel's configuration ("rules", "table", "tune N"); None otherwise
    chosen_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class NumericsInfo:
    verdict: NumericsVerdict
    stats: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.verdict = NumericsVerdict(self.verdict)   # (a stored row gives the text; anything else is refused)

    @property
    def failed(self) -> bool:
        return self.verdict is NumericsVerdict.FAIL

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class NumericsCriteria:
    """The numerics criteria and how many error samples they are judged on (boo_engine/numerics.py says why);
    the defaults are BOO's (iree-turbine driver/numerics.py), its boo-driver flags change them."""

    mean_atol: float = 1e-5       # --numerics-mean-atol: |mean err| below this always passes
    mean_rtol: float = 0.2        # --numerics-mean-rtol: ... or below this times std(err)
    stddev_atol: float = 1e-5     # --numerics-stddev-atol: std(err) below this always passes
    stddev_rtol: float = 1.2      # --numerics-stddev-rtol: ... or below this times std(torch err)
    min_samples: int = 1000       # --numerics-min-samples: error samples of the main output (more seeds if needed)
    reference_dtype: str = "float64"   # --numerics-reference-dtype: float64 | float32
    structured: bool = True       # False: --skip-structured-tests
    #: seeds judged at most (a 1-element output with --numerics-min-samples 10^6 does not run 10^6 times)
    max_batches: int = 64


@dataclass(slots=True)   # a session holds one per job: 200,000 of them were 1.5 KB each with a __dict__
class JobResult:
    job_id: str
    command: str                    # the op's command text (timing args stripped)
    func_name: str
    op: str
    variant: str                    # "baseline" or the variant's name
    target: str                     # "cpu", "hip:gfx942", "cuda:sm_80"
    backend: str                    # IREE or TORCH (NO_BACKEND for a bad input line)
    status: Status = QUEUED
    error: str | None = None        # one line: why it failed
    source: str | None = None       # "file:line" when it came from a commands file
    calls: int | None = None        # the command's weight in the model it was captured from (`# boo-tui:` line):
    share: float | None = None      # times the model called it, its share of the capture's compute total in %,
    captured_us: float | None = None  # and those calls' time in the capture (us; None when the line gives none)
    stats: Stats | None = None
    #: samples_us, cpu_us and rounds are the shared empty tuple while empty (three empty lists were 168 of a queued
    #: job's ~1,300 bytes); `sample_lists` gives them as lists of the result's own to add to
    samples_us: Sequence[float] = ()
    block_k: int | None = None      # calls per sample (samples are per-call means of a block of k calls)
    warmup_calls: int | None = None
    noisy: bool = False
    noise_reason: str | None = None
    host_load: float | None = None  # CPU time other processes took during the measurement, as a fraction of one core
    #: per sample (parallel to samples_us), the measuring thread's CPU time per call where the kernel runs on that
    #: thread alone (CPU, one thread); empty otherwise. The headline uses it: boo_engine/disturbance.py
    cpu_us: Sequence[float] = ()
    #: samples per measuring round, in order (each round a fresh placement of the inputs on the CPU); the
    #: comparisons take their confidence from the rounds (compare.py)
    rounds: Sequence[int] = ()
    disturbed: int | None = None    # samples during which the thread lost its core (None: no thread clock)
    steal: float | None = None      # CPU-s per wall second the hypervisor took from the VM while this was measured
    numerics: NumericsInfo | None = None
    compile: CompileInfo | None = None
    reproducer: str | None = None   # shell command that reproduces the measurement outside the tool
    started_at: float | None = None
    finished_at: float | None = None
    #: "warm" (inputs left in cache between calls, the default) or "cold" (caches flushed before every call,
    #: the flush outside the timed region): --cache-mode
    cache_mode: CacheMode = CacheMode.WARM
    #: the device that measured it: "cpu", "cuda:0", "hip:1" (--devices spreads jobs over several)
    device: str | None = None
    node: str | None = None         # the Ray node that measured it (--ray: host/node-id); None: this host
    #: the least time the kernel's FLOPs and bytes allow on this machine's measured peaks (`boo-tui peak`), and
    #: roofline_us / median_us x 100 (never above 100: a result above it means the peak was wrong)
    roofline_us: float | None = None
    pct_roofline: float | None = None
    #: GPU: the device time of the kernel's dispatches alone per call (median over profiled calls, from the
    #: profiler, as iree-boo-driver reports), beside the wall time per call that `stats` holds
    device_us: float | None = None
    #: GPU: detail of the device timing (per-dispatch medians, calls profiled) and the GPU's state while measured
    #: (clocks, temperature, power, throttle reasons before and after: nvidia-smi), JSON-able
    device_detail: dict[str, Any] | None = None
    #: a throttle reason other than idle was active while measuring (the samples are suspect)
    throttled: bool = False
    #: a model (`boo-tui model`): where one pass's time goes, JSON-able: per kernel of ours its calls and
    #: microseconds per pass, the rest ("other": the nested backend's ops and the glue), the ops left to the
    #: nested backend and the time torch.compile took (see modelbench/breakdown.py)
    breakdown: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        # one form for "none yet" (a result read back equals the one stored): the shared empty tuple
        if not self.samples_us:
            self.samples_us = ()
        if not self.cpu_us:
            self.cpu_us = ()
        if not self.rounds:
            self.rounds = ()

    def clear_measurement(self) -> None:
        """Forget what measuring this job set (samples, stats, numerics, where and how it ran), keeping what it is
        and how it was built: a rerun, or a group moved to another device, measures it anew."""
        self.error = self.stats = self.block_k = self.warmup_calls = self.noise_reason = self.host_load = None
        self.numerics = self.reproducer = self.started_at = self.finished_at = self.device = self.node = None
        self.disturbed = self.steal = self.device_us = self.device_detail = None
        self.samples_us, self.cpu_us, self.rounds = (), (), ()
        self.noisy = self.throttled = False

    def sample_lists(self) -> tuple[list[float], list[float], list[int]]:
        """samples_us, cpu_us and rounds as lists of this result's own (made so on first use), to add to."""
        samples = self.samples_us if isinstance(self.samples_us, list) else list(self.samples_us)
        cpu = self.cpu_us if isinstance(self.cpu_us, list) else list(self.cpu_us)
        rounds = self.rounds if isinstance(self.rounds, list) else list(self.rounds)
        self.samples_us, self.cpu_us, self.rounds = samples, cpu, rounds
        return samples, cpu, rounds

    @property
    def median_us(self) -> float | None:
        """The headline median per call (us), None before the job was measured."""
        return self.stats.median_us if self.stats is not None else None

    @property
    def where(self) -> str:
        """Where it was measured: its device, with the Ray node when a cluster measured it (cpu@host/1a2b3c4d);
        "" before it was measured."""
        if not self.device:
            return ""
        return f"{self.device}@{self.node}" if self.node else self.device

    @property
    def timed_us(self) -> Sequence[float]:
        """The samples the headline, the intervals and the verdicts are taken over: per sample the time the kernel
        ran (wall time, or thread CPU time where the thread lost its core: boo_engine/disturbance.py)."""
        from .disturbance import effective_samples

        return effective_samples(self.samples_us, self.cpu_us) if self.cpu_us else self.samples_us

    def to_dict(self, *, samples: bool = True) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if not samples:
            d.pop("samples_us")
            d.pop("cpu_us")
        return d
