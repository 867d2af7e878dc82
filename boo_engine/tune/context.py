"""A tune's settings, and the context a kernel's search is handed: what the search and the offline path need of
the tune they are part of (its session and records, its clock and stop, how a candidate becomes a variant), made by
`Tuner` once its session exists, so that neither holds the tuner itself (nor asserts that its session is there).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..config import RunSettings

if TYPE_CHECKING:
    from ..session import Session
    from ..variants import Variant
    from .events import TuneEvent
    from .records import TuneRecords
    from .space import Candidate


@dataclass
class TuneSettings(RunSettings):
    """A tune's settings: a session's (RunSettings: target, threads, seed, database, cache, compile workers,
    min effect, command line, Ray) and the search's own."""

    out_dir: str = "tuned"
    budget: int = 32                     # candidates per kernel (global choices + tile configurations)
    time_budget_s: float | None = None   # for the whole tune: no new candidate after it
    batch: int = 8                       # candidates compiled, then screened, together
    screen_s: float = 0.05               # measuring time per candidate per screening batch
    halving_s: tuple[float, ...] = (0.2, 0.5)
    final_s: float = 1.5
    keep: int = 4                        # candidates entering successive halving
    resume: int | str | None = None
    try_flags: tuple[str, ...] = ()      # the user's own flag sets, tried on every kernel as global choices

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["halving_s"] = list(self.halving_s)
        return d


@dataclass(frozen=True)
class TuneContext:
    """What one kernel's search (tune/kernel.py) and the compile-only path (tune/offline.py) use of their tune."""

    settings: TuneSettings
    session: Session
    records: TuneRecords
    emit: Callable[[TuneEvent], None]
    #: the tune was stopped, or its time budget is spent: no new candidate
    out_of_time: Callable[[], bool]
    is_stopped: Callable[[], bool]
    #: the variant that builds a candidate, and the text that configures its root op
    variant_for: Callable[[Candidate], tuple[Variant, str | None]]
    #: (func, key, text, flags, formulation, dispatch) -> the kernel-scoped variant of a (stored) candidate
    candidate_variant: Callable[[str, str, str | None, Sequence[str], str | None, str | None], Variant]

    @property
    def stopped(self) -> bool:
        return self.is_stopped()
