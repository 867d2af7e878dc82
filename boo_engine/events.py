"""Events a Session emits while it works. Both front ends (the dashboard and the headless runner) are driven by
these and nothing else. Listeners are called from engine threads: a listener must be quick and thread-safe
(the dashboard posts a Textual message; the headless runner updates a progress bar).

Events are frozen: one event object reaches every consumer (the dashboard's bridge buffers them across threads),
so nobody may change one on its way. Fields the session always sets are required (keyword-only, so they can
follow the base class's optional `job_id`): a consumer never has to guess whether e.g. `JobFinished.result` is
there.
"""
from __future__ import annotations

from dataclasses import dataclass

from .compare import Comparison
from .results import JobResult, RunStatus, Status


@dataclass(frozen=True, kw_only=True)
class Event:
    job_id: str | None = None            # the job concerned; None for run-wide events


@dataclass(frozen=True, kw_only=True)
class RunStarted(Event):
    run_id: int
    total_jobs: int


@dataclass(frozen=True, kw_only=True)
class JobQueued(Event):
    result: JobResult                    # the job's initial record (status queued, or failed for a bad line)


@dataclass(frozen=True, kw_only=True)
class JobStatus(Event):
    """A job moved to another status (exporting, compiling, cached, measuring, ...)."""
    status: Status
    detail: str | None = None


@dataclass(frozen=True, kw_only=True)
class CompileFinished(Event):
    ok: bool
    seconds: float = 0.0
    cache_hit: bool = False
    error: str | None = None             # set when not ok


@dataclass(frozen=True, kw_only=True)
class SamplesAdded(Event):
    """A batch of new latency samples (microseconds) of a job being measured. `total` counts all so far."""
    samples_us: list[float]
    total: int
    target_count: int                    # the job's --iter goal, for progress


@dataclass(frozen=True, kw_only=True)
class JobFinished(Event):
    """A job reached a final status; `result` is complete (stats, numerics, compile info, reproducer)."""
    result: JobResult


@dataclass(frozen=True, kw_only=True)
class ComparisonsUpdated(Event):
    """The engine's verdicts for one command, emitted once its jobs (a measured group) are final: every column
    (variant name, or "torch") against the baseline, with the run's --min-effect and seed: exactly what the
    exports will say. Front ends show these; they never re-decide."""
    target: str
    command: str
    comparisons: dict[str, Comparison]   # column label -> Comparison


@dataclass(frozen=True, kw_only=True)
class RunFinished(Event):
    run_id: int
    status: RunStatus                    # done | failed | interrupted
    ok: int
    failed: int


@dataclass(frozen=True, kw_only=True)
class Log(Event):
    """A diagnostic line for the user (warnings, noisy-host notices)."""
    message: str
    level: str = "info"                  # info | warning | error
