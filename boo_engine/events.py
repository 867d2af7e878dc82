"""Events a Session emits while it works. Both front ends (the dashboard and the headless runner) are driven by
these and nothing else. Listeners are called from engine threads: a listener must be quick and thread-safe
(the dashboard posts a Textual message; the headless runner updates a progress bar).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .compare import Comparison
from .results import JobResult


@dataclass
class Event:
    job_id: str | None = None


@dataclass
class RunStarted(Event):
    run_id: int = 0
    total_jobs: int = 0


@dataclass
class JobQueued(Event):
    result: JobResult | None = None     # the job's initial record (status queued)


@dataclass
class JobStatus(Event):
    """A job moved to another status (exporting, compiling, cached, measuring, ...)."""
    status: str = ""
    detail: str | None = None


@dataclass
class CompileFinished(Event):
    ok: bool = True
    seconds: float = 0.0
    cache_hit: bool = False
    error: str | None = None


@dataclass
class SamplesAdded(Event):
    """A batch of new latency samples (microseconds) of a job being measured. `total` counts all so far."""
    samples_us: list[float] = field(default_factory=list)
    total: int = 0
    target_count: int | None = None      # the --iter goal, for progress


@dataclass
class JobFinished(Event):
    """A job reached a final status; `result` is complete (stats, numerics, compile info, reproducer)."""
    result: JobResult | None = None


@dataclass
class ComparisonsUpdated(Event):
    """The engine's verdicts for one command, emitted once its jobs (a measured group) are final: every column
    (variant name, or "torch") against the baseline, with the run's --min-effect and seed: exactly what the
    exports will say. Front ends show these; they never re-decide."""
    target: str = ""
    command: str = ""
    comparisons: dict[str, Comparison] = field(default_factory=dict)   # column label -> Comparison


@dataclass
class RunFinished(Event):
    run_id: int = 0
    status: str = "done"                 # a RunStatus: done | failed | interrupted
    ok: int = 0
    failed: int = 0


@dataclass
class Log(Event):
    """A diagnostic line for the user (warnings, noisy-host notices)."""
    level: str = "info"
    message: str = ""
