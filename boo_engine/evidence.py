"""What each side of a comparison carries beside its numbers, and when a side's timing cannot carry a verdict at all.

`Evidence` is shown next to every cross-run verdict (`boo-tui compare`, its exports, the dashboard's run
comparison) so a reader can judge it: the rounds the confidence came from, the samples whose thread lost its core
(boo_engine/disturbance.py), other processes' load, the hypervisor's steal, the noisy flag. `untrusted` names what
the method cannot take out, which makes a faster/slower verdict unclear (compare.py).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from .disturbance import LOAD_LIMIT, round_sizes
from .results import JobResult

T = TypeVar("T")


@dataclass(frozen=True)
class Evidence:
    """What one side of a comparison carries beside its numbers: shown next to the verdict (compare, exports,
    the dashboard) so a reader can judge it."""

    samples: int
    rounds: int                  # measuring rounds the confidence was taken over
    disturbed: int | None        # samples whose thread lost its core (None: no thread clock)
    host_load: float | None      # other processes' CPU, in cores
    steal: float | None          # the hypervisor's steal, in cores
    noisy: bool
    noise_reason: str | None
    throttled: bool

    @classmethod
    def of(cls, r: JobResult) -> Evidence:
        return cls(len(r.samples_us), len(round_sizes(len(r.samples_us), r.rounds)), r.disturbed, r.host_load,
                   r.steal, bool(r.noisy), r.noise_reason, bool(r.throttled))

    def short(self) -> str:
        """`5 rounds, 3% lost their core, load 0.12, steal 0.04, noisy`: the parts that say something."""
        parts = [f"{self.rounds} rounds"]
        if self.disturbed:
            parts.append(f"{self.disturbed * 100 / max(self.samples, 1):.0f}% lost their core")
        if self.host_load is not None and self.host_load >= 0.05:
            parts.append(f"load {self.host_load:.2f}")
        if self.steal is not None and self.steal >= 0.01:
            parts.append(f"steal {self.steal:.2f}")
        if self.throttled:
            parts.append("GPU throttled")
        if self.noisy:
            parts.append("noisy")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {k: _json_float(v) for k, v in asdict(self).items()}


def _json_float(v: T) -> T | None:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def untrusted(*results: JobResult) -> str | None:
    """Why these results' timing cannot carry a faster/slower verdict, whatever the rounds say: a GPU that
    throttled while measuring, or a kernel with no thread clock (multi-threaded, GPU) measured beside other
    processes' load (a single-threaded CPU kernel's lost time is taken out: boo_engine/disturbance.py)."""
    reasons = []
    for r in results:
        side = f"{r.variant}/{r.backend}"
        if r.throttled:
            reasons.append(f"{side}: the GPU throttled while measuring")
        elif r.target == "cpu" and not r.cpu_us and r.host_load is not None and r.host_load > LOAD_LIMIT:
            reasons.append(f"{side}: other processes took {r.host_load * 100:.0f}% of a core and this kernel has "
                           "no per-thread clock to take them out")
    return "; ".join(dict.fromkeys(reasons)) or None
