"""What a tune reports as it goes (to the headless progress bar and the dashboard's tune view). Frozen and
keyword-only like the session's events; delivered on the tuner's thread, so a listener must only hand them on."""
from __future__ import annotations

from dataclasses import dataclass

from .records import TunedKernel


@dataclass(frozen=True, kw_only=True)
class TuneUpdate:
    """Where the search of one kernel stands."""

    func_name: str
    command: str
    index: int                       # 1-based, of `total` kernels
    total: int
    stage: str                       # baseline | global | tiles | halving | final | done
    tried: int = 0                   # candidates proposed so far
    compiled: int = 0
    failed: int = 0                  # did not compile, did not apply or failed numerics
    measured: int = 0
    best_ratio: float | None = None  # the leader's time / the baseline's (< 1: faster)
    best: str | None = None          # what the leader changes
    leader_job: str | None = None    # session job ids: the dashboard draws their samples
    baseline_job: str | None = None
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class KernelTuned:
    kernel: TunedKernel
    index: int
    total: int


@dataclass(frozen=True, kw_only=True)
class TuneLog:
    level: str                       # info | warning | error
    message: str


TuneEvent = TuneUpdate | KernelTuned | TuneLog
