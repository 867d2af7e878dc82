"""What crosses the pipes between a `BenchWorker` and its child process: the job (`BenchSpec`), its outcome
(`BenchOutcome`) and the messages that carry them.

Every message is a small frozen dataclass, dispatched by type on the receiving side, so a misspelt kind or a
missing field is an error where the message is built, not a silently ignored tuple. Every message about a job
carries the job's sequence number: a message of an earlier job (a late sample batch, the answer to a job whose
cancel already ran out) is recognised by its `seq` and dropped.

  parent -> child: RunJob | CancelJob | Close
  child -> parent: Ready | Samples | JobDone | JobFailed | JobCancelled

This module is imported by the spawned child before anything else: it imports nothing heavy (no torch, no IREE).
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypedDict

from ..results import Backend, CacheMode, NumericsCriteria, NumericsInfo

if TYPE_CHECKING:
    from ..ops.base import OpSignature


class DispatchTiming(TypedDict, total=False):
    """The dispatches' time per call (the result's `device_detail["dispatch"]`), as either profiler gives it:
    the figures (CUPTI's `gpu_timing.summarize_dispatches`: device_us to source; IREE's `ireeprof.summarize`
    adds event_type to host_events_ignored, and `ireeprof.profile` the capture's mode, wall_us and capture_s),
    or {"error": why} (with the source when IREE's profiler said it). "iree_profile_error": why IREE's profiler
    was not used for a figure CUPTI gave."""

    device_us: float                  # median over calls of the dispatches' summed time
    dispatches: float                 # median number of dispatches per call
    per_dispatch_us: dict[str, float]  # each dispatch's median, by name
    calls: int
    source: str                       # "torch.profiler (CUPTI)" or "iree-profile"
    event_type: str
    timing_source: str
    dropped_calls: int
    invalid_events: int
    host_events_ignored: int
    mode: str                         # --device_profiling_mode
    wall_us: float | None             # iree-benchmark-module's time per call while profiling
    capture_s: float
    error: str
    iree_profile_error: str


class GpuState(TypedDict):
    """The GPU's state while a job measured (`GpuMonitor.summary()`, `merge_gpu_state` of its rounds): kept in the
    result's `device_detail["gpu_state"]`. `before` / `after` are single readings (sm_mhz, mem_mhz, temp_c,
    power_w, reasons, t)."""

    before: dict[str, float] | None
    after: dict[str, float] | None
    polls: int
    sm_mhz_min: float | None
    sm_mhz_max: float | None
    temp_c_max: float | None
    power_w_max: float | None
    throttled_share: float
    throttle_reasons: list[str]
    source: str | None             # "nvml" or "nvidia-smi" (None: a merge of states that did not say)


@dataclass(frozen=True)
class BenchSpec:
    """One measurement to run in the worker. Picklable: it crosses the process boundary."""

    job_id: str
    backend: Backend
    sig: OpSignature                    # picklable
    target_name: str = "cpu"            # the device: "cpu", "hip:gfx942", "cuda:sm_80"
    vmfb_path: str | None = None        # iree backend: the compiled artifact
    driver: str = "local-sync"          # IREE runtime driver; on CPU replaced by local-sync/local-task per threads
    threads: int = 1                    # CPU threads (IREE local-task workers and torch threads)
    iters: int = 100
    min_time_s: float | None = None
    max_time_s: float | None = 60.0
    seed: int = 0
    splat_value: float | None = None
    verify_numerics: bool = False
    numerics: NumericsCriteria = field(default_factory=NumericsCriteria)   # how verify_numerics judges
    save_outputs_to: str | None = None  # torch.save the outputs of one call here (baselines, for variants)
    compare_outputs_with: str | None = None  # numerics vs these saved outputs instead of the float64 reference
    timeout_s: float | None = None      # None: default_timeout_s(self)
    function: str = "main"              # exported function of the vmfb
    warmup_s: float = 0.1
    cache_mode: CacheMode = CacheMode.WARM   # COLD: caches flushed before every call, untimed (bench/flush.py)
    device_timing: bool = False         # also profile the dispatches' time: IREE's profiler (bench/ireeprof.py),
                                        # else CUPTI (bench/gpu_timing.py, GPU only)
    #: the measuring round this spec is: a CPU job's inputs get a fresh placement each round (bench/placement.py)
    placement: int = 0


class DeviceDetail(TypedDict, total=False):
    """What a measurement says of its device beside the samples (`BenchOutcome.device_detail`): on a GPU its state
    while measured and the flush; on the CPU the flush where caches were flushed; the dispatches' time where
    device timing was asked (bench/dispatch_time.py)."""

    gpu_state: GpuState | None
    flush: str | None                   # how the caches were flushed between calls (cold caches)
    dispatch: DispatchTiming


@dataclass
class BenchOutcome:
    """What a finished measurement sends back (the samples were already streamed; they come again, complete)."""

    samples_us: list[float]
    block_k: int
    warmup_calls: int
    wall_s: float
    host_load: float | None
    numerics: NumericsInfo | None = None
    outputs_path: str | None = None
    driver: str | None = None           # the IREE driver actually used (None for torch)
    threads: int = 1
    truncated: bool = False             # max_time_s stopped sampling early
    overhead_fraction: float | None = None  # estimated harness cost per call / call time
    cache_mode: CacheMode = CacheMode.WARM
    device_us: float | None = None      # median time of the dispatches per call (profiler; device_detail says which)
    device_detail: DeviceDetail | None = None   # GPU: dispatch timing detail, GPU state while measured, flush
    throttled: bool = False             # GPU: a clock-throttle reason was active while measuring
    #: per sample, the measuring thread's CPU time (us per call) where the kernel runs on that thread alone
    #: (CPU, one thread); None otherwise (boo_engine/disturbance.py)
    cpu_us: list[float] | None = None
    steal: float | None = None          # CPU-s per wall second the hypervisor took from this VM while measuring


# ---- parent -> child ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunJob:
    """Measure `spec`; every answer about it carries `seq`."""

    seq: int
    spec: BenchSpec


@dataclass(frozen=True)
class CancelJob:
    """Stop job `seq` at the next sample boundary (ignored if that job already ended)."""

    seq: int


@dataclass(frozen=True)
class Close:
    """Finish the job in hand, if any, and exit."""


ToChild = RunJob | CancelJob | Close


# ---- child -> parent ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ready:
    """The child imported torch and IREE and set its thread count: it takes jobs now."""

    pid: int


@dataclass(frozen=True)
class Samples:
    """Samples (microseconds per call) of job `seq` taken since the previous batch."""

    seq: int
    samples_us: tuple[float, ...]


@dataclass(frozen=True)
class JobDone:
    seq: int
    outcome: BenchOutcome


@dataclass(frozen=True)
class JobFailed:
    """Job `seq` failed inside a child that stays up (the kernel raised, an artifact would not load)."""

    seq: int
    reason: str                         # one line, for the user


@dataclass(frozen=True)
class JobCancelled:
    """Job `seq` stopped after a CancelJob, between two samples."""

    seq: int


JobMessage = Samples | JobDone | JobFailed | JobCancelled
FromChild = Ready | JobMessage


class MeasuringWorker(Protocol):
    """What a device's measure stage (session/measuring.py) uses of the worker that measures for it: a local
    benchmark process (`bench.worker.BenchWorker`) or a Ray node's actor (`cluster.measuring.RayBenchWorker`).
    What differs is said by `remote`, not found by probing for methods."""

    device: str

    @property
    def remote(self) -> bool:
        """A cluster node's worker: started in the background when asked, never replaced by us, killed by Ray."""
        ...

    @property
    def node(self) -> str | None:
        """The cluster node it measures on (what results record); None for a local process."""
        ...

    @property
    def pid(self) -> int | None: ...

    def start(self) -> None:
        """Start now (its torch import then overlaps the compiles)."""
        ...

    def run(self, spec: BenchSpec, on_samples: Callable[[list[float]], None] | None = None,
            cancel: threading.Event | None = None) -> BenchOutcome: ...

    def close(self) -> None: ...

    def kill_now(self) -> None:
        """Last resort (a second Ctrl-C): kill it at once, taking no lock."""
        ...
